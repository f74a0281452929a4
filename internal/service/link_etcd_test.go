package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/store/etcdstore/etcdtest"
)

// Over etcd a link or unlink stores the applied spec with the vNIC moved
// or cut as the next generation, with its history entry and event, finds
// the infrastructure by its VM when not named, refuses a VM or vNIC the
// spec lacks, and is stored only on top of the generation it was worked
// out from.
func TestClusterLinkStoresAGeneration(t *testing.T) {
	st := etcdtest.Store(t)
	c := ClusterOf(st, nil)
	ctx := context.Background()
	src := strings.Replace(twoHosts, "portgroups: [{name: pg-vm}]", "portgroups: [{name: pg-vm}, {name: pg-b}]", 1)
	if _, err := c.Apply(ctx, Source{File: specFile(t, src)}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	vnic := func(vm string) string {
		t.Helper()
		doc, err := c.Spec(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		v, _ := doc.Spec.VM(vm)
		return fmt.Sprintf("%s connected=%v", v.NICs[0].PortGroup, v.NICs[0].IsConnected())
	}

	res, err := c.Link(ctx, LinkRequest{VM: "vm1", NIC: "eth0", PortGroup: "pg-b", Connected: true})
	if err != nil || res.Infra != "c1" || res.Stored == nil || res.Stored.Generation != 2 || res.Executed != 0 {
		t.Fatalf("link: %+v %v", res, err)
	}
	if got := vnic("vm1"); got != "pg-b connected=true" {
		t.Errorf("vm1's eth0 after the link: %s", got)
	}
	res, err = c.Link(ctx, LinkRequest{Infra: "c1", VM: "vm2", NIC: "eth0"})
	if err != nil || res.Stored.Generation != 3 {
		t.Fatalf("unlink: %+v %v", res, err)
	}
	if got := vnic("vm2"); got != "pg-vm connected=false" {
		t.Errorf("vm2's eth0 after the unlink: %s", got)
	}
	for _, bad := range []LinkRequest{
		{VM: "nosuch", NIC: "eth0", PortGroup: "pg-b", Connected: true},
		{Infra: "c1", VM: "vm1", NIC: "eth3", PortGroup: "pg-b", Connected: true},
		{Infra: "c1", VM: "vm1", NIC: "eth0", PortGroup: "nosuch", Connected: true},
	} {
		if _, err := c.Link(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("link %+v: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := c.Link(ctx, LinkRequest{Infra: "c9", VM: "vm1", NIC: "eth0"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unlink in an unknown infrastructure: %v, want ErrNotFound", err)
	}

	h, err := c.History(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, e := range h.Entries {
		verbs = append(verbs, fmt.Sprintf("%s %d", e.Verb, e.Generation))
	}
	if strings.Join(verbs, ", ") != "apply 1, link 2, unlink 3" || h.Current != 3 {
		t.Errorf("history: %v, current %d", verbs, h.Current)
	}
	evs, err := c.Events(ctx, "c1", 10)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, ev := range evs {
		actions = append(actions, ev.Action)
	}
	if strings.Join(actions, ",") != "unlink,link,apply" {
		t.Errorf("events, newest first: %v", actions)
	}

	// A change worked out from a generation that is no longer the last
	// is not stored.
	doc, err := c.Spec(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	stale := context.WithValue(ctx, changeKey{}, change{verb: history.Link, basis: 2})
	if _, err := c.Apply(stale, Source{Doc: doc}, ApplyOptions{}); !errors.Is(err, ErrConflict) {
		t.Errorf("a change on top of generation 2 when 3 is stored: %v, want ErrConflict", err)
	}
}
