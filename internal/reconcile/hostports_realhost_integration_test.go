package reconcile_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
)

// machineLinks is the real host's links with their addresses, sorted: a
// host port left behind shows here.
func machineLinks(t *testing.T, rh *realHost) []string {
	t.Helper()
	var out []string
	nstest.InNS(t, rh.machine, func(h *netlink.Handle) error {
		links, err := h.LinkList()
		for _, l := range links {
			addrs, _ := h.AddrList(l, netlink.FAMILY_V4)
			line := l.Attrs().Name
			for _, a := range addrs {
				line += " " + a.IPNet.String()
			}
			out = append(out, line)
		}
		return err
	})
	slices.Sort(out)
	return out
}

// A real host's host ports are made with their addresses in the machine's
// namespace, a second apply changes nothing, a failure at any step of the
// first apply leaves the machine as it was, and destroy removes them.
func TestRealHostHostPorts(t *testing.T) {
	rh := newRealHost(t)
	infra := nstest.Infra("realhost-hp")
	state := func() []string { return append(rh.state(t), machineLinks(t, rh)...) }
	before := state()
	src := rh.spec(infra, "{name: vmnic0, device: eth1, shared: true, speed: 1Gbit}") + `hostports:
  - {host: hv1, portgroup: pg, ip: 10.30.0.11/24, name: vmotion0}
  - {host: hv1, portgroup: pg, ip: 10.31.0.11/24}
`
	doc := rh.load(t, src)
	t.Cleanup(func() {
		rh.eng.Destroy(infra)
		nstest.AssertGone(t, infra)
	})
	p, err := rh.eng.Plan(doc)
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step < len(p.Actions); step++ {
		rh.eng.FailBefore = func(i int, a plan.Action) error {
			if i == step {
				return errors.New("injected")
			}
			return nil
		}
		if _, err := rh.eng.Apply(doc); !errors.Is(err, reconcile.ErrRolledBack) {
			t.Fatalf("step %d (%s): got %v, want a rollback", step, p.Actions[step], err)
		}
		if got := state(); !slices.Equal(got, before) {
			t.Fatalf("after a failure at step %d (%s):\n%s\nwas\n%s", step, p.Actions[step], strings.Join(got, "\n"), strings.Join(before, "\n"))
		}
	}
	rh.eng.FailBefore = nil
	if _, err := rh.eng.Apply(doc); err != nil {
		t.Fatal(err)
	}
	links := strings.Join(machineLinks(t, rh), "\n")
	// vmk0, named by default, is named on the machine by the
	// infrastructure too.
	for _, want := range []string{"vmotion0 10.30.0.11/24", plan.HostPortLink(doc.Spec, 1) + " 10.31.0.11/24"} {
		if !strings.Contains(links, want) {
			t.Errorf("the machine has no %q:\n%s", want, links)
		}
	}
	rh.engine(t)
	if p, err := rh.eng.Plan(doc); err != nil || len(p.Actions) != 0 {
		t.Errorf("a second apply by a new engine: %v (%v)", p.Actions, err)
	}
	if _, err := rh.eng.Destroy(infra); err != nil {
		t.Fatal(err)
	}
	if got := state(); !slices.Equal(got, before) {
		t.Errorf("after destroy:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}
}
