package service

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
)

// Recovered says what recovering the store did.
type Recovered = store.Recovered

// RecoverOptions say how recover goes.
type RecoverOptions struct {
	// Rebuild starts an empty store (keeping the ID) even if the file or
	// its good copy is fine.
	Rebuild bool
	// Adopt names infrastructures whose namespaces and cgroups without a
	// mark, or whose store is gone (StoreGone), are marked as this
	// store's.
	Adopt []string
	// StoreGone are the IDs of stores the user says are gone for good:
	// what they marked may be adopted though they cannot be found.
	StoreGone []string
}

// RecoverReport is what recover did and found on the host.
type RecoverReport struct {
	// Dir is the state directory, absolute.
	Dir   string
	Store *Recovered
	// NotRoot says the host's namespaces were not read.
	NotRoot bool
	// Adopted counts the namespaces marked, by infrastructure, in the
	// order asked.
	Adopted []Adopted
	// Host groups the vnet-looking namespaces on the host by
	// infrastructure and by who made them, with what to do about each
	// group; infrastructures recorded with nothing on the host are groups
	// without namespaces.
	Host []HostGroup
}

// Adopted is how many namespaces and cgroups of an infrastructure recover
// marked.
type Adopted struct {
	Infra   string
	N       int // namespaces
	Cgroups int
}

// HostGroup is an infrastructure's namespaces made alike.
type HostGroup struct {
	Infra, How string
	Namespaces []string
	// Strangers are namespaces without a mark or a record: perhaps not
	// vnet's at all, so they are named one by one.
	Strangers bool
}

// Recover checks the state store. A damaged one is moved aside (never
// deleted) and replaced by the copy kept at its last good write, or
// without one (or with Rebuild) by an empty store with the same ID, which
// the namespaces the old store made carry, so that destroy and apply still
// know them as this store's. It then marks the namespaces of the
// infrastructures to adopt, and groups every vnet-looking namespace on
// the host by who made it.
func (l *Local) Recover(o RecoverOptions) (*RecoverReport, error) {
	dir, err := filepath.Abs(l.StateDir)
	if err != nil {
		return nil, err
	}
	rep := &RecoverReport{Dir: dir}
	dp, err := dataplane.New()
	if err != nil && !errors.Is(err, dataplane.ErrNotRoot) {
		return nil, err
	}
	var found []dataplane.NamedNS
	if dp != nil {
		defer dp.Close()
		if found, err = dp.VnetNamespaces(); err != nil {
			return nil, err
		}
	}
	if rep.Store, err = store.Recover(dir, store.RecoverOptions{Rebuild: o.Rebuild, ID: idFromMarks(found, dir)}); err != nil {
		return nil, err
	}
	st, err := store.OpenBolt(dir)
	if err != nil {
		return rep, err
	}
	defer st.Close()
	if dp == nil {
		if len(o.Adopt) > 0 {
			return rep, dataplane.ErrNotRoot
		}
		rep.NotRoot = true
		return rep, nil
	}
	for _, infra := range o.Adopt {
		a, err := adopt(dp, st, infra, found, setOf(o.StoreGone))
		if err != nil {
			return rep, err
		}
		rep.Adopted = append(rep.Adopted, a)
	}
	if len(o.Adopt) > 0 {
		if found, err = dp.VnetNamespaces(); err != nil {
			return rep, err
		}
	}
	rep.Host, err = hostGroups(st, found)
	return rep, err
}

// idFromMarks is the store ID that namespaces on the host say belongs to
// the store in dir, if they agree on one: what an empty store takes when
// store.id is lost too.
func idFromMarks(found []dataplane.NamedNS, dir string) string {
	ids := map[string]bool{}
	for _, ns := range found {
		if m, ok := plan.ParseMark(ns.Mark); ok && m.Dir == dir {
			ids[m.Store] = true
		}
	}
	if len(ids) != 1 {
		return ""
	}
	for id := range ids {
		return id
	}
	return ""
}

// adopt marks an infrastructure's namespaces and cgroups that no live
// store made as this store's, so that destroy removes them and apply takes
// them over: those without a mark, unless another live store holds the
// infrastructure, and those marked by a store the user says is gone
// (goneStores). It adopts all of them or, when it is not certain of one,
// none, and says why of each (ErrNotCertain).
func adopt(dp *dataplane.Linux, st *store.Bolt, infra string, found []dataplane.NamedNS, goneStores map[string]bool) (Adopted, error) {
	a := Adopted{Infra: infra}
	unlock, err := st.Lock(infra)
	if err != nil {
		return a, fmt.Errorf("adopt %s: %w", infra, err)
	}
	defer unlock()
	type object struct {
		kind       plan.Kind
		name, mark string
	}
	var objects []object
	for _, ns := range found {
		if i, _, ok := plan.SplitNSName(ns.Name); ok && i == infra {
			objects = append(objects, object{plan.KindNetns, ns.Name, ns.Mark})
		}
	}
	for _, c := range dp.InfraCgroups(infra) {
		objects = append(objects, object{plan.KindCgroup, c.Name, c.Mark})
	}
	others := liveHolders(st.ID(), infra, found, dp.InfraCgroups(infra))
	own := ownership{self: st.ID(), find: store.Find, goneStores: goneStores}
	var take []object
	var refused []string
	for _, obj := range objects {
		m, marked := plan.ParseMark(obj.mark)
		switch v, why := own.judgeAdopt(obj.kind, obj.name, infra, m, marked, others); v {
		case refuse:
			refused = append(refused, why)
		case keep:
		default:
			take = append(take, obj)
		}
	}
	if len(refused) > 0 {
		return a, fmt.Errorf("adopt %s: adopted nothing:\n  %s\n%w", infra, strings.Join(refused, "\n  "), ErrNotCertain)
	}
	mark := plan.Mark{Infra: infra, Store: st.ID(), Dir: st.Location()}.String()
	for _, obj := range take {
		if obj.kind == plan.KindCgroup {
			if err := dp.MarkCgroup(obj.name, mark); err != nil {
				return a, fmt.Errorf("adopt %s: %w", infra, err)
			}
			a.Cgroups++
			continue
		}
		if err := dp.SetMark(obj.name, mark); err != nil {
			return a, fmt.Errorf("adopt %s: %w", infra, err)
		}
		a.N++
	}
	return a, nil
}

// liveHolders are the stores other than self that hold an infrastructure
// and can be found: those whose marks are on its namespaces or cgroups
// here, and those the store registry knows of that record it.
func liveHolders(self, infra string, found []dataplane.NamedNS, cgroups []dataplane.NamedCgroup) []store.Whereabouts {
	var out []store.Whereabouts
	seen := map[string]bool{self: true}
	consider := func(id, dir string, holds func(w store.Whereabouts) bool) {
		if seen[id] {
			return
		}
		if w := store.Find(id, dir); w.Found() && holds(w) {
			seen[id] = true
			out = append(out, w)
		}
	}
	always := func(store.Whereabouts) bool { return true }
	for _, ns := range found {
		if m, ok := plan.ParseMark(ns.Mark); ok && m.Infra == infra {
			consider(m.Store, m.Dir, always)
		}
	}
	for _, c := range cgroups {
		if m, ok := plan.ParseMark(c.Mark); ok && m.Infra == infra {
			consider(m.Store, m.Dir, always)
		}
	}
	registered, _ := store.Registered()
	ids := make([]string, 0, len(registered))
	for id := range registered {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		consider(id, registered[id], func(w store.Whereabouts) bool {
			// A store whose records cannot be read now (another vnet
			// holds it, or it is damaged) may hold the name: not certain.
			names, err := store.Names(id, w.Dir)
			return err != nil || slices.Contains(names, infra)
		})
	}
	return out
}

// hostGroups sorts the vnet-looking namespaces on the host by
// infrastructure and by who made them.
func hostGroups(st store.Store, found []dataplane.NamedNS) ([]HostGroup, error) {
	recs, err := st.List()
	if err != nil {
		return nil, err
	}
	recorded := map[string]*store.Record{}
	for _, r := range recs {
		recorded[r.Name] = r
	}
	type key struct{ infra, how string }
	groups := map[key]*HostGroup{}
	for _, ns := range found {
		infra, _, ok := plan.SplitNSName(ns.Name)
		if !ok {
			infra = "?"
		}
		how, stranger := madeBy(st.ID(), infra, ns.Name, ns.Mark, recorded[infra])
		k := key{infra, how}
		if groups[k] == nil {
			groups[k] = &HostGroup{Infra: infra, How: how, Strangers: stranger}
		}
		groups[k].Namespaces = append(groups[k].Namespaces, ns.Name)
	}
	onHost := map[string]bool{}
	for k := range groups {
		onHost[k.infra] = true
	}
	for _, r := range recs {
		if !onHost[r.Name] {
			how := "recorded, nothing of it on this host: `vnet apply` makes it again, `vnet destroy` forgets it"
			groups[key{r.Name, how}] = &HostGroup{Infra: r.Name, How: how}
		}
	}
	out := make([]HostGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Infra != out[j].Infra {
			return out[i].Infra < out[j].Infra
		}
		return out[i].How < out[j].How
	})
	return out, nil
}

// madeBy says who made a namespace and what to do about it; stranger when
// nothing says vnet made it.
func madeBy(storeID, infra, name, mark string, rec *store.Record) (how string, stranger bool) {
	m, marked := plan.ParseMark(mark)
	if marked && m.Store != storeID {
		w := store.Find(m.Store, m.Dir)
		switch {
		case w.Moved():
			return fmt.Sprintf("made by the store now at %s (ID %s), moved from %s: left to it", w.Dir, m.Store, m.Dir), false
		case w.Found():
			return fmt.Sprintf("made by the store at %s (ID %s): left to it", w.Dir, m.Store), false
		}
		return fmt.Sprintf("made by store %s, which is not found (it was at %s): if it is gone for good, `vnet recover --adopt %s --store-gone %s` takes them",
			m.Store, orUnknown(m.Dir), infra, m.Store), false
	}
	switch {
	case marked && m.Infra == infra && rec != nil:
		return "recorded", false
	case marked && m.Infra == infra:
		return fmt.Sprintf("made by this store, not recorded: `vnet destroy %s` removes them, `vnet apply FILE` takes them back", infra), false
	case marked:
		return fmt.Sprintf("made by this store for %s", m.Infra), false
	case rec != nil && rec.Lists(name):
		return "without a mark (an older vnet), recorded: the next apply marks them", false
	}
	return fmt.Sprintf("without a mark, not recorded: `vnet recover --adopt %s` takes them if an older vnet made them; otherwise they are not vnet's", infra), true
}

func orUnknown(dir string) string {
	if dir == "" {
		return "a directory its mark does not name"
	}
	return dir
}
