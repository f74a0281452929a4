package reconcile

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// specOfVMs is a host with one private switch and the VMs given, each
// "name ip" or "name ip extra" (extra: more of the vNIC's fields).
func specOfVMs(t *testing.T, vms ...string) *spec.Document {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: w\nhosts:\n  - name: h1\nswitches:\n  - name: sw0\n    hosts: [h1]\n    portgroups: [{name: pg}]\nvms:\n")
	for _, vm := range vms {
		f := strings.SplitN(vm, " ", 3)
		extra := ""
		if len(f) == 3 {
			extra = ", " + f[2]
		}
		fmt.Fprintf(&b, "  - {name: %s, host: h1, nics: [{portgroup: pg, ip: %s%s}]}\n", f[0], f[1], extra)
	}
	doc, err := spec.Load("w.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// An engine that keeps its models (a server's, with a Memo) plans,
// changes the host and records each apply of a series of changes exactly
// as an engine that keeps nothing (a new process's): VMs added, changed,
// removed, offloads set and dropped, and the same spec applied again.
func TestWarmApplyDoesWhatAColdOneDoes(t *testing.T) {
	base := []string{"vm1 10.0.0.1/24", "vm2 10.0.0.2/24", "vm3 10.0.0.3/24"}
	with := func(vms ...string) []string { return append(slices.Clone(base), vms...) }
	steps := []struct {
		name string
		vms  []string
	}{
		{"first apply", base},
		{"the same spec again", base},
		{"a VM added", with("vm4 10.0.0.4/24")},
		{"the same spec again", with("vm4 10.0.0.4/24")},
		{"its address changed", with("vm4 10.0.0.40/24")},
		{"its offloads set", with("vm4 10.0.0.40/24 offloads: {gro: true}")},
		{"the same spec again, offloads set", with("vm4 10.0.0.40/24 offloads: {gro: true}")},
		{"its offloads dropped", with("vm4 10.0.0.40/24")},
		{"the same spec again, offloads dropped", with("vm4 10.0.0.40/24")},
		{"a VM in the middle removed", []string{"vm1 10.0.0.1/24", "vm3 10.0.0.3/24", "vm4 10.0.0.40/24"}},
		{"back to the first", base},
		{"the same spec again", base},
	}
	engine := func(memo *Memo) (*Engine, *memDP, *store.Bolt) {
		st, err := store.OpenBolt(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		dp := newMemDP()
		return &Engine{DP: dp, Store: st, Log: io.Discard, Memo: memo, NumCPU: 2}, dp, st
	}
	warm, warmDP, warmStore := engine(&Memo{})
	cold, coldDP, coldStore := engine(nil)
	kept := 0
	for _, step := range steps {
		// Each apply decodes its spec anew, as a client sends it.
		coldDP.begin()
		warmDP.begin()
		wantRes, err := cold.Apply(specOfVMs(t, step.vms...))
		if err != nil {
			t.Fatalf("%s: cold: %v", step.name, err)
		}
		trace := &strings.Builder{}
		warm.Trace = trace
		gotRes, err := warm.Apply(specOfVMs(t, step.vms...))
		if err != nil {
			t.Fatalf("%s: warm: %v", step.name, err)
		}
		if strings.Contains(trace.String(), "models (kept)") {
			kept++
		}
		if got, want := gotRes.Plan.String(), wantRes.Plan.String(); got != want {
			t.Errorf("%s: warm plan:\n%s\ncold plan:\n%s", step.name, got, want)
		}
		// The dataplane reads a port program's text as a digest, which
		// the models explain: the last one's, for a program that goes.
		if plan.IsDigest(gotRes.Plan.String()) {
			t.Errorf("%s: a program's digest left unresolved:\n%s", step.name, gotRes.Plan)
		}
		got, want := realizedOf(t, warmStore), realizedOf(t, coldStore)
		// The stores differ, and so do the marks their models carry.
		want = plan.MarkOwned(want, "w", warmStore.ID(), warmStore.Location())
		if d := plan.Diff(got, want); !d.Empty() {
			t.Errorf("%s: the warm engine recorded what the cold one did not:\n%s", step.name, d)
		}
		if !sameHost(warmDP, coldDP, warmStore, coldStore) {
			t.Errorf("%s: the hosts differ", step.name)
		}
		// Each record notes the ID of every namespace, whether this
		// apply made, checked or only carried it over from the last.
		for _, st := range []*store.Bolt{warmStore, coldStore} {
			rec, err := st.Get("w")
			if err != nil {
				t.Fatal(err)
			}
			dp := map[*store.Bolt]*memDP{warmStore: warmDP, coldStore: coldDP}[st]
			if rec.Namespaces == nil || !maps.Equal(rec.Namespaces.IDs, dp.ids) {
				t.Errorf("%s: recorded namespace IDs %v, want %v", step.name, rec.Namespaces, dp.ids)
			}
		}
	}
	if kept != 5 {
		t.Errorf("the warm engine kept its model for %d applies of the same spec, want 5", kept)
	}
}

func realizedOf(t *testing.T, st *store.Bolt) []plan.Resource {
	t.Helper()
	rec, err := st.Get("w")
	if err != nil {
		t.Fatal(err)
	}
	return rec.Realized
}

// sameHost reports whether two dataplanes hold the same, but for the marks
// of their stores.
func sameHost(a, b *memDP, sa, sb *store.Bolt) bool {
	if !slices.Equal(slices.Sorted(maps.Keys(a.byKey)), slices.Sorted(maps.Keys(b.byKey))) {
		return false
	}
	markA := plan.Mark{Infra: "w", Store: sa.ID(), Dir: sa.Location()}.String()
	markB := plan.Mark{Infra: "w", Store: sb.ID(), Dir: sb.Location()}.String()
	for k, r := range a.byKey {
		o := b.byKey[k]
		if o.Mark == markB {
			o.Mark = markA
		}
		if !plan.Same(r, o) {
			return false
		}
	}
	return true
}
