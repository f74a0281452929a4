package reconcile_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/topology"
)

func pauseSpec(name string) string {
	return fmt.Sprintf(`
name: %s
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: vs0
    uplinks: [{name: u1, nics: {esx1: vmnic0}}]
    portgroups: [{name: pg-a}, {name: pg-vmk}]
vms:
  - name: vm1
    host: esx1
    nics: [{portgroup: pg-a, ip: 10.0.0.1/24}]
  - name: vm2
    host: esx1
    nics: [{portgroup: pg-a, ip: 10.0.0.2/24}]
  - name: vm3
    host: esx1
    nics: [{portgroup: pg-a, ip: 10.0.0.3/24}]
hostports:
  - {host: esx1, portgroup: pg-vmk, ip: 10.2.0.1/24}
`, name)
}

// paused applies doc with p paused, on an engine of its own over eng's
// store and dataplane, as a pause or resume does.
func paused(t *testing.T, eng *reconcile.Engine, doc *spec.Document, p plan.Paused) reconcile.Result {
	t.Helper()
	e := *eng
	e.Paused = &p
	res, err := e.Apply(doc)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func vnicState(t *testing.T, eng *reconcile.Engine, doc *spec.Document, vm string) (string, []string) {
	t.Helper()
	st, err := eng.Status(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range st.VMs {
		if v.Name == vm {
			return v.NICs[0].State, st.Drift
		}
	}
	t.Fatalf("no VM %s in the status", vm)
	return "", nil
}

// A paused VM sends and receives nothing, by the packet counters of its
// vNIC and of its peer's, while the VMs beside it go on; its switch port
// stays a port of its bridge with its counters; an apply of the same spec
// keeps it paused, and a resume brings it back without a change of
// generation.
func TestPauseStopsAVMAndResumeBringsItBack(t *testing.T) {
	eng := nstest.Engine(t)
	name := nstest.Infra("pause")
	doc, _ := nstest.Apply(t, eng, pauseSpec(name))
	vm1, vm2, vm3 := ns(name, "vm1"), ns(name, "vm2"), ns(name, "vm3")
	nstest.Echo(t, vm2)
	if sent, got := nstest.UDPPing(t, vm1, "10.0.0.2", 5*time.Millisecond, 20); got < sent-1 {
		t.Fatalf("before the pause vm1 reached vm2 %d times of %d", got, sent)
	}
	host := ns(name, "esx1")
	port := plan.VNICPortName(name, "vm1", 0)
	before := nstest.LinkStats(t, host, port)
	genBefore := generation(t, eng, name)

	res := paused(t, eng, doc, plan.Paused{plan.PauseVM("vm1")})
	// What vm1 sent until its port went down (an ARP probe may come
	// while the pause is applied) is counted: from here nothing more.
	atPause := nstest.LinkStats(t, host, port)
	if !onlyPortDown(res.Plan.Actions) {
		t.Fatalf("pausing vm1: %s, want vm1's switch port set down alone (and off the direct path)", res.Plan)
	}
	if state, drift := vnicState(t, eng, doc, "vm1"); state != "paused" || len(drift) > 0 {
		t.Errorf("paused vm1 eth0 is %q with drift %v, want paused and none", state, drift)
	}
	if g := generation(t, eng, name); g != genBefore {
		t.Errorf("a pause took the generation from %d to %d", genBefore, g)
	}
	if state := drawnState(t, eng, doc, "vm/vm1"); state != "paused" {
		t.Errorf("the topology draws paused vm1's eth0 as %q", state)
	}
	if _, got := nstest.UDPPing(t, vm1, "10.0.0.2", 5*time.Millisecond, 20); got != 0 {
		t.Errorf("paused vm1 reached vm2 %d times", got)
	}
	if _, got := nstest.UDPPing(t, vm3, "10.0.0.2", 5*time.Millisecond, 20); got < 19 {
		t.Errorf("vm3, beside paused vm1, reached vm2 %d times of 20", got)
	}
	// Nothing crossed vm1's switch port either way (vm3's ARP was
	// flooded to it), and its counters are the ones it had.
	after := nstest.LinkStats(t, host, port)
	if after.RxPackets != atPause.RxPackets || after.TxPackets != atPause.TxPackets {
		t.Errorf("vm1's switch port counted %d packets in and %d out once paused, %d and %d after traffic: want the same",
			atPause.RxPackets, atPause.TxPackets, after.RxPackets, after.TxPackets)
	}
	if before.RxPackets == 0 || atPause.RxPackets < before.RxPackets || atPause.TxPackets < before.TxPackets {
		t.Errorf("vm1's switch port counted %d packets in and %d out before the pause, %d and %d once paused: want them kept, and some",
			before.RxPackets, before.TxPackets, atPause.RxPackets, atPause.TxPackets)
	}
	if l := linkOf(t, host, port); l.MasterIndex == 0 {
		t.Error("the paused port left its bridge")
	}

	// An apply of the same spec, as after a restart, keeps the pause.
	again := *eng
	res, err := again.Apply(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Plan.Empty() {
		t.Errorf("applying the spec again over a pause: %s, want nothing", res.Plan)
	}
	if state, _ := vnicState(t, eng, doc, "vm1"); state != "paused" {
		t.Errorf("after the same spec applied again vm1 eth0 is %q", state)
	}

	// Resume: the first datagram that comes back after it, within the
	// bound. What the switch does is timed, not the VMs' ARP
	// (nstest.Neighbour).
	nstest.Neighbour(t, vm1, "10.0.0.2", nstest.MAC(t, vm2))
	nstest.Neighbour(t, vm2, "10.0.0.1", nstest.MAC(t, vm1))
	var applied time.Duration
	start := time.Now()
	took := nstest.FirstEcho(t, vm1, "10.0.0.2", 10*time.Second, func() {
		paused(t, eng, doc, nil)
		applied = time.Since(start)
	}).Sub(start)
	t.Logf("resume: the apply took %s; the first echo came %s after it began", applied, took)
	if took > resumeBound {
		t.Errorf("the first echo after the resume came %s after it began, more than %s", took, resumeBound)
	}
	if state, drift := vnicState(t, eng, doc, "vm1"); state != "up" || len(drift) > 0 {
		t.Errorf("resumed vm1 eth0 is %q with drift %v", state, drift)
	}
	if g := generation(t, eng, name); g != genBefore {
		t.Errorf("pause and resume took the generation from %d to %d", genBefore, g)
	}
}

// resumeBound is what a test holds a resume to, from its start to the first
// datagram that comes back through the resumed port: the 100 ms promised.
// A resume takes a few milliseconds here (the test logs how many); the
// bound is the promise, not the figure.
const resumeBound = 100 * time.Millisecond

func generation(t *testing.T, eng *reconcile.Engine, name string) int {
	t.Helper()
	rec, err := eng.Store.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Generation
}

func linkOf(t *testing.T, namespace, name string) *netlink.LinkAttrs {
	t.Helper()
	l, err := nstest.Netlink(t, namespace).LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs()
}

// neighbour makes ip a permanent neighbour with that MAC on eth0 in ns.

// drawnState is the state vnet graph draws a VM's first vNIC in.
func drawnState(t *testing.T, eng *reconcile.Engine, doc *spec.Document, id string) string {
	t.Helper()
	st, err := eng.Status(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range topology.Build(doc.Spec, st).Nodes {
		if n.ID == id && len(n.Ports) > 0 {
			return n.Ports[0].State
		}
	}
	t.Fatalf("no %s in the topology", id)
	return ""
}

// onlyPortDown reports whether a pause's plan sets a switch port down and
// changes nothing else but, where its port programs hand it frames past
// the bridge, takes it off that path (a frame so handed would pass by the
// down port).
func onlyPortDown(actions []plan.Action) bool {
	down := 0
	for _, a := range actions {
		text := a.String()
		switch {
		case strings.Contains(text, "b down false -> true"):
			down++
		case a.Op == plan.OpModify && a.New != nil && a.New.Kind == plan.KindPortBPF &&
			strings.HasSuffix(a.Old.Match, " direct") && a.Old.Match == a.New.Match+" direct":
		default:
			return false
		}
	}
	return down == 1
}
