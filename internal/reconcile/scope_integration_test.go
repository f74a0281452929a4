package reconcile_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

func loadSpec(t *testing.T, src string) *spec.Document {
	t.Helper()
	doc, err := spec.Load("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// planOf is the plan of an apply of src, full or scoped.
func planOf(t *testing.T, eng *reconcile.Engine, src string, full bool) string {
	t.Helper()
	eng.Full = full
	defer func() { eng.Full = false }()
	p, err := eng.Plan(loadSpec(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if p.Empty() {
		return ""
	}
	return p.String()
}

// A scoped apply of a one-VM change (add, change of address, removal)
// plans what a full one plans, and leaves the host as a full one would: a
// full apply after it finds nothing to do. An engine that keeps no model
// (a new process's) splices the last spec's model from the next one's.
func TestScopedApplyOfOneVMIsTheFullApply(t *testing.T) {
	eng := nstest.Engine(t)
	var trace strings.Builder
	eng.Trace = &trace
	oneVMChanges(t, eng, nstest.Infra("itscope"), &trace)
}

// An engine that keeps the last model (a server's, an agent's) splices the
// model of a one-VM change on a port group from it (plan.SpliceModel): it
// plans and leaves the host as a full apply of the spec modelled whole.
func TestSplicedApplyOfOneVMIsTheFullApply(t *testing.T) {
	eng := nstest.Engine(t)
	eng.Memo = &reconcile.Memo{}
	var trace strings.Builder
	eng.Trace = &trace
	oneVMChanges(t, eng, nstest.Infra("itsplice"), &trace)
}

// oneVMChanges applies one-VM changes to twoHosts(infra) with eng, scoped,
// and checks each against a full apply. With trace, eng's trace, each
// apply must have spliced a model.
func oneVMChanges(t *testing.T, eng *reconcile.Engine, infra string, trace *strings.Builder) {
	base := twoHosts(infra)
	added := withExtraVM(base)
	readdressed := strings.Replace(added, "{portgroup: pg-vm, ip: 192.168.50.13/24}", "{portgroup: pg-vm, ip: 192.168.50.23/24}", 1)
	nstest.Apply(t, eng, base)
	for _, step := range []struct{ name, src string }{{"add", added}, {"change address", readdressed}, {"remove", base}} {
		t.Run(step.name, func(t *testing.T) {
			full, scoped := planOf(t, eng, step.src, true), planOf(t, eng, step.src, false)
			if full != scoped {
				t.Fatalf("scoped plan:\n%s\nfull plan:\n%s", scoped, full)
			}
			if scoped == "" {
				t.Fatal("nothing to do")
			}
			if trace != nil {
				trace.Reset()
			}
			_, res := nstest.Apply(t, eng, step.src)
			if trace != nil && !strings.Contains(trace.String(), "models (spliced)") {
				t.Errorf("the change was not spliced:\n%s", trace.String())
			}
			if !res.Plan.Empty() && res.Plan.String() != full {
				t.Errorf("applied:\n%s\nwant:\n%s", res.Plan, full)
			}
			after := nstest.Snapshot(t, infra)
			if p := planOf(t, eng, step.src, true); p != "" {
				t.Errorf("a full apply after the scoped one would do:\n%s", p)
			}
			if got := nstest.Snapshot(t, infra); !slices.Equal(after, got) {
				t.Errorf("the host changed:\n%s", diffLines(after, got))
			}
		})
	}
}

// Drift outside what a change touches is left as it is by a scoped apply,
// and repaired by a full one (apply --full).
func TestDriftOutsideTheScopeWaitsForAFullApply(t *testing.T) {
	eng := nstest.Engine(t)
	infra := nstest.Infra("itdrift")
	base := twoHosts(infra)
	nstest.Apply(t, eng, base)
	web2 := ns(infra, "web2")
	removeAddr := func() {
		t.Helper()
		if err := nstest.Do(t, web2, func() error {
			l, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			a, err := netlink.ParseAddr("192.168.50.12/24")
			if err != nil {
				return err
			}
			return netlink.AddrDel(l, a)
		}); err != nil {
			t.Fatal(err)
		}
	}
	hasAddr := func() bool {
		t.Helper()
		for _, line := range nstest.Snapshot(t, infra) {
			if strings.Contains(line, web2) && strings.Contains(line, "192.168.50.12/24") {
				return true
			}
		}
		return false
	}
	removeAddr()
	_, res := nstest.Apply(t, eng, withExtraVM(base))
	for _, a := range res.Plan.Actions {
		if !strings.Contains(a.Subject().Owner, "web3") {
			t.Errorf("a scoped apply of web3 did %s", a)
		}
	}
	if hasAddr() {
		t.Fatal("the scoped apply repaired drift it did not need to read")
	}
	eng.Full = true
	_, res = nstest.Apply(t, eng, withExtraVM(base))
	eng.Full = false
	if len(res.Plan.Actions) != 1 || res.Plan.Actions[0].Subject().Kind != plan.KindAddr {
		t.Errorf("full apply: want the address made again, got:\n%s", res.Plan)
	}
	if !hasAddr() {
		t.Error("the full apply left the address missing")
	}
}

// An apply that began changing the host and never finished (killed) makes
// the next one full, whatever it changes: what the killed one left is not
// in the difference between two specs.
func TestAnUnfinishedApplyMakesTheNextFull(t *testing.T) {
	eng := nstest.Engine(t)
	infra := nstest.Infra("itpend")
	base := twoHosts(infra)
	nstest.Apply(t, eng, base)
	// What a kill leaves: a VM's address gone halfway through a change,
	// and the apply's note that it began.
	if err := nstest.Do(t, ns(infra, "db1"), func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		a, err := netlink.ParseAddr("10.0.0.2/24")
		if err != nil {
			return err
		}
		return netlink.AddrDel(l, a)
	}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Store.(store.Pending).SetPending(infra); err != nil {
		t.Fatal(err)
	}
	_, res := nstest.Apply(t, eng, base)
	if len(res.Plan.Actions) != 1 || res.Plan.Actions[0].Subject().Kind != plan.KindAddr {
		t.Errorf("want the address made again, got:\n%s", res.Plan)
	}
	if eng.Store.(store.Pending).IsPending(infra) {
		t.Error("a finished full apply left the note")
	}
	if _, res := nstest.Apply(t, eng, base); !res.Plan.Empty() {
		t.Errorf("second apply: %s", res.Plan)
	}
}
