package service

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/killpoint"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/teamagent"
)

// GCOptions say how gc goes.
type GCOptions struct {
	// DryRun lists what would be removed and changes nothing.
	DryRun bool
	// StoreGone are the IDs of stores the user says are gone for good:
	// what they marked is removed though they cannot be found.
	StoreGone []string
	// Unmarked are infrastructures whose cgroups without a mark the user
	// says vnet made (a vnet older than cgroup marks): they are removed.
	Unmarked []string
	// Log receives a line per thing removed (or, dry, to remove), per
	// thing left to an apply that began meanwhile, and per thing left
	// because who made it is not certain, with the reason.
	Log io.Writer
}

// GC removes what no apply or destroy will: probe namespaces of processes
// that are gone, unfinished namespace entries, cgroups this store made of
// infrastructures with neither a record nor a namespace, and agents of
// this state directory whose infrastructure is not in the store, records
// of devices that are gone (a guest's TAP its hypervisor deleted); and, when
// told the store that made them is gone for good (StoreGone), that store's
// namespaces and cgroups. Whatever another store made is left to it,
// found by its ID wherever its directory is now (store.Find); what a store
// that cannot be found made, or a cgroup without a mark, is left and said
// with the reason and the option that would remove it, and GC then fails
// with ErrNotCertain. Infrastructures in the store are left alone: their
// next apply or destroy repairs them. It takes an infrastructure's lock
// before it removes what that infrastructure left, and leaves it if an
// apply put the infrastructure in the store meanwhile. It reports whether
// it found anything.
func (l *Local) GC(o GCOptions) (found bool, err error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	dp, err := dataplane.New()
	if err != nil {
		return false, err
	}
	defer dp.Close()
	dp.DeviceStateDir = l.deviceStateDir()
	st, err := l.openStore()
	if err != nil {
		return false, err
	}
	defer st.Close()
	recs, err := st.List()
	if err != nil {
		return false, err
	}
	known := map[string]bool{}
	for _, r := range recs {
		known[r.Name] = true
	}
	isKnown := func(infra string) bool { return known[infra] }
	garbage, err := dp.Garbage(dataplane.GarbageOpts{Store: st.ID(), Known: isKnown})
	if err != nil {
		return false, err
	}
	namespaces, err := dp.VnetNamespaces()
	if err != nil {
		return false, err
	}
	own := ownership{self: st.ID(), recorded: isKnown, ownNS: markedBy(namespaces, st.ID()), nsMark: namespaceOf(namespaces), find: store.Find,
		goneStores: setOf(o.StoreGone), unmarked: setOf(o.Unmarked)}
	orphans := teamagent.Orphans(l.StateDir, isKnown)
	killpoint.At("gc: leftovers listed, none locked yet")
	verb, leave := "removed", ""
	if o.DryRun {
		verb, leave = "would remove", "would be "
	}
	var errs []error
	// Each infrastructure's leftovers go under its lock, and what was
	// found because the infrastructure is not in the store only if it
	// still is not: an apply may have begun meanwhile.
	locks := infraLocks{st: st}
	defer locks.release()
	for _, a := range orphans {
		if !o.DryRun {
			if err := locks.take(a.Infra, true); err != nil {
				errs = noteSkip(o.Log, errs, err)
				continue
			}
			if err := teamagent.Stop(l.StateDir, a.Infra); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		fmt.Fprintf(o.Log, "%s agent of %s (pid %d): the infrastructure is not in the store\n", verb, a.Infra, a.PID)
	}
	uncertain, removed := 0, 0
	for _, g := range garbage {
		if g.Kind != "" {
			v, why := own.judgeGarbage(g.Kind, g.Name, g.PathInfra, g.Mark, g.Marked)
			switch v {
			case keep:
				continue
			case moved:
				fmt.Fprintln(o.Log, why)
				continue
			case refuse:
				uncertain++
				fmt.Fprintln(o.Log, leave+why)
				continue
			}
			if g.Marked && g.Mark.Store != own.self {
				g.Infra, g.Unowned = "", false // another store's: its lock is not this store's to take
			}
		}
		if !o.DryRun {
			if err := locks.take(g.Infra, g.Unowned); err != nil {
				errs = noteSkip(o.Log, errs, err)
				continue
			}
			if err := g.Remove(); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		removed++
		fmt.Fprintf(o.Log, "%s %s\n", verb, g)
	}
	if !o.DryRun {
		forgetGoneStores(namespaces, garbage)
	}
	records, err := dp.DropStaleDeviceRecords(func(string) bool { return true }, o.DryRun)
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range records {
		fmt.Fprintf(o.Log, "%s %s\n", verb, r)
	}
	removed += len(records)
	found = len(orphans)+removed+uncertain > 0
	if uncertain > 0 {
		errs = append(errs, fmt.Errorf("left %d whose maker is not certain (above): %w", uncertain, ErrNotCertain))
	}
	if len(errs) > 0 {
		return found, fmt.Errorf("gc: %w", errors.Join(errs...))
	}
	return found, nil
}

// markedBy reports whether an infrastructure has a namespace marked by the
// store with id.
func markedBy(namespaces []dataplane.NamedNS, id string) func(infra string) bool {
	has := map[string]bool{}
	for _, ns := range namespaces {
		if m, ok := plan.ParseMark(ns.Mark); ok && m.Store == id {
			has[m.Infra] = true
		}
	}
	return func(infra string) bool { return has[infra] }
}

// namespaceOf gives a cgroup the mark of the namespace it goes with: a
// VM's (vnet/<infra>/<vm>) its VM's, an infrastructure's level
// (vnet/<infra>) that of the first of its namespaces that has one.
func namespaceOf(namespaces []dataplane.NamedNS) func(cgroup string) (plan.Mark, bool) {
	marks := map[string]plan.Mark{}
	first := map[string]plan.Mark{}
	for _, ns := range namespaces {
		m, ok := plan.ParseMark(ns.Mark)
		if !ok {
			continue
		}
		marks[ns.Name] = m
		if infra, _, ok := plan.SplitNSName(ns.Name); ok && m.Infra == infra {
			if _, had := first[infra]; !had {
				first[infra] = m
			}
		}
	}
	return func(cgroup string) (plan.Mark, bool) {
		parts := strings.Split(cgroup, "/")
		switch len(parts) {
		case 3:
			m, ok := marks[plan.NSName(parts[1], parts[2])]
			return m, ok
		case 2:
			m, ok := first[parts[1]]
			return m, ok
		}
		return plan.Mark{}, false
	}
}

func setOf(list []string) map[string]bool {
	set := map[string]bool{}
	for _, s := range list {
		set[s] = true
	}
	return set
}

// forgetGoneStores drops from the store registry the stores found nowhere
// that nothing on the host carries the mark of any more.
func forgetGoneStores(namespaces []dataplane.NamedNS, garbage []dataplane.Leftover) {
	registered, err := store.Registered()
	if err != nil {
		return
	}
	named := map[string]bool{}
	for _, ns := range namespaces {
		if m, ok := plan.ParseMark(ns.Mark); ok {
			named[m.Store] = true
		}
	}
	for _, g := range garbage {
		if g.Marked {
			named[g.Mark.Store] = true
		}
	}
	var gone []string
	for id := range registered {
		if !named[id] && !store.Find(id, "").Found() {
			gone = append(gone, id)
		}
	}
	store.Forget(gone...)
}

// infraLocks holds the locks gc took, one per infrastructure.
type infraLocks struct {
	st      *store.Bolt
	held    map[string]func()
	claimed map[string]bool // in the store once locked: left alone
}

// take locks infra ("" needs no lock) unless this gc holds it already.
// With unowned, it fails when the infrastructure is in the store now.
func (l *infraLocks) take(infra string, unowned bool) error {
	if infra == "" {
		return nil
	}
	if l.held == nil {
		l.held, l.claimed = map[string]func(){}, map[string]bool{}
	}
	if _, ok := l.held[infra]; !ok {
		unlock, err := l.st.Lock(infra)
		if err != nil {
			return fmt.Errorf("left what %s left: %w", infra, err)
		}
		l.held[infra] = unlock
		if _, err := l.st.Get(infra); err == nil {
			l.claimed[infra] = true
		} else if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("left what %s left: %w", infra, err)
		}
	}
	if unowned && l.claimed[infra] {
		return fmt.Errorf("left what %s left: it was applied meanwhile, and its next apply or destroy repairs it: %w", infra, errClaimed)
	}
	return nil
}

// errClaimed says an infrastructure entered the store while gc ran.
var errClaimed = errors.New("claimed")

// noteSkip says which leftover gc leaves to an apply that began meanwhile,
// and adds any other error to errs.
func noteSkip(out io.Writer, errs []error, err error) []error {
	if errors.Is(err, errClaimed) {
		fmt.Fprintln(out, strings.TrimSuffix(err.Error(), ": "+errClaimed.Error()))
		return errs
	}
	return append(errs, err)
}

func (l *infraLocks) release() {
	for _, unlock := range l.held {
		unlock()
	}
}
