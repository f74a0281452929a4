package service

import (
	"fmt"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
)

// Whose is a namespace or cgroup that gc or recover --adopt meets? Its
// mark names the store that made it by ID (plan.Mark), and the directory
// that store was in. The ID is what counts: a directory can move (the
// store's registry finds it again, store.Find), and a name can be made
// by hand. So gc removes, and adopt takes, only what is certainly no live
// store's, and refuses the rest, saying why and which command would
// take the risk knowingly.

// verdict is what gc or adopt does with an object.
type verdict int

const (
	keep   verdict = iota // another live store's, or this one's to destroy: nothing to say
	take                  // certainly nobody's: gc removes it, adopt marks it
	refuse                // its maker is not certain: left, with the reason and the forcing command
	moved                 // its store moved: left to it, and said so
)

// ownership is what gc and adopt know when they judge an object.
type ownership struct {
	self string // this store's ID
	// recorded reports whether this store has a record of the
	// infrastructure; ownNS whether a namespace of it carries this
	// store's mark.
	recorded, ownNS func(infra string) bool
	// nsMark is the mark of a VM's namespace, and of the first namespace
	// of an infrastructure for its level vnet/<infra>: whose a cgroup
	// without a mark is, when a vnet older than cgroup marks made it.
	nsMark func(cgroup string) (plan.Mark, bool)
	find   func(id, dir string) store.Whereabouts
	// goneStores are the IDs of stores the user says are gone for good
	// (--store-gone); unmarked the infrastructures whose cgroups without
	// a mark the user says vnet made (--unmarked).
	goneStores, unmarked map[string]bool
}

// judgeGarbage says what gc does with an object it found, a namespace
// marked by another store or a cgroup of an infrastructure this store
// does not record, and why.
func (o ownership) judgeGarbage(kind plan.Kind, name, pathInfra string, m plan.Mark, marked bool) (verdict, string) {
	what := "namespace " + name
	if kind == plan.KindCgroup {
		what = "cgroup " + name
	}
	switch {
	case !marked || m.Infra != pathInfra:
		if kind == plan.KindCgroup && o.unmarked[pathInfra] {
			return take, ""
		}
		if kind != plan.KindCgroup {
			return keep, "" // an unmarked namespace is nobody's to gc
		}
		if vm, ok := o.vmOwner(name); !marked && ok {
			return keep, "" // its VM's, made before cgroup marks: the next apply of that VM's store marks it
		} else if !marked && vm.Store != "" {
			why := "it carries no vnet mark, and its VM's namespace was made by store " + vm.Store + ", which is not found"
			return refuse, fmt.Sprintf("left %s: %s: `vnet gc --unmarked %s` removes it, killing what runs in it", what, why, pathInfra)
		}
		why := "it carries no vnet mark"
		if marked {
			why = "its mark names infrastructure " + m.Infra + ", not " + pathInfra
		}
		return refuse, fmt.Sprintf("left %s: %s, so vnet cannot tell it made it (by hand, or a vnet older than marks did): "+
			"if vnet made it, `vnet gc --unmarked %s` removes it, killing what runs in it", what, why, pathInfra)
	case m.Store == o.self:
		if kind == plan.KindCgroup && !o.recorded(pathInfra) && !o.ownNS(pathInfra) {
			return take, ""
		}
		return keep, "" // destroy's to remove
	}
	w := o.find(m.Store, m.Dir)
	switch {
	case w.Moved():
		return moved, fmt.Sprintf("left %s: made by the store now at %s (ID %s), moved from %s: left to it", what, w.Dir, m.Store, m.Dir)
	case w.Found():
		return keep, ""
	case o.goneStores[m.Store]:
		return take, ""
	}
	return refuse, fmt.Sprintf("left %s: %s: if it is gone for good, `vnet gc --store-gone %s` removes what it made, killing what runs there",
		what, notFound(m, w), m.Store)
}

// vmOwner is the mark of the namespace a cgroup without a mark goes with
// (its VM's, or for vnet/<infra> one of the infrastructure's), and whether
// that store is alive: this one or one found.
func (o ownership) vmOwner(cgroup string) (plan.Mark, bool) {
	if o.nsMark == nil {
		return plan.Mark{}, false
	}
	m, ok := o.nsMark(cgroup)
	if !ok {
		return plan.Mark{}, false
	}
	return m, m.Store == o.self || o.find(m.Store, m.Dir).Found()
}

// notFound says that the store a mark names is nowhere to be found, and
// what may have become of it.
func notFound(m plan.Mark, w store.Whereabouts) string {
	where := "its mark names store " + m.Store
	if m.Dir != "" {
		where += " at " + m.Dir
	}
	seen := ""
	if w.Last != "" && w.Last != m.Dir {
		seen = " (last opened at " + w.Last + ")"
	}
	return where + ", which is not there" + seen + ", and no store on this host has that ID: " +
		"its directory may have moved and not been opened since (any vnet command run with --state-dir at its new place finds it again), or been deleted"
}

// judgeAdopt says whether recover --adopt may mark a namespace (or a
// cgroup) of the infrastructure as this store's. others are the live
// stores, other than this one, that hold the infrastructure: their records
// name it, or their marks are on its objects here.
func (o ownership) judgeAdopt(kind plan.Kind, name, infra string, m plan.Mark, marked bool, others []store.Whereabouts) (verdict, string) {
	what := "namespace " + name
	if kind == plan.KindCgroup {
		what = "cgroup " + name
	}
	switch {
	case marked && m.Store == o.self && m.Infra == infra:
		return keep, ""
	case marked && m.Store == o.self:
		return refuse, fmt.Sprintf("%s is marked by this store for infrastructure %s", what, m.Infra)
	case !marked:
		if len(others) > 0 {
			return refuse, fmt.Sprintf("%s has no mark, and the store at %s (ID %s) holds infrastructure %s: it may be that store's, which is alive; "+
				"`vnet --state-dir %s recover --adopt %s` makes it that store's, or remove it if vnet did not make it",
				what, others[0].Dir, others[0].ID, infra, others[0].Dir, infra)
		}
		return take, ""
	}
	w := o.find(m.Store, m.Dir)
	switch {
	case w.Found():
		return refuse, fmt.Sprintf("%s was made by the store at %s (ID %s), which is alive: run vnet with --state-dir %s to change or destroy it", what, w.Dir, m.Store, w.Dir)
	case o.goneStores[m.Store]:
		return take, ""
	}
	return refuse, fmt.Sprintf("%s: %s: if it is gone for good, `vnet recover --adopt %s --store-gone %s` takes what it made", what, notFound(m, w), infra, m.Store)
}
