package reconcile

import (
	"errors"
	"fmt"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// Result says what an apply did.
type Result struct {
	Plan     plan.Plan
	Executed int
	// Realized is what the apply recorded as realized (nil when it
	// recorded nothing): a caller that keeps it need not read the record.
	Realized []plan.Resource
}

// ErrRolledBack wraps an apply failure after which the host was restored.
var ErrRolledBack = errors.New("nothing was changed: the host was restored to its state before the apply")

// Plan returns what an apply of the spec would do.
func (e *Engine) Plan(doc *spec.Document) (plan.Plan, error) {
	doc, err := e.pinVNIs(doc)
	if err != nil {
		return plan.Plan{}, err
	}
	o, err := e.observe(doc, nil)
	if err != nil {
		return plan.Plan{}, err
	}
	return plan.Diff(o.desired, o.observed), nil
}

// Apply converges the host to the spec. If any step fails, the host is
// converged back to the state observed before the first step.
func (e *Engine) Apply(doc *spec.Document) (Result, error) {
	name := doc.Spec.Name
	unlock, err := e.Store.Lock(name)
	if err != nil {
		return Result{}, fmt.Errorf("apply %s: %w", name, err)
	}
	defer unlock()
	if doc, err = e.pinVNIs(doc); err != nil {
		return Result{}, err
	}
	lap := e.stopwatch()
	o, err := e.observe(doc, func(rec *store.Record) error {
		if !e.mustSweep(name, rec) {
			return nil
		}
		if _, err := e.Sweep(name); err != nil {
			return fmt.Errorf("apply %s: %w", name, err)
		}
		lap("sweep")
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	p := plan.Diff(o.desired, o.observed)
	lap("read and planned in all (%d actions)", len(p.Actions))
	res := Result{Plan: p}
	e.logf("%s", p)
	if !p.Empty() {
		if err := e.DP.Probe(o.desired); err != nil {
			return res, fmt.Errorf("apply %s: %w", name, err)
		}
		if d, ok := e.DP.(DevicePreparer); ok {
			if err := d.PrepareDevices(p.Actions); err != nil {
				return res, fmt.Errorf("apply %s: %w", name, err)
			}
		}
		if err := e.setPending(name); err != nil {
			return res, fmt.Errorf("apply %s: %w", name, err)
		}
		lap("probe")
	}
	kinds := e.kindTimes()
	for i := 0; i < len(p.Actions); {
		steps := p.Actions[i : i+e.batchLen(p.Actions[i:])]
		began := kinds.begin()
		done, err := e.steps(i, steps)
		kinds.end(steps[0], len(steps), began)
		res.Executed += done
		if err != nil {
			return res, e.rollback(name, o, fmt.Errorf("apply %s: step %d of %d: %w", name, i+done+1, len(p.Actions), err), true)
		}
		i += len(steps)
	}
	// Once the steps have made and removed what they do (a link a killed
	// command left is deleted by them), what remains shared holds only
	// what is there.
	if err := e.pruneStale(o, p); err != nil {
		return res, e.rollback(name, o, fmt.Errorf("apply %s: %w", name, err), true)
	}
	lap("execute")
	kinds.trace(e.tracef)
	namespaces := e.recordedNamespaces(name, o.model, o.vouched)
	lap("record: the namespaces' IDs")
	recErr := e.record(doc, o.rec, o.model, !p.Empty(), o.models.opt.Paused.Prune(doc.Spec), namespaces)
	lap("record: the store")
	if recErr != nil && !errors.Is(recErr, store.ErrWriteKept) {
		// The store holds the record it held before (or cannot tell, and
		// keeps the pending note for the next apply to read everything):
		// the host goes back to what that record names.
		return res, e.rollback(name, o, fmt.Errorf("apply %s: %w", name, recErr), !errors.Is(recErr, store.ErrWriteUnknown))
	}
	// Recorded (or, ErrWriteKept, recorded in state.db alone, which no
	// longer takes the write back): the host stays as the record names it.
	res.Realized = o.model
	e.Memo.put(name, doc.Source, doc.Spec, o.models.opt, o.models.next, o.models.change, o.models.plain)
	// A full apply leaves the host as the record says, also after a killed one.
	if o.scope.Full() {
		if err := e.sweepPortPrograms(o.desired); err != nil {
			return res, fmt.Errorf("apply %s: applied and recorded, but: %w", name, err)
		}
	}
	if !p.Empty() || o.scope.Full() {
		e.clearPending(name)
	}
	lap("record")
	e.forgetGoneDevices(o)
	if recErr != nil {
		return res, fmt.Errorf("apply %s: applied and recorded, but: %w", name, recErr)
	}
	return res, nil
}

// pinVNIs gives each network of a spec applied on one machine that leaves
// its VNI out the one it had in the last apply, else a free one, and
// writes them into the spec the record keeps, as a cluster's stored spec
// does: a network keeps its VNI while others come and go. A host's agent
// reads a spec pinned already.
func (e *Engine) pinVNIs(doc *spec.Document) (*spec.Document, error) {
	if e.Host != "" || len(doc.Spec.Networks) == 0 {
		return doc, nil
	}
	pinned, err := spec.PinVNIs(doc, e.lastSpec(doc))
	if err != nil {
		return nil, fmt.Errorf("apply %s: allocate network VNIs: %w", doc.Spec.Name, err)
	}
	return pinned, nil
}

// batchLen is how many of the steps, from the first, go together: the
// first and those after it with its batch key (BatchExecutor).
func (e *Engine) batchLen(actions []plan.Action) int {
	b, ok := e.DP.(BatchExecutor)
	if !ok {
		return 1
	}
	key := b.BatchKey(actions[0])
	if key == "" {
		return 1
	}
	n := 1
	for n < len(actions) && n < b.MaxBatch() && b.BatchKey(actions[n]) == key {
		n++
	}
	return n
}

// steps carries out consecutive steps, the first being step i of the plan,
// together where the dataplane can (batchLen). It returns how many it
// carried out before the first that failed, and that one's error.
func (e *Engine) steps(i int, actions []plan.Action) (int, error) {
	if len(actions) == 1 {
		if err := e.step(i, actions[0]); err != nil {
			return 0, err
		}
		return 1, nil
	}
	// FailBefore fails the apply before the step it names: the steps before
	// it are carried out, together, and it is not.
	var failed error
	if e.FailBefore != nil {
		for k, a := range actions {
			if err := e.FailBefore(i+k, a); err != nil {
				actions, failed = actions[:k], err
				break
			}
		}
	}
	done := 0
	if len(actions) > 0 {
		var err error
		if done, err = e.DP.(BatchExecutor).ExecuteBatch(actions); err != nil {
			return done, err
		}
	}
	return done, failed
}

func (e *Engine) step(i int, a plan.Action) error {
	if e.FailBefore != nil {
		if err := e.FailBefore(i, a); err != nil {
			return err
		}
	}
	return e.DP.Execute(a)
}

// forgetGoneDevices removes, after an apply recorded, the records of the
// devices it dropped (the TAPs of VMs that went) that are gone already, as
// a hypervisor's TAP is once its guest stopped: no step removed them, as
// no observation saw them. A record left is only kept longer than needed,
// so its failure is logged and fails nothing.
func (e *Engine) forgetGoneDevices(o observation) {
	f, ok := e.DP.(DeviceForgetter)
	if !ok || o.models == nil {
		return
	}
	next, last := o.model, o.models.prev
	if c := o.models.change; c != nil {
		next, last = c.After, c.Before
	}
	if err := f.ForgetGoneDevices(plan.DroppedDevices(next, last)); err != nil {
		e.logf("kept a record of a device that is gone: %v\n", err)
	}
}

// sweepPortPrograms has the dataplane delete, from the port programs of
// the namespaces where desired has port policies, what no port's settings
// name: a killed apply's staging, which no plan shows, since the model
// has no resource for it. The apply holds the infrastructure's lock, so
// no one stages there meanwhile.
func (e *Engine) sweepPortPrograms(desired []plan.Resource) error {
	ps, ok := e.DP.(PortSweeper)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var namespaces []string
	for _, r := range desired {
		if r.Kind == plan.KindPortBPF && !seen[r.NS] {
			seen[r.NS] = true
			namespaces = append(namespaces, r.NS)
		}
	}
	if len(namespaces) == 0 {
		return nil
	}
	return ps.SweepPortPrograms(namespaces)
}

// pruneStale has the dataplane forget, in what its resources share, the
// entries of resources that are gone, when some may be there
// (mayBeStale): in the namespaces where the last apply or this one has
// port programs.
func (e *Engine) pruneStale(o observation, p plan.Plan) error {
	sp, ok := e.DP.(StalePruner)
	if !ok || !mayBeStale(o, p) {
		return nil
	}
	seen := map[string]bool{}
	var namespaces []string
	for _, model := range [][]plan.Resource{o.models.prev, o.model} {
		for _, r := range model {
			if r.Kind == plan.KindPortBPF && !seen[r.NS] {
				seen[r.NS] = true
				namespaces = append(namespaces, r.NS)
			}
		}
	}
	return sp.PruneStale(namespaces)
}

// mayBeStale reports whether what the dataplane shares between resources
// may hold entries of resources that are gone (StalePruner): the apply
// reads everything (as scopeFor has it do whenever the last command may
// not have finished, read before this apply set its own pending note,
// which would say so of every apply that changes something), there is no
// last model to compare with, or the plan makes again a port's programs
// that the last apply made and that are gone (their link deleted under
// vnet, or their hook).
func mayBeStale(o observation, p plan.Plan) bool {
	if o.rec == nil || o.scope.Full() || o.models.prev == nil {
		return true
	}
	created := map[string]bool{}
	for _, a := range p.Actions {
		if a.Op == plan.OpCreate && a.New.Kind == plan.KindPortBPF {
			created[a.New.Key()] = true
		}
	}
	if len(created) == 0 {
		return false
	}
	for _, r := range o.models.prev {
		if r.Kind == plan.KindPortBPF && created[r.Key()] {
			return true
		}
	}
	return false
}
