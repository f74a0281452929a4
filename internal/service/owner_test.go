package service

import (
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
)

// The stores of these tests: this one, one alive where its marks say, one
// alive elsewhere than its marks say (its directory moved and was opened
// there), and one found nowhere.
const (
	selfID   = "0000000000000001"
	liveID   = "0000000000000002"
	movedID  = "0000000000000003"
	goneID   = "0000000000000004"
	liveDir  = "/var/lib/vnet-live"
	movedOld = "/var/lib/vnet-before"
	movedNew = "/srv/vnet-after"
	goneDir  = "/tmp/vnet-lab-state123"
)

func testFind(id, dir string) store.Whereabouts {
	w := store.Whereabouts{ID: id, Named: dir}
	switch id {
	case selfID:
		w.Dir = "/var/lib/vnet"
	case liveID:
		w.Dir = liveDir
	case movedID:
		w.Dir = movedNew
	case goneID:
		w.Last = goneDir
	}
	return w
}

func testOwnership() ownership {
	return ownership{self: selfID, find: testFind,
		recorded: func(infra string) bool { return infra == "rec" },
		ownNS:    func(infra string) bool { return infra == "ownns" },
		nsMark: func(cgroup string) (plan.Mark, bool) {
			switch cgroup {
			case "vnet/older/vm1":
				return mark("older", liveID, liveDir), true
			case "vnet/olderself/vm1":
				return mark("olderself", selfID, "/var/lib/vnet"), true
			case "vnet/oldergone/vm1":
				return mark("oldergone", goneID, goneDir), true
			}
			return plan.Mark{}, false
		},
		goneStores: map[string]bool{}, unmarked: map[string]bool{}}
}

func mark(infra, id, dir string) plan.Mark { return plan.Mark{Infra: infra, Store: id, Dir: dir} }

// Every case of who made a namespace or cgroup that gc meets, and what gc
// does: it removes only what is certainly nobody's, leaves another live
// store's (saying so when it moved), and refuses, with the reason and the
// option that would remove it, whatever it cannot be sure of.
func TestGCJudgesOwnership(t *testing.T) {
	ns, cg := plan.KindNetns, plan.KindCgroup
	tests := []struct {
		name          string
		kind          plan.Kind
		object, infra string
		mark          plan.Mark
		marked        bool
		gone          []string // --store-gone
		unmarked      []string // --unmarked
		want          verdict
		says          []string
	}{
		{"another live store's namespace", ns, "vnet.demo.esx1", "demo", mark("demo", liveID, liveDir), true, nil, nil, keep, nil},
		{"a moved store's namespace", ns, "vnet.demo.esx1", "demo", mark("demo", movedID, movedOld), true, nil, nil, moved,
			[]string{"now at " + movedNew, "moved from " + movedOld, "left to it"}},
		{"a namespace whose store is not found", ns, "vnet.demo.esx1", "demo", mark("demo", goneID, goneDir), true, nil, nil, refuse,
			[]string{"store " + goneID, "not there", "may have moved", "`vnet gc --store-gone " + goneID + "`"}},
		{"a forged mark naming a missing directory", ns, "vnet.mine.x", "mine", mark("mine", "00000000deadbeef", "/nowhere"), true, nil, nil, refuse,
			[]string{"/nowhere", "--store-gone 00000000deadbeef"}},
		{"a namespace whose store is gone for good", ns, "vnet.demo.esx1", "demo", mark("demo", goneID, goneDir), true, []string{goneID}, nil, take, nil},
		{"--store-gone of another store takes nothing else", ns, "vnet.demo.esx1", "demo", mark("demo", goneID, goneDir), true, []string{liveID}, nil, refuse, nil},
		{"--store-gone does not take a live store's", ns, "vnet.demo.esx1", "demo", mark("demo", liveID, liveDir), true, []string{liveID}, nil, keep, nil},
		{"an unmarked namespace", ns, "vnet.demo.esx1", "demo", plan.Mark{}, false, nil, nil, keep, nil},
		{"a hand-made cgroup under vnet/", cg, "vnet/mine/x", "mine", plan.Mark{}, false, nil, nil, refuse,
			[]string{"no vnet mark", "`vnet gc --unmarked mine`"}},
		{"an unmarked cgroup of a live store's VM (made before cgroup marks)", cg, "vnet/older/vm1", "older", plan.Mark{}, false, nil, nil, keep, nil},
		{"an unmarked cgroup of this store's VM", cg, "vnet/olderself/vm1", "olderself", plan.Mark{}, false, nil, nil, keep, nil},
		{"an unmarked cgroup of a VM whose store is not found", cg, "vnet/oldergone/vm1", "oldergone", plan.Mark{}, false, nil, nil, refuse,
			[]string{"store " + goneID + ", which is not found", "--unmarked oldergone"}},
		{"an unmarked cgroup the user says vnet made", cg, "vnet/old/vm1", "old", plan.Mark{}, false, nil, []string{"old"}, take, nil},
		{"--unmarked of another infrastructure", cg, "vnet/mine/x", "mine", plan.Mark{}, false, nil, []string{"old"}, refuse, nil},
		{"a cgroup whose mark names another infrastructure", cg, "vnet/mine/x", "mine", mark("demo", selfID, "/var/lib/vnet"), true, nil, nil, refuse,
			[]string{"names infrastructure demo, not mine"}},
		{"this store's cgroup, nothing recorded or left", cg, "vnet/lost/vm1", "lost", mark("lost", selfID, "/var/lib/vnet"), true, nil, nil, take, nil},
		{"this store's cgroup of a recorded infrastructure", cg, "vnet/rec/vm1", "rec", mark("rec", selfID, "/var/lib/vnet"), true, nil, nil, keep, nil},
		{"this store's cgroup beside its namespaces", cg, "vnet/ownns/vm1", "ownns", mark("ownns", selfID, "/var/lib/vnet"), true, nil, nil, keep, nil},
		{"another live store's cgroup", cg, "vnet/demo/vm1", "demo", mark("demo", liveID, liveDir), true, nil, nil, keep, nil},
		{"a cgroup whose store is not found", cg, "vnet/demo/vm1", "demo", mark("demo", goneID, goneDir), true, nil, nil, refuse,
			[]string{"cgroup vnet/demo/vm1", "--store-gone " + goneID}},
	}
	for _, tc := range tests {
		o := testOwnership()
		o.goneStores, o.unmarked = setOf(tc.gone), setOf(tc.unmarked)
		got, why := o.judgeGarbage(tc.kind, tc.object, tc.infra, tc.mark, tc.marked)
		if got != tc.want {
			t.Errorf("%s: verdict %d (%s), want %d", tc.name, got, why, tc.want)
		}
		for _, s := range tc.says {
			if !strings.Contains(why, s) {
				t.Errorf("%s: %q does not say %q", tc.name, why, s)
			}
		}
		if (got == refuse || got == moved) && !strings.Contains(why, tc.object) {
			t.Errorf("%s: %q does not name %s", tc.name, why, tc.object)
		}
	}
}

// Every case of what recover --adopt may take: an unmarked namespace only
// when no live store holds the infrastructure, a gone store's objects
// only when the user says it is gone, a live store's never.
func TestAdoptJudgesOwnership(t *testing.T) {
	live := []store.Whereabouts{{ID: liveID, Dir: liveDir}}
	tests := []struct {
		name   string
		mark   plan.Mark
		marked bool
		others []store.Whereabouts
		gone   []string
		want   verdict
		says   []string
	}{
		{"unmarked, nobody holds the infrastructure", plan.Mark{}, false, nil, nil, take, nil},
		{"unmarked, another live store holds the infrastructure", plan.Mark{}, false, live, nil, refuse,
			[]string{liveDir, liveID, "`vnet --state-dir " + liveDir + " recover --adopt demo`"}},
		{"this store's already", mark("demo", selfID, "/var/lib/vnet"), true, nil, nil, keep, nil},
		{"this store's for another infrastructure", mark("other", selfID, "/var/lib/vnet"), true, nil, nil, refuse, []string{"for infrastructure other"}},
		{"a live store's", mark("demo", liveID, liveDir), true, nil, []string{liveID}, refuse, []string{"alive", "--state-dir " + liveDir}},
		{"a moved store's", mark("demo", movedID, movedOld), true, nil, nil, refuse, []string{movedNew}},
		{"a store not found", mark("demo", goneID, goneDir), true, nil, nil, refuse,
			[]string{"not there", "`vnet recover --adopt demo --store-gone " + goneID + "`"}},
		{"a store gone for good", mark("demo", goneID, goneDir), true, nil, []string{goneID}, take, nil},
	}
	for _, tc := range tests {
		o := testOwnership()
		o.goneStores = setOf(tc.gone)
		got, why := o.judgeAdopt(plan.KindNetns, "vnet.demo.x", "demo", tc.mark, tc.marked, tc.others)
		if got != tc.want {
			t.Errorf("%s: verdict %d (%s), want %d", tc.name, got, why, tc.want)
		}
		for _, s := range tc.says {
			if !strings.Contains(why, s) {
				t.Errorf("%s: %q does not say %q", tc.name, why, s)
			}
		}
	}
}
