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

// Ownership: a namespace belongs to this store when its mark (plan.Mark)
// names this store and the infrastructure. A namespace without a mark (made
// by a vnet older than marks) belongs to it only when the store's record of
// the infrastructure lists it, and is marked by the next apply. Anything
// else that merely has a vnet-like name is left alone.

// stranger is a namespace with the infrastructure's prefix that this store
// must leave alone.
type stranger struct {
	ns     string
	mark   plan.Mark
	marked bool
}

func (s stranger) String() string {
	if !s.marked {
		return s.ns + ": not made by this store"
	}
	where := "store " + s.mark.Store
	if s.mark.Dir != "" {
		where = fmt.Sprintf("the store at %s (ID %s)", s.mark.Dir, s.mark.Store)
	}
	if s.mark.Infra != "" && !strings.HasPrefix(s.ns, plan.InfraNSPrefix(s.mark.Infra)) {
		return fmt.Sprintf("%s: made by %s for %s", s.ns, where, s.mark.Infra)
	}
	return fmt.Sprintf("%s: made by %s", s.ns, where)
}

// orphan reports whether the store that marked the namespace is gone.
func (s stranger) orphan() bool {
	return s.marked && s.mark.Dir != "" && store.IDAt(s.mark.Dir) != s.mark.Store
}

// whatToDo says how to reach the store that made a namespace, or how to
// take the namespace over when that store is gone.
func (s stranger) whatToDo(infra string) string {
	switch {
	case s.orphan():
		return fmt.Sprintf("that store is gone: `vnet recover --adopt %s` makes its namespaces this store's", infra)
	case s.mark.Dir == "":
		return "change or destroy it with the vnet store that made it"
	}
	return "run vnet with --state-dir " + s.mark.Dir + " to change or destroy it there"
}

// claim splits what Observe found of an infrastructure into what this store
// may touch and the namespaces it must leave alone. adopt names unmarked
// namespaces to take as this store's beyond those its record lists: those
// an apply was making when it failed, before their mark was set.
func (e *Engine) claim(infra string, observed []plan.Resource, adopt map[string]bool) (mine []plan.Resource, strangers []stranger) {
	rec, _ := e.Store.Get(infra)
	return claimWith(e.listedIn(infra, rec), e.Store.ID(), infra, observed, adopt)
}

// listedIn says whether the record of infra (nil when there is none) lists
// a namespace among what was realized. A record read without that (a
// store.HeadReader's) is read whole the first time it is asked: only a
// namespace without a mark asks.
func (e *Engine) listedIn(infra string, rec *store.Record) func(ns string) bool {
	if rec == nil {
		return func(string) bool { return false }
	}
	if rec.Realized != nil {
		return rec.Lists
	}
	var whole *store.Record
	read := sync.OnceFunc(func() { whole, _ = e.Store.Get(infra) })
	return func(ns string) bool {
		read()
		return whole != nil && whole.Lists(ns)
	}
}

// claimWith is claim with what the store's record of the infrastructure
// lists (see listedIn) and the store's ID.
func claimWith(listed func(ns string) bool, storeID, infra string, observed []plan.Resource, adopt map[string]bool) (mine []plan.Resource, strangers []stranger) {
	foreign := map[string]bool{}
	for _, r := range observed {
		if r.Kind != plan.KindNetns {
			continue
		}
		m, marked := plan.ParseMark(r.Mark)
		switch {
		case marked && m.Store == storeID && m.Infra == infra:
		case !marked && (adopt[r.Name] || listed(r.Name)):
		default:
			foreign[r.Name] = true
			strangers = append(strangers, stranger{ns: r.Name, mark: m, marked: marked})
		}
	}
	for _, r := range observed {
		if foreign[r.Namespace()] || r.Kind == plan.KindVeth && foreign[r.B.NS] {
			continue
		}
		mine = append(mine, r)
	}
	return mine, strangers
}

// refuseStrangers fails an apply that would meet namespaces this store did
// not make: any marked by another store (the infrastructure's name is
// taken there), and unmarked ones of names the spec needs.
func refuseStrangers(infra string, strangers []stranger, desired []plan.Resource) error {
	if len(strangers) == 0 {
		return nil
	}
	wanted := map[string]bool{}
	for i := range desired {
		if r := &desired[i]; r.Kind == plan.KindNetns {
			wanted[r.Name] = true
		}
	}
	var errs []error
	for _, s := range strangers {
		switch {
		case s.marked:
			errs = append(errs, fmt.Errorf("%s: %s: %w", s, s.whatToDo(infra), ErrNotOwned))
		case wanted[s.ns]:
			errs = append(errs, fmt.Errorf("namespace %s exists but has no mark and this store has no record of it: if vnet made it, `vnet recover --adopt %s` makes it this store's; otherwise remove it (ip netns del %s) or rename the node: %w",
				s.ns, infra, s.ns, ErrNotOwned))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %w", infra, errors.Join(errs...))
	}
	return nil
}

// markOwn marks the desired namespaces as this store's.
func (e *Engine) markOwn(infra string, desired []plan.Resource) []plan.Resource {
	return plan.MarkNamespaces(desired, infra, e.Store.ID(), e.Store.Location())
}
