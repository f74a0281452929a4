package service

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"

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
	// Adopt names infrastructures whose namespaces without a mark, or
	// whose store is gone, are marked as this store's.
	Adopt []string
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

// Adopted is how many namespaces of an infrastructure recover marked.
type Adopted struct {
	Infra string
	N     int
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
		n, err := adoptNamespaces(dp, st, infra, found)
		if err != nil {
			return rep, err
		}
		rep.Adopted = append(rep.Adopted, Adopted{Infra: infra, N: n})
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

// adoptNamespaces marks an infrastructure's adoptable namespaces as this
// store's, so that destroy removes them and apply takes them over.
func adoptNamespaces(dp *dataplane.Linux, st *store.Bolt, infra string, found []dataplane.NamedNS) (int, error) {
	unlock, err := st.Lock(infra)
	if err != nil {
		return 0, fmt.Errorf("adopt %s: %w", infra, err)
	}
	defer unlock()
	mark := plan.Mark{Infra: infra, Store: st.ID(), Dir: st.Location()}.String()
	n := 0
	for _, ns := range found {
		if i, _, ok := plan.SplitNSName(ns.Name); !ok || i != infra || !adoptable(ns.Mark) {
			continue
		}
		if err := dp.SetMark(ns.Name, mark); err != nil {
			return n, fmt.Errorf("adopt %s: %w", infra, err)
		}
		n++
	}
	return n, nil
}

// adoptable reports whether a namespace may be taken over: it has no mark,
// or the store its mark names is gone from its directory.
func adoptable(mark string) bool {
	m, ok := plan.ParseMark(mark)
	if !ok {
		return mark == ""
	}
	return m.Dir != "" && store.IDAt(m.Dir) != m.Store
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
	switch {
	case marked && m.Store == storeID && m.Infra == infra && rec != nil:
		return "recorded", false
	case marked && m.Store == storeID && m.Infra == infra:
		return fmt.Sprintf("made by this store, not recorded: `vnet destroy %s` removes them, `vnet apply FILE` takes them back", infra), false
	case marked && adoptable(mark):
		return fmt.Sprintf("made by a store that is gone from %s: `vnet recover --adopt %s` takes them", m.Dir, infra), false
	case marked && m.Dir != "":
		return fmt.Sprintf("made by the store at %s (ID %s): left to it", m.Dir, m.Store), false
	case marked:
		return fmt.Sprintf("made by store %s: left to it", m.Store), false
	case rec != nil && rec.Lists(name):
		return "without a mark (an older vnet), recorded: the next apply marks them", false
	}
	return fmt.Sprintf("without a mark, not recorded: `vnet recover --adopt %s` takes them if an older vnet made them; otherwise they are not vnet's", infra), true
}
