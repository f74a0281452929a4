package reconcile

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
)

// ErrNotOwned is wrapped by errors about namespaces of an infrastructure's
// name that this store did not make.
var ErrNotOwned = errors.New("not made by this state store")

// Ownership: a namespace or a VM's cgroup belongs to this store when its
// mark (plan.Mark) names this store and the infrastructure. One without a
// mark (made by a vnet older than marks) belongs to it only when the
// store's record of the infrastructure lists it, and is marked by the next
// apply; a cgroup without one also when its VM's namespace is this store's
// (an apply killed between making it and marking it). Anything else that
// merely has a vnet-like name is left alone.

// stranger is a namespace or cgroup with the infrastructure's name that
// this store must leave alone.
type stranger struct {
	kind   plan.Kind // KindNetns or KindCgroup
	name   string
	mark   plan.Mark
	marked bool
}

// what names the object as the messages do.
func (s stranger) what() string {
	if s.kind == plan.KindCgroup {
		return "cgroup " + s.name
	}
	return s.name
}

func (s stranger) String() string {
	if !s.marked {
		return s.what() + ": not made by this store"
	}
	where := "store " + s.mark.Store
	if w := s.whereabouts(); w.Found() {
		where = fmt.Sprintf("the store at %s (ID %s)", w.Dir, s.mark.Store)
	} else if s.mark.Dir != "" {
		where = fmt.Sprintf("the store at %s (ID %s)", s.mark.Dir, s.mark.Store)
	}
	if s.mark.Infra != "" && !strings.HasPrefix(s.name, plan.InfraNSPrefix(s.mark.Infra)) && !strings.HasPrefix(s.name, plan.CgroupName(s.mark.Infra, "")) {
		return fmt.Sprintf("%s: made by %s for %s", s.what(), where, s.mark.Infra)
	}
	return fmt.Sprintf("%s: made by %s", s.what(), where)
}

// whereabouts is where the store that marked it is now.
func (s stranger) whereabouts() store.Whereabouts { return store.Find(s.mark.Store, s.mark.Dir) }

// whatToDo says how to reach the store that made an object, or, when
// that store is not found, what may have become of it and the command
// that takes its objects over.
func (s stranger) whatToDo(infra string) string {
	w := s.whereabouts()
	switch {
	case w.Moved():
		return "that store is at " + w.Dir + " now: run vnet with --state-dir " + w.Dir + " to change or destroy it there"
	case w.Found():
		return "run vnet with --state-dir " + w.Dir + " to change or destroy it there"
	case s.mark.Dir == "":
		return "change or destroy it with the vnet store that made it"
	}
	return fmt.Sprintf("that store is not in %s, and no store on this host has its ID: if its directory moved, any vnet command run with --state-dir at the new place finds it again; "+
		"if it is gone for good, `vnet recover --adopt %s --store-gone %s` makes its objects this store's", s.mark.Dir, infra, s.mark.Store)
}

// claim splits what Observe found of an infrastructure into what this store
// may touch and the objects it must leave alone. adopt names unmarked
// namespaces to take as this store's beyond those its record lists: those
// an apply was making when it failed, before their mark was set.
func (e *Engine) claim(infra string, observed []plan.Resource, adopt map[string]bool) (mine []plan.Resource, strangers []stranger) {
	rec, _ := e.Store.Get(infra)
	return claimWith(e.listedIn(infra, rec), e.Store.ID(), infra, observed, adopt)
}

// listedIn says whether the record of infra (nil when there is none) lists
// a resource, by key, among what was realized. A record read without that
// (a store.HeadReader's) is read whole the first time it is asked: only
// an object without a mark asks.
func (e *Engine) listedIn(infra string, rec *store.Record) func(key string) bool {
	if rec == nil {
		return func(string) bool { return false }
	}
	if rec.Realized != nil {
		return realizedKeys(rec)
	}
	var listed func(string) bool
	read := sync.OnceFunc(func() {
		listed = func(string) bool { return false }
		if whole, _ := e.Store.Get(infra); whole != nil {
			listed = realizedKeys(whole)
		}
	})
	return func(key string) bool {
		read()
		return listed(key)
	}
}

// realizedKeys says whether the record lists a resource, by key.
func realizedKeys(rec *store.Record) func(key string) bool {
	var keys map[string]bool
	return func(key string) bool {
		if keys == nil {
			keys = map[string]bool{}
			for _, r := range rec.Realized {
				if plan.Markable(r.Kind) {
					keys[r.Key()] = true
				}
			}
		}
		return keys[key]
	}
}

// claimWith is claim with what the store's record of the infrastructure
// lists (see listedIn) and the store's ID.
func claimWith(listed func(key string) bool, storeID, infra string, observed []plan.Resource, adopt map[string]bool) (mine []plan.Resource, strangers []stranger) {
	foreign, own := map[string]bool{}, map[string]bool{}
	ours := func(r plan.Resource) (bool, stranger) {
		m, marked := plan.ParseMark(r.Mark)
		switch {
		case marked && m.Store == storeID && m.Infra == infra:
		case !marked && listed(r.Key()):
		case !marked && r.Kind == plan.KindNetns && adopt[r.Name]:
		case !marked && r.Kind == plan.KindCgroup && own[r.Namespace()]:
		default:
			return false, stranger{kind: r.Kind, name: r.Name, mark: m, marked: marked}
		}
		return true, stranger{}
	}
	for _, r := range observed {
		if r.Kind != plan.KindNetns {
			continue
		}
		if ok, s := ours(r); ok {
			own[r.Name] = true
		} else {
			foreign[r.Name] = true
			strangers = append(strangers, s)
		}
	}
	for _, r := range observed {
		if foreign[r.Namespace()] || r.Kind == plan.KindVeth && foreign[r.B.NS] {
			continue
		}
		if r.Kind == plan.KindCgroup {
			if ok, s := ours(r); !ok {
				strangers = append(strangers, s)
				continue
			}
		}
		mine = append(mine, r)
	}
	return mine, strangers
}

// refuseStrangers fails an apply that would meet objects this store did
// not make: any marked by another store (the infrastructure's name is
// taken there), and unmarked ones of names the spec needs.
func refuseStrangers(infra string, strangers []stranger, desired []plan.Resource) error {
	if len(strangers) == 0 {
		return nil
	}
	wanted := map[string]bool{}
	for i := range desired {
		if r := &desired[i]; plan.Markable(r.Kind) {
			wanted[r.Key()] = true
		}
	}
	var errs []error
	for _, s := range strangers {
		switch {
		case s.marked:
			errs = append(errs, fmt.Errorf("%s: %s: %w", s, s.whatToDo(infra), ErrNotOwned))
		case wanted[plan.Resource{Kind: s.kind, Name: s.name}.Key()] && s.kind == plan.KindCgroup:
			errs = append(errs, fmt.Errorf("cgroup %s exists but has no mark and this store has no record of it: if vnet made it, `vnet recover --adopt %s` makes it this store's; otherwise remove it (rmdir it in each hierarchy once nothing runs in it) or rename the VM: %w",
				s.name, infra, ErrNotOwned))
		case wanted[plan.Resource{Kind: s.kind, Name: s.name}.Key()]:
			errs = append(errs, fmt.Errorf("namespace %s exists but has no mark and this store has no record of it: if vnet made it, `vnet recover --adopt %s` makes it this store's; otherwise remove it (ip netns del %s) or rename the node: %w",
				s.name, infra, s.name, ErrNotOwned))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %w", infra, errors.Join(errs...))
	}
	return nil
}

// markOwn marks the desired namespaces and cgroups as this store's.
func (e *Engine) markOwn(infra string, desired []plan.Resource) []plan.Resource {
	return plan.MarkOwned(desired, infra, e.Store.ID(), e.Store.Location())
}
