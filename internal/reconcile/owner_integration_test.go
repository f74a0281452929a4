package reconcile_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
)

// small is one host with a VM and a host port: enough links to rename.
func small(name string) string {
	return fmt.Sprintf(`
name: %s
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - {name: sw0, uplinks: [{name: u1, nics: {esx1: vmnic0}}], portgroups: [{name: pg, shaping: {egress: {average: 500Mbit, burst: 64KiB}}}]}
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg, ip: 10.71.0.1/24}]}
hostports:
  - {host: esx1, portgroup: pg, ip: 10.71.0.50/24}
`, name)
}

// renameLink does `ip -n NS link set OLD name NEW` behind vnet's back (down,
// renamed, up again, as a person would).
func renameLink(t *testing.T, namespace, old, name string) {
	t.Helper()
	if err := nstest.Do(t, namespace, func() error {
		l, err := netlink.LinkByName(old)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetDown(l); err != nil {
			return err
		}
		if err := netlink.LinkSetName(l, name); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	}); err != nil {
		t.Fatalf("rename %s in %s: %v", old, namespace, err)
	}
}

// A vNIC renamed inside its VM is made again under its own name: the old
// pair, which holds the switch port's name, goes first.
func TestRenamedVNICIsRepaired(t *testing.T) {
	eng := nstest.Engine(t)
	eng.Full = true // drift is repaired by a full apply
	ren := nstest.Infra("itren")
	src := small(ren)
	doc, _ := nstest.Apply(t, eng, src)
	vm, host := ns(ren, "vm1"), ns(ren, "esx1")
	renameLink(t, vm, "eth0", "foo")
	renameLink(t, host, "vmk0", "bar")
	p, err := eng.Plan(doc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan after the renames:\n%s", p)
	if _, err := eng.Apply(doc); err != nil {
		t.Fatalf("apply after the renames: %v", err)
	}
	links := nstest.Ifindexes(t, ren)
	for _, l := range []string{vm + "/eth0", host + "/vmk0"} {
		if links[l] == 0 {
			t.Errorf("%s not made again", l)
		}
	}
	for _, l := range []string{vm + "/foo", host + "/bar"} {
		if links[l] != 0 {
			t.Errorf("%s left behind", l)
		}
	}
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Errorf("second apply would change:\n%s%v", p, err)
	}
	if err := roundTrip(t, vm, host, "10.71.0.50"); err != nil {
		t.Errorf("repaired vNIC cannot reach the host port: %v", err)
	}
}

// A vNIC moved out of vnet's namespaces (ip link set eth0 netns other)
// leaves its switch port behind, holding the port's name and the
// offloads set on it. Apply deletes that stranded port first and sets the
// offloads again on the new pair's.
func TestStrandedSwitchPortIsRepaired(t *testing.T) {
	eng := nstest.Engine(t)
	eng.Full = true // drift is repaired by a full apply
	str := nstest.Infra("itstr")
	src := strings.Replace(small(str), "ip: 10.71.0.1/24}", "ip: 10.71.0.1/24, offloads: {gro: false}}", 1)
	doc, _ := nstest.Apply(t, eng, src)
	vm, host := ns(str, "vm1"), ns(str, "esx1")
	elsewhere := "vnettest-" + str
	makeNamespace(t, elsewhere)
	if err := nstest.Do(t, vm, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		to, err := netns.GetFromName(elsewhere)
		if err != nil {
			return err
		}
		defer to.Close()
		return netlink.LinkSetNsFd(l, int(to))
	}); err != nil {
		t.Fatalf("move eth0 out of %s: %v", vm, err)
	}
	p, err := eng.Plan(doc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan with the port stranded:\n%s", p)
	if _, err := eng.Apply(doc); err != nil {
		t.Fatalf("apply with the port stranded: %v", err)
	}
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Errorf("second apply would change:\n%s%v", p, err)
	}
	if err := roundTrip(t, vm, host, "10.71.0.50"); err != nil {
		t.Errorf("repaired vNIC cannot reach the host port: %v", err)
	}
}

// A namespace that only looks like one of the infrastructure's is left
// alone by apply and destroy, which say so.
func TestForeignLookalikeNamespaceIsLeftAlone(t *testing.T) {
	eng := nstest.Engine(t)
	var log bytes.Buffer
	eng.Log = &log
	foreign := nstest.Infra("itfor")
	extra := "vnet." + foreign + ".extra"
	makeNamespace(t, extra)
	doc, _ := nstest.Apply(t, eng, small(foreign))
	if _, err := eng.Apply(doc); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Destroy(foreign); err != nil {
		t.Fatal(err)
	}
	if !netnsExists(extra) {
		t.Fatalf("destroy removed %s", extra)
	}
	if want := "left " + extra + ": not made by this store"; !strings.Contains(log.String(), want) {
		t.Errorf("log does not say %q:\n%s", want, log.String())
	}
	// A spec that needs that name is refused, not handed the stranger.
	needs := strings.Replace(small(foreign), "name: vm1", "name: extra", 1)
	d, err := spec.Load("needs.yaml", []byte(needs))
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.Apply(d)
	if !errors.Is(err, reconcile.ErrNotOwned) || !strings.Contains(err.Error(), extra) {
		t.Errorf("apply over a stranger: %v", err)
	}
	for _, l := range nstest.Snapshot(t, foreign) {
		if !strings.Contains(l, extra) {
			t.Errorf("the refused apply changed the host: %s", l)
		}
	}
}

// Two state directories naming one infrastructure: the second refuses,
// names the first, and its destroy leaves the first's objects alone.
func TestSecondStoreRefusesAnotherStoresInfrastructure(t *testing.T) {
	first, second := nstest.Engine(t), nstest.Engine(t)
	shared := nstest.Infra("itsec")
	var log bytes.Buffer
	second.Log = &log
	doc, _ := nstest.Apply(t, first, small(shared))
	before := nstest.Snapshot(t, shared)
	_, err := second.Apply(doc)
	if !errors.Is(err, reconcile.ErrNotOwned) {
		t.Fatalf("second store's apply: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, first.Store.Location()) || !strings.Contains(msg, first.Store.ID()) || !strings.Contains(msg, "--state-dir") {
		t.Errorf("error does not name the other store and what to do: %s", msg)
	}
	if _, err := second.Destroy(shared); err != nil {
		t.Fatal(err)
	}
	if after := nstest.Snapshot(t, shared); !slices.Equal(before, after) {
		t.Fatalf("second store's destroy changed the first's infrastructure:\n%s", diffLines(before, after))
	}
	if !strings.Contains(log.String(), "made by the store at "+first.Store.Location()) {
		t.Errorf("destroy does not say what it left:\n%s", log.String())
	}
	if p, err := first.Plan(doc); err != nil || !p.Empty() {
		t.Errorf("first store no longer converged: %v\n%s", err, p)
	}
}

// Namespaces without a mark (an older vnet made them) are this store's
// only when its record lists them; the next apply marks them.
func TestUnmarkedNamespacesNeedARecord(t *testing.T) {
	owner, stranger := nstest.Engine(t), nstest.Engine(t)
	owner.Full = true // marks removed behind its back are drift, which a full apply repairs
	old := nstest.Infra("itold")
	doc, _ := nstest.Apply(t, owner, small(old))
	for _, n := range []string{"esx1", "vm1", plan.PhysSwitch} {
		setMark(t, ns(old, n), "")
	}
	before := nstest.Snapshot(t, old)
	if _, err := stranger.Destroy(old); err != nil {
		t.Fatal(err)
	}
	if after := nstest.Snapshot(t, old); !slices.Equal(before, after) {
		t.Fatalf("a store without a record destroyed unmarked namespaces:\n%s", diffLines(before, after))
	}
	p, err := owner.Plan(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 3 || !strings.Contains(p.String(), "mark none -> vnet:"+old+":"+owner.Store.ID()) {
		t.Errorf("want the three namespaces marked:\n%s", p)
	}
	nstest.Apply(t, owner, small(old))
	if p, err := owner.Plan(doc); err != nil || !p.Empty() {
		t.Errorf("not converged: %v\n%s", err, p)
	}
}

func makeNamespace(t *testing.T, name string) {
	t.Helper()
	nstest.RequireRoot(t)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // left in the new namespace: never reused
		h, err := netns.NewNamed(name)
		if err == nil {
			h.Close()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatalf("make %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("remove %s: %v", name, err)
		}
	})
}

func netnsExists(name string) bool {
	h, err := netns.GetFromName(name)
	if err != nil {
		return false
	}
	h.Close()
	return true
}

func setMark(t *testing.T, namespace, mark string) { setLinkAlias(t, namespace, "lo", mark) }

func setLinkAlias(t *testing.T, namespace, link, alias string) {
	t.Helper()
	if err := nstest.Do(t, namespace, func() error {
		l, err := netlink.LinkByName(link)
		if err != nil {
			return err
		}
		return netlink.LinkSetAlias(l, alias)
	}); err != nil {
		t.Fatal(err)
	}
}
