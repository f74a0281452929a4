package cni_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

// An apply of the user's own file after containers were added through CNI
// keeps the containers' VMs as they are: link, address, port security,
// traffic. A file without the port group one of them sits on is refused,
// changing nothing; --drop-attached takes that one out, and its runtime's
// DEL afterwards is still fine, as one after vnet destroy is.
func TestLibcniApplyKeepsContainers(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	c := w.webAndDB(ctx, "ap")
	web, db, a, b, nsA, nsB, vmA, vmB, before := c.web, c.db, c.a, c.b, c.nsA, c.nsB, c.vmA, c.vmB, c.before
	userFile := c.user
	withoutDB, err := spec.Load("user.yaml", []byte(cniInfra(w.infra)))
	if err != nil {
		t.Fatal(err)
	}

	// The user's file again: both containers stay as they are.
	res, err := w.svc.Apply(ctx, service.Source{Doc: userFile}, service.ApplyOptions{})
	if err != nil {
		t.Fatalf("apply of the user's file: %v", err)
	}
	if res.Attached == nil || len(res.Attached.Kept) != 2 || len(res.Attached.InTheWay) != 0 {
		t.Errorf("apply result's attached %+v, want both kept", res.Attached)
	}
	if vms := w.containerVMs(); len(vms) != 2 {
		t.Fatalf("after the apply the spec holds container VMs %v, want both", vms)
	}
	kept := w.attachedLink(nsA, vmA)
	if kept.index != before.index || kept.mac != before.mac || !slices.Equal(kept.addrs, before.addrs) || kept.port != before.port {
		t.Errorf("container a's vNIC after the apply %+v, before %+v", kept, before)
	}
	if !talks(t, w.infra, nsA, strings.Split(before.addrs[0], "/")[0]) {
		t.Error("no TCP from the probe VM to container a after the apply")
	}
	if again, err := w.svc.Apply(ctx, service.Source{Doc: userFile}, service.ApplyOptions{DryRun: true}); err != nil || len(again.Plan) != 0 {
		t.Errorf("a second apply of the user's file plans %v, %v; want nothing", again.Plan, err)
	}

	// A file without pg-db, where b is: refused, dry run and diff alike
	// say so, nothing changed.
	inForce, _ := w.svc.Get(ctx, w.infra)
	hist, _ := w.svc.History(ctx, w.infra)
	for _, dry := range []bool{false, true} {
		_, err = w.svc.Apply(ctx, service.Source{Doc: withoutDB}, service.ApplyOptions{DryRun: dry})
		var ae *service.AttachedError
		if !errors.Is(err, service.ErrAttached) || !errors.As(err, &ae) || len(ae.VMs) != 1 || ae.VMs[0].VM != vmB ||
			!strings.Contains(err.Error(), b.ContainerID) || !strings.Contains(err.Error(), "no port group pg-db") ||
			!strings.HasPrefix(err.Error(), "apply "+w.infra+": ") {
			t.Fatalf("apply (dry run %v) of a file without pg-db: %v", dry, err)
		}
	}
	d, err := w.svc.Diff(ctx, w.infra, service.DiffRequest{Source: &service.Source{Doc: withoutDB}, Plan: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Attached == nil || len(d.Attached.Kept) != 1 || d.Attached.Kept[0].VM != vmA || len(d.Attached.InTheWay) != 1 ||
		strings.Contains(d.Diff.String(), vmA) || !strings.Contains(d.Diff.String(), vmB) {
		t.Errorf("diff of the file: attached %+v, changes:\n%s", d.Attached, d.Diff)
	}
	after, _ := w.svc.Get(ctx, w.infra)
	histAfter, _ := w.svc.History(ctx, w.infra)
	if after.Generation != inForce.Generation || !bytes.Equal(after.Spec, inForce.Spec) || len(histAfter.Entries) != len(hist.Entries) {
		t.Errorf("the refused apply changed generation %d -> %d, or the history %d -> %d entries",
			inForce.Generation, after.Generation, len(hist.Entries), len(histAfter.Entries))
	}
	if _, ok := links(t, nsB)["eth0"]; !ok {
		t.Errorf("the refused apply took container b's link: %v", links(t, nsB))
	}

	// --drop-attached takes b out, as the diff said; a stays.
	dropped, err := w.svc.Apply(ctx, service.Source{Doc: withoutDB}, service.ApplyOptions{DropAttached: true})
	if err != nil {
		t.Fatalf("apply --drop-attached: %v", err)
	}
	if dropped.Attached == nil || !dropped.Attached.Dropped || !slices.Equal(dropped.Plan, d.Plans[0].Actions) {
		t.Errorf("apply --drop-attached: attached %+v, plan\n%v\ndiff --plan\n%v", dropped.Attached, dropped.Plan, d.Plans[0].Actions)
	}
	now := w.doc()
	if _, ok := now.Spec.VM(vmB); ok {
		t.Error("container b's VM is still in the spec")
	}
	if _, ok := now.Spec.VM(vmA); !ok || w.attachedLink(nsA, vmA).index != before.index {
		t.Error("container a did not stay as it was")
	}
	if _, ok := links(t, nsB)["eth0"]; ok {
		t.Error("container b's vNIC is still in its namespace")
	}

	// The runtimes' DELs are still fine: b's finds nothing left to do.
	if err := w.cni.DelNetworkList(ctx, db, b); err != nil {
		t.Errorf("DEL b after it was dropped: %v", err)
	}
	if err := w.cni.DelNetworkList(ctx, web, a); err != nil {
		t.Fatalf("DEL a: %v", err)
	}
	if vms := w.containerVMs(); len(vms) != 0 || len(links(t, nsA)) != 0 {
		t.Errorf("after DEL: VMs %v, links in a %v", vms, links(t, nsA))
	}

	// vnet destroy takes a runtime's VM with the rest; the runtime's DEL
	// afterwards finds no infrastructure and succeeds.
	if _, err := w.cni.AddNetworkList(ctx, web, a); err != nil {
		t.Fatalf("ADD a again: %v", err)
	}
	if _, err := w.svc.Destroy(ctx, w.infra, service.DestroyOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(links(t, nsA)) != 0 {
		t.Errorf("after destroy, links in a: %v", links(t, nsA))
	}
	if err := w.cni.DelNetworkList(ctx, web, a); err != nil {
		t.Errorf("DEL a after destroy: %v", err)
	}
	if _, err := w.svc.Apply(ctx, service.Source{Doc: userFile}, service.ApplyOptions{}); err != nil {
		t.Fatal(err) // for the world's own destroy at the end
	}
}
