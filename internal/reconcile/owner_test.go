package reconcile

import (
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
)

const (
	ownID    = "00000000000000aa"
	otherID  = "00000000000000bb"
	ownDir   = "/var/lib/vnet"
	otherDir = "/srv/other"
)

func markOf(infra, id, dir string) string {
	return plan.Mark{Infra: infra, Store: id, Dir: dir}.String()
}

// Every case of whose a namespace or a VM's cgroup of the infrastructure
// is: this store's by its mark, by its record when unmarked, a cgroup by
// its VM's namespace when unmarked; another store's, another
// infrastructure's, or unmarked and unrecorded are strangers, and what
// lives in a stranger namespace is not this store's either.
func TestClaimTellsThisStoresObjects(t *testing.T) {
	own := markOf("demo", ownID, ownDir)
	moved := markOf("demo", ownID, "/before/the/move")
	tests := []struct {
		name     string
		observed []plan.Resource
		listed   []string // keys the record lists
		adopt    []string // namespaces an apply was making
		mine     []string // keys
		strange  []string // names
	}{
		{"marked by this store", []plan.Resource{
			{Kind: plan.KindNetns, Name: "vnet.demo.esx1", Mark: own},
			{Kind: plan.KindCgroup, Name: "vnet/demo/vm1", Mark: own},
		}, nil, nil, []string{"netns/vnet.demo.esx1", "cgroup/vnet/demo/vm1"}, nil},
		{"marked by this store from another directory (it moved)", []plan.Resource{
			{Kind: plan.KindNetns, Name: "vnet.demo.esx1", Mark: moved},
		}, nil, nil, []string{"netns/vnet.demo.esx1"}, nil},
		{"marked by another store, with what lives in it", []plan.Resource{
			{Kind: plan.KindNetns, Name: "vnet.demo.esx1", Mark: markOf("demo", otherID, otherDir)},
			{Kind: plan.KindBridge, NS: "vnet.demo.esx1", Name: "br0"},
			{Kind: plan.KindNetns, Name: "vnet.demo.vm1", Mark: own},
			{Kind: plan.KindCgroup, Name: "vnet/demo/vm1", Mark: markOf("demo", otherID, otherDir)},
		}, nil, nil, []string{"netns/vnet.demo.vm1"}, []string{"vnet.demo.esx1", "vnet/demo/vm1"}},
		{"marked by this store for another infrastructure", []plan.Resource{
			{Kind: plan.KindNetns, Name: "vnet.demo.esx1", Mark: markOf("other", ownID, ownDir)},
		}, nil, nil, nil, []string{"vnet.demo.esx1"}},
		{"unmarked, recorded", []plan.Resource{
			{Kind: plan.KindNetns, Name: "vnet.demo.esx1"},
			{Kind: plan.KindCgroup, Name: "vnet/demo/vm9"},
		}, []string{"netns/vnet.demo.esx1", "cgroup/vnet/demo/vm9"}, nil, []string{"netns/vnet.demo.esx1", "cgroup/vnet/demo/vm9"}, nil},
		{"unmarked, being made by this apply", []plan.Resource{
			{Kind: plan.KindNetns, Name: "vnet.demo.esx1"},
		}, nil, []string{"vnet.demo.esx1"}, []string{"netns/vnet.demo.esx1"}, nil},
		{"an unmarked cgroup of this store's VM (killed before its mark)", []plan.Resource{
			{Kind: plan.KindNetns, Name: "vnet.demo.vm1", Mark: own},
			{Kind: plan.KindCgroup, Name: "vnet/demo/vm1"},
		}, nil, nil, []string{"netns/vnet.demo.vm1", "cgroup/vnet/demo/vm1"}, nil},
		{"unmarked and unrecorded: made by hand", []plan.Resource{
			{Kind: plan.KindNetns, Name: "vnet.demo.x"},
			{Kind: plan.KindCgroup, Name: "vnet/demo/y"},
		}, nil, nil, nil, []string{"vnet.demo.x", "vnet/demo/y"}},
		{"an unmarked cgroup of a stranger's VM", []plan.Resource{
			{Kind: plan.KindNetns, Name: "vnet.demo.vm1"},
			{Kind: plan.KindCgroup, Name: "vnet/demo/vm1"},
		}, nil, nil, nil, []string{"vnet.demo.vm1"}},
		{"an unmarked namespace being made does not make its cgroup's mark", []plan.Resource{
			{Kind: plan.KindNetns, Name: "vnet.demo.vm1"},
			{Kind: plan.KindCgroup, Name: "vnet/demo/vm1", Mark: markOf("demo", otherID, otherDir)},
		}, nil, []string{"vnet.demo.vm1"}, []string{"netns/vnet.demo.vm1"}, []string{"vnet/demo/vm1"}},
	}
	for _, tc := range tests {
		listed := func(key string) bool { return slices.Contains(tc.listed, key) }
		adopt := map[string]bool{}
		for _, ns := range tc.adopt {
			adopt[ns] = true
		}
		mine, strangers := claimWith(listed, ownID, "demo", tc.observed, adopt)
		var keys, names []string
		for _, r := range mine {
			if plan.Markable(r.Kind) {
				keys = append(keys, r.Key())
			}
		}
		for _, s := range strangers {
			names = append(names, s.name)
		}
		if !slices.Equal(keys, tc.mine) || !slices.Equal(names, tc.strange) {
			t.Errorf("%s: mine %v, strangers %v; want %v, %v", tc.name, keys, names, tc.mine, tc.strange)
		}
		for _, r := range mine {
			if r.Kind == plan.KindBridge && slices.Contains(names, r.NS) {
				t.Errorf("%s: took %s, in a stranger's namespace", tc.name, r.Key())
			}
		}
	}
}

// An apply refuses a stranger the spec needs, and any object another
// store marked, naming that store; an unmarked stranger it does not need
// is left in silence.
func TestRefuseStrangersSaysWhoseAndWhatToDo(t *testing.T) {
	desired := []plan.Resource{{Kind: plan.KindNetns, Name: "vnet.demo.vm1"}, {Kind: plan.KindCgroup, Name: "vnet/demo/vm1"}}
	tests := []struct {
		name string
		s    stranger
		says []string // nil: no refusal
	}{
		{"unmarked, not needed", stranger{kind: plan.KindNetns, name: "vnet.demo.x"}, nil},
		{"unmarked namespace the spec needs", stranger{kind: plan.KindNetns, name: "vnet.demo.vm1"},
			[]string{"no mark", "vnet recover --adopt demo", "ip netns del vnet.demo.vm1"}},
		{"unmarked cgroup the spec needs", stranger{kind: plan.KindCgroup, name: "vnet/demo/vm1"},
			[]string{"cgroup vnet/demo/vm1", "no mark", "vnet recover --adopt demo"}},
		{"marked by a store not found", stranger{kind: plan.KindNetns, name: "vnet.demo.x", marked: true,
			mark: plan.Mark{Infra: "demo", Store: "00000000deadbeef", Dir: "/nowhere"}},
			[]string{"/nowhere", "no store on this host has its ID", "--store-gone 00000000deadbeef"}},
		{"marked by a store with no directory", stranger{kind: plan.KindCgroup, name: "vnet/demo/x", marked: true,
			mark: plan.Mark{Infra: "demo", Store: "00000000deadbeef"}},
			[]string{"cgroup vnet/demo/x", "the vnet store that made it"}},
	}
	for _, tc := range tests {
		err := refuseStrangers("demo", []stranger{tc.s}, desired)
		if tc.says == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: not refused", tc.name)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", tc.name, err, s)
			}
		}
	}
}

// markDP is a dataplane that reads marks from a map.
type markDP struct {
	Dataplane
	marks map[string]string
}

func (d markDP) Marks(namespaces, cgroups []string) (map[string]string, error) {
	out := map[string]string{}
	for _, ns := range namespaces {
		if m, ok := d.marks["netns/"+ns]; ok {
			out["netns/"+ns] = m
		}
	}
	for _, cg := range cgroups {
		if m, ok := d.marks["cgroup/"+cg]; ok {
			out["cgroup/"+cg] = m
		}
	}
	return out, nil
}

// idStore is a store known by its ID and directory alone.
type idStore struct{ store.Store }

func (idStore) ID() string       { return ownID }
func (idStore) Location() string { return ownDir }

// An apply trusts its record only while the host holds each namespace
// and cgroup it names, marked as this store in this directory marks them.
func TestRecordStandsOnlyWhileTheHostHoldsIt(t *testing.T) {
	recorded := []plan.Resource{
		{Kind: plan.KindNetns, Name: "vnet.demo.esx1"},
		{Kind: plan.KindNetns, Name: "vnet.demo.vm1"},
		{Kind: plan.KindCgroup, Name: "vnet/demo/vm1"},
		{Kind: plan.KindBridge, NS: "vnet.demo.esx1", Name: "br0"},
	}
	own := markOf("demo", ownID, ownDir)
	all := map[string]string{"netns/vnet.demo.esx1": own, "netns/vnet.demo.vm1": own, "cgroup/vnet/demo/vm1": own}
	with := func(key, mark string, drop bool) map[string]string {
		m := map[string]string{}
		for k, v := range all {
			m[k] = v
		}
		if drop {
			delete(m, key)
		} else {
			m[key] = mark
		}
		return m
	}
	tests := []struct {
		name  string
		marks map[string]string
		says  []string // nil: the record stands
	}{
		{"everything there", all, nil},
		{"a namespace gone", with("netns/vnet.demo.vm1", "", true), []string{"1 gone", "netns/vnet.demo.vm1"}},
		{"a cgroup gone", with("cgroup/vnet/demo/vm1", "", true), []string{"1 gone", "cgroup/vnet/demo/vm1"}},
		{"made anew by hand", with("netns/vnet.demo.vm1", "", false), []string{"not marked as this store's", "netns/vnet.demo.vm1"}},
		{"another store's", with("netns/vnet.demo.esx1", markOf("demo", otherID, otherDir), false), []string{"not marked", "netns/vnet.demo.esx1"}},
		{"marked from another directory", with("cgroup/vnet/demo/vm1", markOf("demo", ownID, "/before"), false), []string{"not marked", "cgroup/vnet/demo/vm1"}},
	}
	for _, tc := range tests {
		e := &Engine{DP: markDP{marks: tc.marks}, Store: idStore{}, Log: io.Discard}
		why, _ := e.recordStands("demo", recorded, nil)
		if tc.says == nil {
			if why != "" {
				t.Errorf("%s: %s", tc.name, why)
			}
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(why, s) {
				t.Errorf("%s: %q does not say %q", tc.name, why, s)
			}
		}
	}
	// A dataplane that cannot read marks (a test's, a cluster's) trusts
	// the record as before.
	if why, _ := (&Engine{Store: idStore{}}).recordStands("demo", recorded, nil); why != "" {
		t.Errorf("without marks: %s", why)
	}
}

// idDP is a markDP whose namespaces have IDs, which notes whose marks it
// was asked for.
type idDP struct {
	markDP
	boot  string
	ids   map[string]uint64
	asked *[]string
}

func (d idDP) Marks(namespaces, cgroups []string) (map[string]string, error) {
	*d.asked = append(*d.asked, namespaces...)
	return d.markDP.Marks(namespaces, cgroups)
}

func (d idDP) NamespaceBoot() (string, string) { return d.boot, "" }

func (d idDP) NamespaceIDs(names []string) map[string]uint64 {
	out := map[string]uint64{}
	for _, n := range names {
		if id, ok := d.ids[n]; ok {
			out[n] = id
		}
	}
	return out
}

func (d idDP) MarkedNamespaceIDs([]string, string) map[string]uint64 { return map[string]uint64{} }

// A namespace whose ID is the one the record noted, in this boot and for
// this mark, stands without its mark read; any other has its mark read as
// a record without IDs has, and a mark that is not this store's makes the
// apply read everything.
func TestRecordStandsByNamespaceIDs(t *testing.T) {
	recorded := []plan.Resource{
		{Kind: plan.KindNetns, Name: "vnet.demo.esx1"},
		{Kind: plan.KindNetns, Name: "vnet.demo.vm1"},
		{Kind: plan.KindCgroup, Name: "vnet/demo/vm1"},
	}
	own := markOf("demo", ownID, ownDir)
	owned := map[string]string{"netns/vnet.demo.esx1": own, "netns/vnet.demo.vm1": own, "cgroup/vnet/demo/vm1": own}
	noted := &plan.NamespaceIDs{Boot: "b1", Mark: own, IDs: map[string]uint64{"vnet.demo.esx1": 7, "vnet.demo.vm1": 8}}
	same := map[string]uint64{"vnet.demo.esx1": 7, "vnet.demo.vm1": 8}
	tests := []struct {
		name    string
		noted   *plan.NamespaceIDs
		boot    string
		ids     map[string]uint64
		marks   map[string]string
		asked   []string // whose marks were read
		vouched int
		says    string // "": the record stands
	}{
		{name: "the same namespaces", noted: noted, boot: "b1", ids: same, marks: owned, vouched: 2},
		{name: "no IDs recorded", noted: nil, boot: "b1", ids: same, marks: owned,
			asked: []string{"vnet.demo.esx1", "vnet.demo.vm1"}},
		{name: "another boot", noted: noted, boot: "b2", ids: same, marks: owned,
			asked: []string{"vnet.demo.esx1", "vnet.demo.vm1"}},
		{name: "a kernel without IDs", noted: noted, boot: "", marks: owned,
			asked: []string{"vnet.demo.esx1", "vnet.demo.vm1"}},
		{name: "made anew by hand under the same name", noted: noted, boot: "b1",
			ids:   map[string]uint64{"vnet.demo.esx1": 7, "vnet.demo.vm1": 9},
			marks: map[string]string{"netns/vnet.demo.esx1": own, "netns/vnet.demo.vm1": "", "cgroup/vnet/demo/vm1": own},
			asked: []string{"vnet.demo.vm1"}, vouched: 1, says: "not marked as this store's"},
		{name: "made anew by this store", noted: noted, boot: "b1",
			ids: map[string]uint64{"vnet.demo.esx1": 7, "vnet.demo.vm1": 9}, marks: owned,
			asked: []string{"vnet.demo.vm1"}, vouched: 1},
		{name: "gone", noted: noted, boot: "b1", ids: map[string]uint64{"vnet.demo.esx1": 7},
			marks: map[string]string{"netns/vnet.demo.esx1": own, "cgroup/vnet/demo/vm1": own},
			asked: []string{"vnet.demo.vm1"}, vouched: 1, says: "1 gone"},
		{name: "noted for another directory", noted: &plan.NamespaceIDs{Boot: "b1", Mark: markOf("demo", ownID, "/before"), IDs: maps.Clone(same)},
			boot: "b1", ids: same, marks: owned, asked: []string{"vnet.demo.esx1", "vnet.demo.vm1"}},
	}
	for _, tc := range tests {
		var asked []string
		dp := idDP{markDP: markDP{marks: tc.marks}, boot: tc.boot, ids: tc.ids, asked: &asked}
		e := &Engine{DP: dp, Store: idStore{}, Log: io.Discard}
		why, vouched := e.recordStands("demo", recorded, tc.noted)
		if (why == "") != (tc.says == "") || !strings.Contains(why, tc.says) {
			t.Errorf("%s: why = %q, want one saying %q", tc.name, why, tc.says)
		}
		if !slices.Equal(asked, tc.asked) {
			t.Errorf("%s: read the marks of %v, want %v", tc.name, asked, tc.asked)
		}
		if len(vouched) != tc.vouched {
			t.Errorf("%s: vouched for %v, want %d", tc.name, vouched, tc.vouched)
		}
	}
}

// A change that touches some namespaces checks what the record names in
// them alone, and carries the IDs noted of the others; one that touches
// none checks everything the record names.
func TestRecordStandsWithinTheChange(t *testing.T) {
	recorded := []plan.Resource{
		{Kind: plan.KindNetns, Name: "vnet.demo.esx1"},
		{Kind: plan.KindNetns, Name: "vnet.demo.vm1"},
		{Kind: plan.KindCgroup, Name: "vnet/demo/vm1"},
		{Kind: plan.KindNetns, Name: "vnet.demo.vm2"},
		{Kind: plan.KindCgroup, Name: "vnet/demo/vm2"},
		{Kind: plan.KindBridge, NS: "vnet.demo.esx1", Name: "br0"},
	}
	own := markOf("demo", ownID, ownDir)
	owned := map[string]string{"netns/vnet.demo.esx1": own, "netns/vnet.demo.vm1": own, "netns/vnet.demo.vm2": own,
		"cgroup/vnet/demo/vm1": own, "cgroup/vnet/demo/vm2": own}
	without := func(keys ...string) map[string]string {
		m := maps.Clone(owned)
		for _, k := range keys {
			delete(m, k)
		}
		return m
	}
	noted := &plan.NamespaceIDs{Boot: "b1", Mark: own, IDs: map[string]uint64{"vnet.demo.esx1": 7, "vnet.demo.vm1": 8, "vnet.demo.vm2": 9}}
	same := map[string]uint64{"vnet.demo.esx1": 7, "vnet.demo.vm1": 8, "vnet.demo.vm2": 9}
	vm2Anew := map[string]uint64{"vnet.demo.esx1": 7, "vnet.demo.vm1": 8, "vnet.demo.vm2": 10}
	ofVM1 := plan.Scope{"vnet.demo.vm1": nil, "vnet.demo.esx1": {"p1": true}}
	tests := []struct {
		name    string
		scope   plan.Scope
		boot    string
		ids     map[string]uint64
		marks   map[string]string
		asked   []string // whose marks were read
		vouched map[string]uint64
		says    string // "": the record stands
	}{
		{name: "vm1 changed, vm2 made anew by hand", scope: ofVM1, boot: "b1", ids: vm2Anew, marks: without("netns/vnet.demo.vm2"),
			vouched: same},
		{name: "vm1 changed, vm2's cgroup gone", scope: ofVM1, boot: "b1", ids: same, marks: without("cgroup/vnet/demo/vm2"),
			vouched: same},
		{name: "vm1 changed, vm1 gone", scope: ofVM1, boot: "b1", ids: map[string]uint64{"vnet.demo.esx1": 7, "vnet.demo.vm2": 9},
			marks: without("netns/vnet.demo.vm1"), asked: []string{"vnet.demo.vm1"}, says: "1 gone"},
		{name: "vm1 changed, vm1's cgroup gone", scope: ofVM1, boot: "b1", ids: same, marks: without("cgroup/vnet/demo/vm1"),
			says: "cgroup/vnet/demo/vm1"},
		{name: "vm1 changed in another boot: nothing carried", scope: ofVM1, boot: "b2", ids: same, marks: owned,
			asked: []string{"vnet.demo.esx1", "vnet.demo.vm1"}, vouched: map[string]uint64{}},
		{name: "nothing changed, vm2 made anew by hand", scope: plan.Scope{}, boot: "b1", ids: vm2Anew,
			marks: maps.Clone(owned), asked: []string{"vnet.demo.vm2"}, vouched: map[string]uint64{"vnet.demo.esx1": 7, "vnet.demo.vm1": 8}},
		{name: "nothing changed, vm2 gone", scope: plan.Scope{}, boot: "b1", ids: map[string]uint64{"vnet.demo.esx1": 7, "vnet.demo.vm1": 8},
			marks: without("netns/vnet.demo.vm2"), asked: []string{"vnet.demo.vm2"}, says: "1 gone"},
	}
	for _, tc := range tests {
		var asked []string
		dp := idDP{markDP: markDP{marks: tc.marks}, boot: tc.boot, ids: tc.ids, asked: &asked}
		e := &Engine{DP: dp, Store: idStore{}, Log: io.Discard}
		why, vouched := e.recordStandsWithin("demo", tc.scope, recorded, noted)
		if (why == "") != (tc.says == "") || !strings.Contains(why, tc.says) {
			t.Errorf("%s: why = %q, want one saying %q", tc.name, why, tc.says)
		}
		if !slices.Equal(asked, tc.asked) {
			t.Errorf("%s: read the marks of %v, want %v", tc.name, asked, tc.asked)
		}
		if got := vouched.all(); tc.says == "" && !maps.Equal(got, tc.vouched) {
			t.Errorf("%s: vouched for %v, want %v", tc.name, got, tc.vouched)
		}
		for name, id := range tc.vouched {
			if got, ok := vouched.id(name); tc.says == "" && (!ok || got != id) {
				t.Errorf("%s: vouched for %s as %d (%v), want %d", tc.name, name, got, ok, id)
			}
		}
	}
}

// seenDP is an idDP that saw some namespaces carrying marks in this
// operation (MarkedNamespaceIDs).
type seenDP struct {
	idDP
	seen  map[string]uint64
	marks map[string]string // of those seen, by name
}

func (d seenDP) MarkedNamespaceIDs(names []string, mark string) map[string]uint64 {
	out := map[string]uint64{}
	for _, n := range names {
		if id, ok := d.seen[n]; ok && d.marks[n] == mark {
			out[n] = id
		}
	}
	return out
}

// What an apply records of its namespaces' identity: the ID of each
// namespace of its model it saw carrying this store's mark, else the one
// vouched for (checked, or carried from the record outside the scope);
// none of a namespace of neither, and no identities at all where the
// kernel tells none or the model has no namespace.
func TestRecordedNamespaces(t *testing.T) {
	own := markOf("demo", ownID, ownDir)
	other := markOf("demo", otherID, otherDir)
	model := []plan.Resource{
		{Kind: plan.KindNetns, Name: "vnet.demo.esx1"},
		{Kind: plan.KindBridge, NS: "vnet.demo.esx1", Name: "br0"},
		{Kind: plan.KindNetns, Name: "vnet.demo.vm1"},
		{Kind: plan.KindCgroup, Name: "vnet/demo/vm1"},
		{Kind: plan.KindNetns, Name: "vnet.demo.vm2"},
		{Kind: plan.KindNetns, Name: "vnet.demo.vm3"},
	}
	carried := map[string]uint64{"vnet.demo.esx1": 7, "vnet.demo.vm1": 8, "vnet.demo.vm2": 9, "vnet.demo.gone": 4, "vnet.demo.vm3": 0}
	ofVM1 := plan.Scope{"vnet.demo.vm1": nil, "vnet.demo.esx1": {"p1": true}}
	tests := []struct {
		name    string
		boot    string
		model   []plan.Resource
		seen    map[string]uint64
		marks   map[string]string
		vouched vouchedIDs
		want    map[string]uint64 // nil: no identities recorded
	}{
		{name: "seen with this store's mark, before what was vouched for", boot: "b1", model: model,
			seen: map[string]uint64{"vnet.demo.vm1": 11, "vnet.demo.vm2": 12}, marks: map[string]string{"vnet.demo.vm1": own, "vnet.demo.vm2": other},
			vouched: vouchedIDs{checked: map[string]uint64{"vnet.demo.vm1": 8}, carried: carried, scope: ofVM1},
			want:    map[string]uint64{"vnet.demo.vm1": 11, "vnet.demo.vm2": 9}},
		{name: "carried outside the scope alone, not of a namespace the model lost nor a zero", boot: "b1", model: model,
			vouched: vouchedIDs{carried: carried, scope: ofVM1},
			want:    map[string]uint64{"vnet.demo.vm2": 9}},
		{name: "checked in the scope", boot: "b1", model: model,
			vouched: vouchedIDs{checked: map[string]uint64{"vnet.demo.vm1": 8, "vnet.demo.esx1": 7}},
			want:    map[string]uint64{"vnet.demo.vm1": 8, "vnet.demo.esx1": 7}},
		{name: "neither seen nor vouched for", boot: "b1", model: model, want: map[string]uint64{}},
		{name: "a kernel without IDs", boot: "", model: model, vouched: vouchedIDs{carried: carried}},
		{name: "no namespace in the model", boot: "b1", model: model[1:2], vouched: vouchedIDs{carried: carried}},
	}
	for _, tc := range tests {
		dp := seenDP{idDP: idDP{boot: tc.boot}, seen: tc.seen, marks: tc.marks}
		e := &Engine{DP: dp, Store: idStore{}, Log: io.Discard}
		got := e.recordedNamespaces("demo", tc.model, tc.vouched)
		if tc.want == nil {
			if got != nil {
				t.Errorf("%s: recorded %+v, want none", tc.name, got)
			}
			continue
		}
		if got == nil || got.Boot != tc.boot || got.Mark != own || !maps.Equal(got.IDs, tc.want) {
			t.Errorf("%s: recorded %+v, want boot %s, this store's mark and %v", tc.name, got, tc.boot, tc.want)
		}
	}
}
