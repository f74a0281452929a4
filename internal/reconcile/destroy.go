package reconcile

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
)

// Destroy removes everything of the infrastructure this store made, and
// only that: its namespaces (with what runs in them), links and cgroups.
// Namespaces that only look like the infrastructure's are left, and the log
// says so. It carries on past failures and reports them all.
func (e *Engine) Destroy(name string) (plan.Plan, error) {
	unlock, err := e.Store.Lock(name)
	if err != nil {
		return plan.Plan{}, fmt.Errorf("destroy %s: %w", name, err)
	}
	defer unlock()
	lap := e.stopwatch()
	if _, err := e.Sweep(name); err != nil {
		return plan.Plan{}, fmt.Errorf("destroy %s: %w", name, err)
	}
	lap("sweep")
	observed, err := e.DP.Observe(name, nil)
	if err != nil {
		return plan.Plan{}, fmt.Errorf("observe %s: %w", name, err)
	}
	lap("observe (%d resources)", len(observed))
	mine, strangers := e.claim(name, observed, nil)
	for _, s := range strangers {
		e.logf("left %s\n", s)
	}
	p := plan.Diff(nil, mine)
	lap("claim and plan (%d actions)", len(p.Actions))
	// A destroy killed halfway leaves the record beside a half-emptied
	// host; the next apply must then read everything, not only what its
	// spec changes since the record.
	if !p.Empty() {
		if err := e.setPending(name); err != nil {
			return p, fmt.Errorf("destroy %s: %w", name, err)
		}
	}
	var errs []error
	if bd, ok := e.DP.(BatchDeleter); ok {
		errs = bd.DeleteAll(p.Actions, e.stopwatch())
	} else {
		for _, a := range p.Actions {
			if err := e.DP.Execute(a); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return p, fmt.Errorf("destroy %s: %w", name, errors.Join(errs...))
	}
	lap("delete")
	if f, ok := e.DP.(DeviceForgetter); ok {
		// The infrastructure's namespaces are gone, and with them what
		// the records of their devices (TAPs moved in) could give back.
		prefix := plan.InfraNSPrefix(name)
		if _, err := f.DropStaleDeviceRecords(func(ns string) bool { return strings.HasPrefix(ns, prefix) }, false); err != nil {
			e.logf("kept a record of a device that is gone: %v\n", err)
		}
	}
	if err := e.Store.Delete(name); err != nil {
		return p, fmt.Errorf("destroy %s: forget state: %w", name, err)
	}
	e.clearPending(name)
	lap("forget the record")
	return p, nil
}

// mustSweep reports whether an apply sweeps first, given the record the
// store holds (nil: none). What a killed command leaves, it leaves with
// the pending note set (setPending), and a sweep reads every namespace
// entry and VM cgroup of the machine, tens of thousands at scale. An apply
// therefore sweeps when the note says the last apply or destroy did not
// finish (and on full passes), whichever process makes it. An apply on
// one machine sweeps as well before the infrastructure's first record
// (what a destroy killed after removing it, or anything made without a
// store, left), and after a record of another build of vnet, which may
// not have kept the note.
func (e *Engine) mustSweep(name string, rec *store.Record) bool {
	if e.unfinished(name) {
		return true
	}
	return e.Host == "" && (rec == nil || rec.Engine != engineBuild())
}

// unfinished reports whether an apply or destroy of name may have been
// killed halfway: the store says so, cannot tell, or a full pass is asked.
func (e *Engine) unfinished(name string) bool {
	p, journaled := e.Store.(store.Pending)
	return e.Full || !journaled || p.IsPending(name)
}

// Sweep removes what a command killed halfway left of the infrastructure
// that no plan sees, and says what it removed. Apply and Destroy sweep
// first; everything else such a command leaves is a resource the next
// plan finishes or removes.
func (e *Engine) Sweep(name string) ([]string, error) {
	sw, ok := e.DP.(Sweeper)
	if !ok {
		return nil, nil
	}
	done, err := sw.Sweep(name)
	if us, ok := e.DP.(UnmarkedSweeper); ok && e.unfinished(name) {
		unmarked, uerr := us.SweepUnmarked(name)
		done, err = append(done, unmarked...), errors.Join(err, uerr)
	}
	for _, what := range done {
		e.logf("removed what an interrupted command left: %s\n", what)
	}
	if err != nil {
		return done, fmt.Errorf("remove what an interrupted command left: %w", err)
	}
	return done, nil
}
