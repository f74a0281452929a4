package service

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/etcdserver"
	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
	"github.com/vnet-project/vnet/internal/store/etcdstore/etcdtest"
)

// withNetwork is twoHosts with a virtual network whose VNI is left to
// vnet, and a switch carried between the hosts over VXLAN.
const withNetwork = twoHosts + `networks:
  - {name: blue, subnet: 10.30.0.0/24}
`

func withBlueVM(src string) string {
	return strings.Replace(src, "vms:\n", "vms:\n  - {name: b1, host: hv2, nics: [{network: blue, ip: 10.30.0.5/24}]}\n", 1)
}

// Over etcd every change keeps its entry, written with its record; a
// rollback applies an earlier generation as a new one, also after a
// destroy; a diff compares files and generations; and the history is there
// for a client that connects afresh, as after a restart.
func TestClusterHistoryRollbackDiff(t *testing.T) {
	srv, err := etcdserver.Start(etcdserver.Config{DataDir: t.TempDir(), ClientURL: "http://127.0.0.1:0",
		PeerURL: "http://127.0.0.1:0", LogLevel: "error", NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	open := func() *Cluster {
		c := OpenCluster([]string{srv.Endpoint()}, TLSFiles{}, nil)
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := open()
	ctx := context.Background()
	ci := Actor{Who: "ci", Via: history.API, Remote: "192.0.2.9:1234"}
	v1 := specFile(t, withBlueVM(withNetwork))
	v2 := specFile(t, strings.Replace(withBlueVM(withNetwork), "10.20.0.2/24", "10.20.0.3/24", 1))
	for _, f := range []string{v1, v2} {
		if _, err := c.Apply(ctx, Source{File: f}, ApplyOptions{By: ci}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Apply(ctx, Source{File: v2}, ApplyOptions{By: ci}); err != nil { // unchanged: no entry
		t.Fatal(err)
	}

	// The file as applied is equal, although it leaves the network's VNI
	// out; the other differs in one vNIC.
	d, err := c.Diff(ctx, "c1", DiffRequest{Source: &Source{File: v2}})
	if err != nil || !d.Equal() || d.From != "generation 2 (in force)" {
		t.Fatalf("diff with the file applied: %+v, %v", d, err)
	}
	d, err = c.Diff(ctx, "c1", DiffRequest{Source: &Source{File: v1}, Plan: true})
	if err != nil || d.Equal() || d.Summary != "~1 vNIC (ip)" || len(d.Plans) != 2 || d.Plans[1].Host != "hv2" {
		t.Fatalf("diff with the first file: %+v, %v", d, err)
	}
	if !strings.Contains(d.Plans[1].Basis, "no live report") || len(d.Plans[0].Actions) != 0 || len(d.Plans[1].Actions) == 0 {
		t.Errorf("plans: %+v", d.Plans)
	}
	d, err = c.Diff(ctx, "c1", DiffRequest{From: 1, To: 2, Plan: true})
	if err != nil || d.Summary != "~1 vNIC (ip)" || !strings.Contains(d.Plans[0].Basis, "modelled from generation 1 to generation 2") {
		t.Fatalf("diff of generations: %+v, %v", d, err)
	}
	if _, err := c.Diff(ctx, "c1", DiffRequest{From: 7}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a generation never stored: %v", err)
	}

	rb, err := c.Rollback(ctx, "c1", RollbackOptions{Apply: ApplyOptions{By: ci}})
	if err != nil || rb.To != 1 || rb.Stored.Generation != 3 {
		t.Fatalf("rollback: %+v, %v", rb, err)
	}
	if _, err := c.Destroy(ctx, "c1", DestroyOptions{By: LocalActor()}); err != nil {
		t.Fatal(err)
	}
	// Back after the destroy: the last generation before it, as
	// generation 1 of the name applied anew.
	if rb, err = c.Rollback(ctx, "c1", RollbackOptions{}); err != nil || rb.To != 3 || rb.Stored.Generation != 1 {
		t.Fatalf("rollback after a destroy: %+v, %v", rb, err)
	}
	again := open() // a client connecting afresh reads the same history
	h, err := again.History(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range h.Entries {
		got = append(got, string(e.Verb)+":"+itoa(e.Generation)+":"+itoa(e.From))
	}
	if strings.Join(got, " ") != "apply:1:0 apply:2:0 rollback:3:1 destroy:0:0 rollback:1:3" || h.Current != 1 {
		t.Errorf("history %v, current %d", got, h.Current)
	}
	if e := h.Entries[2]; e.Who != "ci" || e.Via != history.API || e.Remote != "192.0.2.9:1234" || e.Summary != "~1 vNIC (ip)" || e.Spec != nil {
		t.Errorf("the rollback's entry: %+v", e)
	}
	if e := h.Entries[3]; e.Via != history.CLI || !strings.Contains(e.Who, "@") || e.Summary != "-2 hosts, -1 switch, -1 network, -3 VMs" {
		t.Errorf("the destroy's entry: %+v", e)
	}
	if e, err := again.Generation(ctx, "c1", 2); err != nil || !strings.Contains(string(e.Spec), "10.20.0.3/24") {
		t.Errorf("generation 2: %+v, %v", e, err)
	}
	if _, err := again.History(ctx, "nothing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("history of nothing: %v", err)
	}
}

// A history's retention is the store's, for every writer: a smaller one
// prunes at once and bounds what the next changes keep.
func TestClusterHistoryBounded(t *testing.T) {
	c := ClusterOf(etcdtest.Store(t), nil)
	ctx := context.Background()
	if err := c.SetHistoryRetention(ctx, history.Retention{MaxEntries: 3}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		f := specFile(t, strings.Replace(twoHosts, "10.20.0.2/24", "10.20.0."+itoa(10+i)+"/24", 1))
		if _, err := c.Apply(ctx, Source{File: f}, ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := c.History(ctx, "c1")
	if err != nil || len(h.Entries) != 3 || h.Entries[0].Generation != 4 || h.Retention.MaxEntries != 3 || h.Retention.MaxAge != history.AnyAge {
		t.Fatalf("history: %+v, %v", h, err)
	}
	if err := c.SetHistoryRetention(ctx, history.Retention{MaxEntries: -2}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a bad retention: %v", err)
	}
	// Rolling back to a generation no longer kept says so.
	if _, err := c.Rollback(ctx, "c1", RollbackOptions{To: 2}); !errors.Is(err, ErrNotFound) {
		t.Errorf("rollback to a pruned generation: %v", err)
	}
}

// A snapshot restores into another etcd with the same VNIs and MACs; a
// restore refuses an infrastructure that exists and a VNI another uses,
// and a snapshot that was edited.
func TestClusterSnapshotRestore(t *testing.T) {
	ctx := context.Background()
	from := ClusterOf(etcdtest.Store(t), nil)
	if _, err := from.Apply(ctx, Source{File: specFile(t, withBlueVM(withNetwork))}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	snap, err := from.Snapshot(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	data, err := snap.YAML()
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseSnapshot(data)
	if err != nil {
		t.Fatalf("a snapshot as written: %v\n%s", err, data)
	}
	if _, err := from.Restore(ctx, parsed, RestoreOptions{}); !errors.Is(err, ErrExists) {
		t.Errorf("restore where it exists: %v", err)
	}

	into := ClusterOf(etcdtest.Store(t), nil)
	res, err := into.Restore(ctx, parsed, RestoreOptions{})
	if err != nil || res.Stored.Generation != 1 {
		t.Fatalf("restore: %+v, %v", res, err)
	}
	a, b := mustApplied(t, from), mustApplied(t, into)
	if len(a.Allocations.MACs) != 3 || a.Allocations.VNIs["network blue"] == 0 || a.Allocations.VNIs["switch dvs0"] == 0 {
		t.Errorf("allocations: %+v", a.Allocations)
	}
	if !sameAllocations(a.Allocations, b.Allocations) || string(a.Spec) != string(b.Spec) {
		t.Errorf("restored with other allocations:\n%+v\n%+v", a.Allocations, b.Allocations)
	}
	h, _ := into.History(ctx, "c1")
	if len(h.Entries) != 1 || h.Entries[0].Verb != history.Restore || h.Entries[0].From != 1 {
		t.Errorf("the restored history: %+v", h.Entries)
	}

	// Another infrastructure that took the network's VNI meanwhile.
	other := strings.NewReplacer("name: c1", "name: c2", "{name: blue, subnet", "{name: red, vni: "+itoa(a.Allocations.VNIs["network blue"])+", subnet",
		"network: blue", "network: red").Replace(withBlueVM(withNetwork))
	third := ClusterOf(etcdtest.Store(t), nil)
	if _, err := third.Apply(ctx, Source{File: specFile(t, other)}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := third.Restore(ctx, parsed, RestoreOptions{}); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), `"c2"'s network red`) {
		t.Errorf("a VNI in use: %v", err)
	}
	for name, edit := range map[string]func(*Snapshot){
		"edited spec":  func(s *Snapshot) { s.Spec = append(s.Spec[:len(s.Spec):len(s.Spec)], "# more\n"...) },
		"newer format": func(s *Snapshot) { s.Format = "vnet-snapshot/9" },
		"not ours":     func(s *Snapshot) { s.Format = "something" },
		"other MACs": func(s *Snapshot) {
			s.Allocations = Allocations{VNIs: s.Allocations.VNIs, MACs: map[string]string{"vm1 eth0": "02:00:00:00:00:01"}}
		},
	} {
		bad := *parsed
		edit(&bad)
		if _, err := third.Restore(ctx, &bad, RestoreOptions{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, garbage := range []string{"", "format: [", "format: vnet-snapshot/1\nunknown: 1\n", strings.Repeat("x", MaxSnapshotBytes+1)} {
		if _, err := ParseSnapshot([]byte(garbage)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%.20q: %v", garbage, err)
		}
	}
}

func mustApplied(t *testing.T, c *Cluster) *AppliedSpec {
	t.Helper()
	a, err := c.Applied(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A dry run over etcd plans each host against what its agent last
// reported: the generation it reports current, an older one it lags at
// (from the history), the one before a generation it failed, or the
// stored one when it reports nothing.
func TestClusterDryRunPlansEachHostByItsReport(t *testing.T) {
	st := etcdtest.Store(t)
	c := ClusterOf(st, nil)
	ctx := context.Background()
	three := strings.NewReplacer("  - {name: hv2, underlay: 192.0.2.2, nics: [{name: eth0, speed: 1Gbit}]}\n",
		"  - {name: hv2, underlay: 192.0.2.2, nics: [{name: eth0, speed: 1Gbit}]}\n  - {name: hv3, underlay: 192.0.2.3, nics: [{name: eth0, speed: 1Gbit}]}\n",
		"{hv1: eth0, hv2: eth0}", "{hv1: eth0, hv2: eth0, hv3: eth0}").Replace(twoHosts)
	gens := []string{three, strings.Replace(three, "10.20.0.2/24", "10.20.0.3/24", 1), strings.Replace(three, "10.20.0.2/24", "10.20.0.4/24", 1)}
	for _, src := range gens {
		if _, err := c.Apply(ctx, Source{File: specFile(t, src)}, ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	report := func(host string, r etcdstore.Report) {
		rp, err := st.Reporter("c1", host, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rp.Close() })
		if err := rp.Report(r); err != nil {
			t.Fatal(err)
		}
	}
	report("hv1", etcdstore.Report{Generation: 3})
	report("hv2", etcdstore.Report{Generation: 1})
	report("hv3", etcdstore.Report{Generation: 3, Errors: []string{"switches[0].mtu: too large"}})
	res, err := c.Apply(ctx, Source{File: specFile(t, strings.Replace(three, "10.20.0.2/24", "10.20.0.9/24", 1))},
		ApplyOptions{DryRun: true, Detail: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"hv1": "reports generation 3 current: against that generation's spec",
		"hv2": "reports generation 1, lagging behind 3: against generation 1's spec from the history",
		"hv3": "failed generation 3, which its agent rolled back: against generation 2's spec, the one stored before it",
	}
	for _, p := range res.Hosts {
		if !strings.HasPrefix(p.Basis, want[p.Host]) || !strings.Contains(p.Basis, "its kernel is not read from here") {
			t.Errorf("%s: %q, want it to start %q", p.Host, p.Basis, want[p.Host])
		}
	}
	// Each host's plan changes vm2's address from what that host holds:
	// hv2 from generation 1's, and the others hold none of vm2's.
	if len(res.Hosts) != 3 || !strings.Contains(PlanText(res.Hosts[1].Actions), "10.20.0.2/24") {
		t.Errorf("hv2's plan:\n%s", PlanText(res.Hosts[1].Actions))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// Over etcd a pause and a resume are history entries of the generation
// they keep, with who and what; a diff between generations lists those
// between them beside the spec's changes, which they are not; a rollback
// keeps what is paused; and the entry of the spec in force outlives the
// pauses after it however small the retention.
func TestClusterPauseHistory(t *testing.T) {
	c := ClusterOf(etcdtest.Store(t), nil)
	ctx := context.Background()
	ci := Actor{Who: "ci", Via: history.API, Remote: "192.0.2.9:1234"}
	v1 := specFile(t, twoHosts)
	v2 := specFile(t, strings.Replace(twoHosts, "10.20.0.2/24", "10.20.0.3/24", 1))
	if _, err := c.Apply(ctx, Source{File: v1}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	pause := func(verb string, r PauseRequest) {
		t.Helper()
		r.Infra, r.By = "c1", ci
		do := c.Pause
		if verb == "resume" {
			do = c.Resume
		}
		if _, err := do(ctx, r); err != nil {
			t.Fatalf("%s %+v: %v", verb, r, err)
		}
	}
	pause("pause", PauseRequest{VM: "vm1"})
	pause("pause", PauseRequest{VM: "vm1"}) // paused already: no entry
	if _, err := c.Apply(ctx, Source{File: v2}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	pause("pause", PauseRequest{PortGroup: "pg-vm"})
	pause("resume", PauseRequest{PortGroup: "pg-vm"})

	h, err := c.History(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range h.Entries {
		got = append(got, string(e.Verb)+":"+itoa(e.Generation)+":"+e.Summary)
	}
	want := "apply:1:+2 hosts, +1 switch, +2 VMs|pause:1:paused VM vm1|apply:2:~1 vNIC (ip)|pause:2:paused port group pg-vm|resume:2:resumed port group pg-vm"
	if strings.Join(got, "|") != want {
		t.Errorf("history:\n%s\nwant:\n%s", strings.Join(got, "|"), want)
	}
	if e := h.Entries[1]; e.Who != "ci" || e.Via != history.API || e.Remote != "192.0.2.9:1234" || e.Spec != nil {
		t.Errorf("the pause's entry: %+v", e)
	}
	// Generation 2's spec is its apply's, not the pauses' after it.
	if e, err := c.Generation(ctx, "c1", 2); err != nil || e.Verb != history.Apply {
		t.Errorf("generation 2: %+v, %v", e, err)
	}

	// The one in force is as it is now: every pause and resume since.
	d, err := c.Diff(ctx, "c1", DiffRequest{From: 1})
	if err != nil || d.Summary != "~1 vNIC (ip)" || len(d.Pauses) != 3 || d.Pauses[0].Summary != "paused VM vm1" || d.Pauses[2].Verb != history.Resume {
		t.Errorf("diff from 1 to the one in force: %+v, %v", d, err)
	}
	if d, err = c.Diff(ctx, "c1", DiffRequest{Source: &Source{File: v1}}); err != nil || len(d.Pauses) != 0 {
		t.Errorf("diff with a file lists pauses: %+v, %v", d, err)
	}

	// Going back to generation 1 goes back to its spec: vm1 stays paused.
	rb, err := c.Rollback(ctx, "c1", RollbackOptions{})
	if err != nil || rb.To != 1 || rb.Stored.Generation != 3 {
		t.Fatalf("rollback: %+v, %v", rb, err)
	}
	st, err := c.Status(ctx, []string{"c1"})
	if err != nil || len(st) != 1 || strings.Join(st[0].Paused, ",") != plan.PauseVM("vm1") {
		t.Errorf("paused after the rollback: %+v, %v", st[0], err)
	}
	// Between two generations neither of which is in force: the pauses
	// between their entries, either way round.
	for _, r := range []DiffRequest{{From: 1, To: 2}, {From: 2, To: 1}} {
		d, err := c.Diff(ctx, "c1", r)
		if err != nil || len(d.Pauses) != 1 || d.Pauses[0].Summary != "paused VM vm1" {
			t.Errorf("diff from %d to %d: %+v, %v", r.From, r.To, d, err)
		}
	}

	// The smallest retention keeps the entry of the spec in force, not
	// the pause after it.
	if err := c.SetHistoryRetention(ctx, history.Retention{MaxEntries: 1}); err != nil {
		t.Fatal(err)
	}
	pause("resume", PauseRequest{})
	if e, err := c.Generation(ctx, "c1", 3); err != nil || e.Verb != history.Rollback {
		t.Errorf("generation 3 after a resume with one entry kept: %+v, %v", e, err)
	}
}

// withContainer is a spec with a VM the CNI plugin attached, on port
// group pg.
func withContainer(src, pg string) string {
	return strings.Replace(src, "vms:\n", "vms:\n  - {name: c-one, host: hv1, nics: [{portgroup: "+pg+", ip: 10.20.0.9/24, mac: \"02:00:00:00:00:09\", attach: {netns: ctr1, ifname: eth0, container: one, cni: web}}]}\n", 1)
}

// Over etcd a rollback keeps the VM a runtime attached (and what of it is
// paused), stored on top of the generation it read; one over a VM whose
// port group the earlier spec lacks is refused and stores nothing, or with
// DropAttached takes it out; a restore leaves the runtimes' VMs to their
// runtimes.
func TestClusterRollbackKeepsAttached(t *testing.T) {
	c := ClusterOf(etcdtest.Store(t), nil)
	ctx := context.Background()
	v2 := strings.Replace(twoHosts, "10.20.0.2/24", "10.20.0.3/24", 1)
	for _, src := range []string{twoHosts, v2, withContainer(v2, "pg-vm")} {
		if _, err := c.Apply(ctx, Source{File: specFile(t, src)}, ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Pause(ctx, PauseRequest{Infra: "c1", VM: "c-one"}); err != nil {
		t.Fatal(err)
	}
	d, err := c.Diff(ctx, "c1", DiffRequest{To: 1})
	if err != nil || d.Summary != "~1 vNIC (ip)" || d.Attached == nil || len(d.Attached.Kept) != 1 {
		t.Fatalf("diff to generation 1: %+v, %v", d, err)
	}
	rb, err := c.Rollback(ctx, "c1", RollbackOptions{To: 1})
	if err != nil || rb.Stored.Generation != 4 || rb.Attached == nil || len(rb.Attached.Kept) != 1 {
		t.Fatalf("rollback: %+v, %v", rb, err)
	}
	doc, err := c.Spec(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	vm2, _ := doc.Spec.VM("vm2")
	ctr, ok := doc.Spec.VM("c-one")
	if !ok || ctr.NICs[0].Attach.Container != "one" || vm2.NICs[0].IP != "10.20.0.2/24" {
		t.Errorf("after the rollback:\n%s", doc.Source)
	}
	st, err := c.Status(ctx, []string{"c1"})
	if err != nil || strings.Join(st[0].Paused, ",") != plan.PauseVM("c-one") {
		t.Errorf("paused after the rollback: %+v, %v", st[0].Paused, err)
	}

	// On a port group generation 1 lacks: refused, nothing stored.
	// (An apply keeps c-one as it is attached now: its runtime detaches
	// it first, and the file attaches it anew on pg-new.)
	if _, err := c.Detach(ctx, DetachRequest{Infra: "c1", Container: "one", Ifname: "eth0", CNI: "web"}); err != nil {
		t.Fatal(err)
	}
	moved := strings.Replace(withContainer(twoHosts, "pg-new"), "portgroups: [{name: pg-vm}]", "portgroups: [{name: pg-vm}, {name: pg-new}]", 1)
	if _, err := c.Apply(ctx, Source{File: specFile(t, moved)}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Get(ctx, "c1")
	_, err = c.Rollback(ctx, "c1", RollbackOptions{To: 1})
	if !errors.Is(err, ErrAttached) || errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "VM c-one on hv1 (container one; eth0 in namespace ctr1 on pg-new, CNI network web): no port group pg-new") {
		t.Fatalf("rollback over c-one: %v", err)
	}
	if after, _ := c.Get(ctx, "c1"); after.Generation != before.Generation {
		t.Errorf("the refused rollback stored generation %d", after.Generation)
	}
	d, err = c.Diff(ctx, "c1", DiffRequest{To: 1})
	if err != nil || d.Attached == nil || len(d.Attached.InTheWay) != 1 || !strings.Contains(d.Diff.String(), "- vm c-one") {
		t.Errorf("diff over c-one: %+v, %v", d, err)
	}
	rb, err = c.Rollback(ctx, "c1", RollbackOptions{To: 1, DropAttached: true})
	if err != nil || !rb.Attached.Dropped {
		t.Fatalf("rollback --drop-attached: %+v, %v", rb, err)
	}
	if doc, _ := c.Spec(ctx, "c1"); doc != nil {
		if _, ok := doc.Spec.VM("c-one"); ok {
			t.Error("--drop-attached kept c-one")
		}
	}

	// A snapshot taken with a container restores without it.
	if _, err := c.Apply(ctx, Source{File: specFile(t, withContainer(twoHosts, "pg-vm"))}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	other := ClusterOf(etcdtest.Store(t), nil)
	res, err := other.Restore(ctx, snap, RestoreOptions{})
	if err != nil || res.Attached == nil || strings.Join(res.Attached.LeftOut, ",") != "c-one" {
		t.Fatalf("restore: %+v, %v", res, err)
	}
	if doc, err := other.Spec(ctx, "c1"); err != nil || len(doc.Spec.VMs) != 2 {
		t.Errorf("restored: %v", err)
	}
}
