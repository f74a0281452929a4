package service

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/killpoint"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/teamagent"
)

// GCOptions say how gc goes.
type GCOptions struct {
	// DryRun lists what would be removed and changes nothing.
	DryRun bool
	// Log receives a line per thing removed (or, dry, to remove) and per
	// thing left to an apply that began meanwhile.
	Log io.Writer
}

// GC removes what no apply or destroy will: probe namespaces of processes
// that are gone, unfinished namespace entries, namespaces whose mark names
// a state directory that no longer exists, cgroups of infrastructures
// with neither a record nor a namespace, and agents of this state
// directory whose infrastructure is not in the store. Infrastructures in
// the store are left alone: their next apply or destroy repairs them. It
// takes an infrastructure's lock before it removes what that
// infrastructure left, and leaves it if an apply put the infrastructure
// in the store meanwhile. It reports whether it found anything.
func (l *Local) GC(o GCOptions) (found bool, err error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	dp, err := dataplane.New()
	if err != nil {
		return false, err
	}
	defer dp.Close()
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
	garbage, err := dp.Garbage(dataplane.GarbageOpts{Known: isKnown})
	if err != nil {
		return false, err
	}
	orphans := teamagent.Orphans(l.StateDir, isKnown)
	killpoint.At("gc: leftovers listed, none locked yet")
	verb := "removed"
	if o.DryRun {
		verb = "would remove"
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
	for _, g := range garbage {
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
		fmt.Fprintf(o.Log, "%s %s\n", verb, g)
	}
	found = len(orphans)+len(garbage) > 0
	if len(errs) > 0 {
		return found, fmt.Errorf("gc: %w", errors.Join(errs...))
	}
	return found, nil
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
