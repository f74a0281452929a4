package cni_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

// listOn is a network configuration list of vnet's own IPAM on a port
// group.
func (w *world) listOn(name, portgroup string) *libcni.NetworkConfigList {
	w.t.Helper()
	src := fmt.Sprintf(`{"cniVersion": "1.1.0", "name": %q, "plugins": [{"type": "vnet-cni", "infra": %q, "portgroup": %q,
		"stateDir": %q, "ipam": {"type": "vnet"}}]}`, name, w.infra, portgroup, w.state)
	l, err := libcni.ConfListFromBytes([]byte(src))
	if err != nil {
		w.t.Fatal(err)
	}
	return l
}

// attachedLink is what a container's vNIC is in the kernel: the link in
// its namespace (index, MAC, addresses) and its switch port with the port
// programs it runs.
type attachedLink struct {
	index int
	mac   string
	addrs []string
	port  nstest.ProgramPort
}

func (w *world) attachedLink(ns, vm string) attachedLink {
	w.t.Helper()
	var a attachedLink
	nstest.InNS(w.t, ns, func(h *netlink.Handle) error {
		l, err := h.LinkByName("eth0")
		if err != nil {
			return err
		}
		a.index, a.mac = l.Attrs().Index, l.Attrs().HardwareAddr.String()
		addrs, err := h.AddrList(l, netlink.FAMILY_V4)
		for _, ad := range addrs {
			a.addrs = append(a.addrs, ad.IPNet.String())
		}
		return err
	})
	port := plan.VNICPortName(w.infra, vm, 0)
	for _, p := range nstest.ProgramPorts(w.t, nstest.NSName(w.infra, "hv1")) {
		if p.Name == port {
			a.port = p
		}
	}
	return a
}

// webAndDB is a world at a spec of the user's that adds pg-db (and a VM
// of its own there) to cniInfra's, with container a added through CNI on
// pg-web and b on pg-db, their names made from base.
type webAndDB struct {
	user     *spec.Document
	web, db  *libcni.NetworkConfigList
	a, b     *libcni.RuntimeConf
	nsA, nsB string
	vmA, vmB string
	before   attachedLink // a's vNIC after its ADD
}

func (w *world) webAndDB(ctx context.Context, base string) webAndDB {
	w.t.Helper()
	src := strings.Replace(cniInfra(w.infra), "      - {name: pg-web,", "      - {name: pg-db, subnet: 10.42.0.0/24}\n      - {name: pg-web,", 1) +
		"  - {name: db1, host: hv1, nics: [{portgroup: pg-db, ip: 10.42.0.2/24}]}\n"
	var c webAndDB
	var err error
	if c.user, err = spec.Load("user.yaml", []byte(src)); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.svc.Apply(ctx, service.Source{Doc: c.user}, service.ApplyOptions{}); err != nil {
		w.t.Fatal(err)
	}
	c.web, c.db = w.listOn("web", "pg-web"), w.listOn("db", "pg-db")
	c.a, c.nsA = w.container(base+"a", "")
	c.b, c.nsB = w.container(base+"b", "")
	if _, err := w.cni.AddNetworkList(ctx, c.web, c.a); err != nil {
		w.t.Fatalf("ADD a: %v", err)
	}
	if _, err := w.cni.AddNetworkList(ctx, c.db, c.b); err != nil {
		w.t.Fatalf("ADD b: %v", err)
	}
	c.vmA, c.vmB = service.ContainerVMName(c.a.ContainerID, "", ""), service.ContainerVMName(c.b.ContainerID, "", "")
	c.before = w.attachedLink(c.nsA, c.vmA)
	if len(c.before.addrs) != 1 || c.before.port.Name == "" {
		w.t.Fatalf("container a after ADD: %+v (want an address and a switch port running port programs)", c.before)
	}
	return c
}

// A rollback to a generation from before a container was added through
// CNI keeps the container's VM as it is: its namespace, link, address and
// port security; the user's own change is undone; a later DEL still takes
// the vNIC out. A rollback to a generation without the port group another
// container sits on is refused and changes nothing.
func TestLibcniRollbackKeepsContainers(t *testing.T) {
	w := newWorld(t) // generation 1: pg-web, the probe VM
	ctx := context.Background()
	c := w.webAndDB(ctx, "rb") // generation 2: pg-db too
	web, db, a, b, nsA, nsB, vmA, vmB, before := c.web, c.db, c.a, c.b, c.nsA, c.nsB, c.vmA, c.vmB, c.before

	// Generation 1 has no pg-db, where b is: refused, nothing changed.
	inForce, _ := w.svc.Get(ctx, w.infra)
	hist, _ := w.svc.History(ctx, w.infra)
	_, err := w.svc.Rollback(ctx, w.infra, service.RollbackOptions{To: 1})
	var ae *service.AttachedError
	if !errors.Is(err, service.ErrAttached) || !errors.As(err, &ae) || len(ae.VMs) != 1 || ae.VMs[0].VM != vmB ||
		!strings.Contains(err.Error(), b.ContainerID) || !strings.Contains(err.Error(), "no port group pg-db") {
		t.Fatalf("rollback over container b: %v", err)
	}
	if _, err := w.svc.Rollback(ctx, w.infra, service.RollbackOptions{To: 1, Apply: service.ApplyOptions{DryRun: true}}); !errors.Is(err, service.ErrAttached) {
		t.Errorf("rollback --dry-run over container b: %v, want the same refusal", err)
	}
	after, _ := w.svc.Get(ctx, w.infra)
	histAfter, _ := w.svc.History(ctx, w.infra)
	if after.Generation != inForce.Generation || !bytes.Equal(after.Spec, inForce.Spec) || len(histAfter.Entries) != len(hist.Entries) {
		t.Errorf("the refused rollback changed generation %d -> %d, or the history %d -> %d entries",
			inForce.Generation, after.Generation, len(hist.Entries), len(histAfter.Entries))
	}
	if _, ok := links(t, nsB)["eth0"]; !ok || w.attachedLink(nsA, vmA).index != before.index {
		t.Errorf("the refused rollback touched the containers' links: b %v", links(t, nsB))
	}

	// With b detached, the diff shows what the rollback then does: pg-db
	// goes, a stays.
	if err := w.cni.DelNetworkList(ctx, db, b); err != nil {
		t.Fatalf("DEL b: %v", err)
	}
	d, err := w.svc.Diff(ctx, w.infra, service.DiffRequest{To: 1, Plan: true})
	if err != nil {
		t.Fatal(err)
	}
	changes := d.Diff.String()
	if d.Attached == nil || len(d.Attached.Kept) != 1 || d.Attached.Kept[0].VM != vmA || strings.Contains(changes, vmA) || !strings.Contains(changes, "pg-db") {
		t.Errorf("diff to generation 1: attached %+v, changes:\n%s", d.Attached, changes)
	}
	dry, err := w.svc.Rollback(ctx, w.infra, service.RollbackOptions{To: 1, Apply: service.ApplyOptions{DryRun: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dry.Plan, d.Plans[0].Actions) {
		t.Errorf("rollback --dry-run plans\n%v\ndiff --plan\n%v", dry.Plan, d.Plans[0].Actions)
	}
	rb, err := w.svc.Rollback(ctx, w.infra, service.RollbackOptions{To: 1})
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if rb.Attached == nil || len(rb.Attached.Kept) != 1 {
		t.Errorf("rollback result %+v", rb.Attached)
	}
	now := w.doc()
	if _, _, ok := now.Spec.PortGroup("pg-db"); ok {
		t.Error("pg-db is still there: the rollback did not undo generation 2")
	}
	if _, ok := now.Spec.VM(vmA); !ok {
		t.Fatalf("the rollback took container a's VM out")
	}
	kept := w.attachedLink(nsA, vmA)
	if kept.index != before.index || kept.mac != before.mac || !slices.Equal(kept.addrs, before.addrs) || kept.port != before.port {
		t.Errorf("container a's vNIC after the rollback %+v, before %+v", kept, before)
	}
	if !talks(t, w.infra, nsA, strings.Split(before.addrs[0], "/")[0]) {
		t.Error("no TCP from the probe VM to container a after the rollback")
	}

	// The runtime's DEL still takes it out.
	if err := w.cni.DelNetworkList(ctx, web, a); err != nil {
		t.Fatalf("DEL a: %v", err)
	}
	if vms := w.containerVMs(); len(vms) != 0 || len(links(t, nsA)) != 0 {
		t.Errorf("after DEL: VMs %v, links in a %v", vms, links(t, nsA))
	}
}
