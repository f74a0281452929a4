package reconcile

import (
	"errors"
	"fmt"

	"github.com/vnet-project/vnet/internal/plan"
)

// rollback converges back to the snapshot. The same planner that made the
// failed plan works out the way back, so no step needs its own undo.
// It reads what the apply could have touched: the scope of the apply.
// recorded says the store holds the record the apply began from: once
// the host is back to it, the pending note goes.
func (e *Engine) rollback(name string, o observation, cause error, recorded bool) error {
	before, desired := remakeable(o.observed), o.desired
	e.logf("apply failed: %v\nrolling back\n", cause)
	touched := append(append([]plan.Resource{}, before...), desired...)
	now, err := e.observeScope(name, o.scope, touched)
	if err != nil {
		return fmt.Errorf("%w; rollback could not observe the host: %v", cause, err)
	}
	// A namespace the apply made may have failed before it got its mark.
	making := map[string]bool{}
	for _, r := range desired {
		if r.Kind == plan.KindNetns {
			making[r.Name] = true
		}
	}
	now, _ = claimWith(e.listedIn(name, o.rec), e.Store.ID(), name, now, making)
	now = o.scope.Observed(now, touched, append(append([]plan.Resource{}, o.model...), before...))
	now = plan.ResolveSteer(now, before, desired)
	var errs []error
	for _, a := range plan.Diff(before, now).Actions {
		if err := e.DP.Execute(a); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w; rollback incomplete: %v", cause, errors.Join(errs...))
	}
	if d, ok := e.DP.(DevicePreparer); ok {
		d.DropUnusedDeviceRecords(plan.Diff(desired, before).Actions)
	}
	if recorded {
		e.clearPending(name)
	}
	return fmt.Errorf("%w (%w)", cause, ErrRolledBack)
}

// remakeable leaves out what no rollback can make again: half pairs the
// kernel was already tearing down when the apply read the host.
func remakeable(observed []plan.Resource) []plan.Resource {
	out := make([]plan.Resource, 0, len(observed))
	for _, r := range observed {
		if !r.HalfPair() {
			out = append(out, r)
		}
	}
	return out
}
