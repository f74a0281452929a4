package reconcile

import (
	"errors"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// model is the desired state. Teams keep the assignments observed (LBT
// moves, failovers without failback) and team-wide limits their split;
// every uplink counts as up: apply brings them up. Offloads that last, the
// spec of the last apply (nil before the first), set and this one drops go
// back to a veth's defaults.
func (e *Engine) model(doc *spec.Document, observed []plan.Resource, last *spec.Spec, paused plan.Paused) []plan.Resource {
	desired := e.markOwn(doc.Spec.Name, plan.Model(doc.Spec, e.scoped(plan.Options{NumCPU: e.numCPU(), Teams: plan.Assignments(observed), PoolCeils: plan.PoolCeils(observed),
		Now: time.Now().UTC().Truncate(time.Second), Paused: paused})))
	if last == nil || last == doc.Spec { // the same spec drops no offloads
		return desired
	}
	return plan.ResetDroppedOffloads(desired, plan.Model(last, e.scoped(plan.Options{NumCPU: e.numCPU()})))
}

// modelOptions are the planner's options for the models of infra's specs
// (scoped), their namespaces and cgroups marked as this store's as they
// are made: the desired state is then the model itself, not a copy of it
// marked (markOwn finds nothing to mark).
func (e *Engine) modelOptions(infra string, o plan.Options) plan.Options {
	o = e.scoped(o)
	o.Mark = e.ownMark(infra)
	return o
}

// modelSet makes the models an apply needs, each once: the specs' models
// made without what observation tells are the same as those made with it
// when observation tells nothing (no team assignments, pool splits or
// uplinks down), as it does for an infrastructure without teams or pools.
type modelSet struct {
	e          *Engine
	doc        *spec.Document
	last       *spec.Spec      // nil before the first apply
	next, prev []plan.Resource // of doc and of last, with no observation
	opt        plan.Options    // what next was made with
	// lastPaused is what the last apply's record says is paused, which
	// prev was made with (opt.Paused is what next pauses).
	lastPaused plan.Paused
	// otherBuild says the last apply was made by another build of vnet,
	// whose model of the same spec may differ from this one's.
	otherBuild bool
	// plain is desired when observation tells nothing, made once: an
	// apply asks for it before and after it observes.
	plain []plan.Resource
	// change, when set, is how next was spliced from prev: the resources
	// the two can disagree on.
	change *plan.Splice
	// kept says next is the memo's model of the same spec (keep).
	kept bool
}

// models reads the record of the last apply (nil before the first) and
// makes the models of both specs, the last one's meanwhile. When the memo
// holds the last spec's model and the change is one a splice bounds (of
// VMs and virtual networks), the next model is that one with the touched
// VMs and networks modelled again (plan.SpliceModel); when it does not,
// the last model is spliced from the next one the same way where a splice
// may bound the change (plan.MaySplice), else modelled whole. The last
// spec is modelled with what its record says was paused, the next one
// with what is to be paused (wantPaused).
func (e *Engine) models(doc *spec.Document) (*store.Record, *modelSet, error) {
	opt := e.modelOptions(doc.Spec.Name, plan.Options{NumCPU: e.numCPU()})
	if e.Paused != nil {
		opt.Paused = e.Paused.Normal()
	}
	m := &modelSet{e: e, doc: doc, opt: opt}
	if rec, ok := e.splice(doc, m); ok {
		return rec, m, nil
	}
	opt = m.opt
	var rec *store.Record
	var err error
	// lastFromNext says the last spec's model is to be spliced from the
	// next one's, not made whole: a process that keeps no model (a new
	// vnet command, a CNI plugin) models one spec whole, not two.
	var lastFromNext bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec, err = e.lastRecord(doc.Spec.Name)
		if errors.Is(err, store.ErrNotFound) {
			rec, err = nil, nil
		}
		if rec == nil {
			return // none
		}
		m.lastPaused = rec.Paused.Normal()
		lastOpt := opt
		lastOpt.Paused = m.lastPaused
		switch {
		case !sameSpec(rec, doc):
		case lastOpt.Paused.Equal(e.wantPaused(rec)):
			return // the last spec is this one, as paused: its model is m.next
		default:
			m.last, m.prev = doc.Spec, plan.Model(doc.Spec, lastOpt)
			m.otherBuild = rec.Engine != engineBuild()
			return
		}
		if s, model, ok := e.Memo.get(doc.Spec.Name, rec.Spec, lastOpt); ok {
			m.last, m.prev = s, model
		} else if m.last = e.specOf(rec); m.last != nil {
			if lastFromNext = lastOpt.Paused.Equal(opt.Paused) && plan.MaySplice(doc.Spec, m.last, opt); !lastFromNext {
				m.prev = plan.Model(m.last, lastOpt)
			}
		}
		if m.last != nil {
			m.otherBuild = rec.Engine != engineBuild()
		}
	}()
	m.next = plan.Model(doc.Spec, opt)
	<-done
	if lastFromNext {
		m.spliceLast()
	}
	if rec != nil && e.Paused == nil && !m.lastPaused.Equal(opt.Paused) {
		// Keep what the record pauses, which could not be known before
		// it was read: rare, and worth modelling the spec again.
		m.opt.Paused = m.lastPaused
		m.next = plan.Model(doc.Spec, m.opt)
	}
	if err == nil && sameSpec(rec, doc) && m.lastPaused.Equal(m.opt.Paused) {
		m.last, m.prev = doc.Spec, m.next
		m.otherBuild = rec.Engine != engineBuild()
	}
	return rec, m, err
}

// spliceLast makes the model of the last spec from the next one's, of the
// change back (plan.SpliceModel), else whole, when the models decide that
// a splice cannot bound the change.
func (m *modelSet) spliceLast() {
	sp, ok := plan.SpliceModel(m.doc.Spec, m.last, m.next, nil, nil, m.opt)
	if !ok {
		m.prev = plan.Model(m.last, m.opt)
		return
	}
	// Spliced back: what the change touches of the next model is the
	// part's Before, of the last model its After.
	m.prev, m.change = sp.Model, &plan.Splice{Model: m.next, Before: sp.After, After: sp.Before}
}

// wantPaused is what an apply is to leave paused, given the record of the
// last one (nil: none): Paused when set, else what the record says.
func (e *Engine) wantPaused(rec *store.Record) plan.Paused {
	if e.Paused != nil {
		return e.Paused.Normal()
	}
	if rec == nil {
		return nil
	}
	return rec.Paused.Normal()
}

// splice makes m's models of the memo's model of the last apply, when it
// holds the record's spec and the change is one plan.SpliceModel bounds,
// or there is no change: the record holds the spec as it is applied
// again (kept).
func (e *Engine) splice(doc *spec.Document, m *modelSet) (*store.Record, bool) {
	if e.Memo == nil {
		return nil, false
	}
	rec, err := e.lastRecord(doc.Spec.Name)
	if err != nil {
		return nil, false
	}
	m.lastPaused, m.opt.Paused = rec.Paused.Normal(), e.wantPaused(rec)
	if !m.lastPaused.Equal(m.opt.Paused) {
		return nil, false // the kept model is of the last pause, the splice would keep it
	}
	kept, ok := e.Memo.entry(doc.Spec.Name, rec.Spec, m.opt)
	if !ok {
		return nil, false
	}
	if sameSpec(rec, doc) {
		m.keep(kept)
	} else {
		sp, ok := plan.SpliceModel(kept.spec, doc.Spec, kept.model, kept.keys, kept.room, m.opt)
		if !ok {
			return nil, false
		}
		m.last, m.prev, m.next, m.change = kept.spec, kept.model, sp.Model, &sp
	}
	if plan.SameModel(m.next, kept.model) && len(kept.desired) == len(kept.model) &&
		!plan.HasKind(kept.model, plan.KindOffloads) {
		// Nothing of the host changes: the desired state is the last
		// one's, as the last apply made it of the same model (which
		// reset no offloads an earlier spec set: a model without
		// offloads resets none).
		m.plain = kept.desired
	}
	m.otherBuild = rec.Engine != engineBuild()
	return rec, true
}

// keep makes m's models those the memo kept of the spec applied again: the
// last model is the next one, as models makes them of the same spec, and
// the change between them touches nothing (an empty Splice), which the
// models' difference would say of the whole model.
func (m *modelSet) keep(kept memoEntry) {
	m.last, m.prev, m.next, m.kept = m.doc.Spec, kept.model, kept.model, true
	m.change = &plan.Splice{Model: kept.model, Keys: kept.keys, Room: kept.room}
}

// how says how the next model was made: "kept" (the memo's, of the same
// spec), "spliced" or "whole".
func (m *modelSet) how() string {
	switch {
	case m.kept:
		return "kept"
	case m.change != nil:
		return "spliced"
	}
	return "whole"
}

// desired is the model of the spec in the light of what was observed (see
// model).
func (m *modelSet) desired(observed []plan.Resource) []plan.Resource {
	teams, ceils := plan.Assignments(observed), plan.PoolCeils(observed)
	next := m.next
	plain := len(teams) == 0 && len(ceils) == 0 && !hasSteer(next)
	if plain && m.plain != nil {
		return m.plain
	}
	if !plain {
		next = plan.Model(m.doc.Spec, m.e.modelOptions(m.doc.Spec.Name, plan.Options{NumCPU: m.e.numCPU(), Teams: teams, PoolCeils: ceils,
			Now: time.Now().UTC().Truncate(time.Second), Paused: m.opt.Paused}))
	}
	desired := next // made marked (modelOptions)
	if m.last != nil {
		desired = plan.ResetDroppedOffloads(desired, m.prev)
	}
	if plain {
		m.plain = desired
	}
	return desired
}

// realized is realizedModel, made once more only when observation tells
// something.
func (m *modelSet) realized(observed []plan.Resource) []plan.Resource {
	if m.last == nil {
		return nil
	}
	if len(plan.Assignments(observed)) == 0 && len(plan.PoolCeils(observed)) == 0 && len(downUplinks(m.last, observed)) == 0 {
		return m.prev
	}
	return m.e.realizedModel(m.last, observed, m.lastPaused)
}

// realizedIn is what of the realized model (realized) the scope holds
// that can explain a program the desired state does not (ResolveSteer).
// When the desired state is the next model made without observation
// (plain), the realized model is the last one, and the next one was
// spliced from it or kept, that is what the scope holds of the last
// model's resources the change touched (the splice's Before): the others
// are in the next model alike, and so in the desired state wherever the
// scope holds them. A model of thousands is then not walked.
func (m *modelSet) realizedIn(scope plan.Scope, observed []plan.Resource, plain bool) []plan.Resource {
	realized := m.realized(observed)
	if plain && m.change != nil && plan.SameModel(realized, m.prev) {
		return scope.Desired(m.change.Before)
	}
	return scope.Desired(realized)
}

// hasSteer reports whether a model steers (teams): what it makes then
// depends on the time (plan.Options.Now).
func hasSteer(rs []plan.Resource) bool { return plan.HasKind(rs, plan.KindSteer) }

// realizedModel is what last, the spec of the last apply, makes of the host
// as it is: with its uplinks up or down, and the agent's assignments and
// splits, and what it paused. It explains the steering programs the kernel
// holds, so that a rollback can make them again.
func (e *Engine) realizedModel(last *spec.Spec, observed []plan.Resource, paused plan.Paused) []plan.Resource {
	if last == nil {
		return nil
	}
	return plan.Model(last, e.scoped(plan.Options{NumCPU: e.numCPU(), Teams: plan.Assignments(observed), PoolCeils: plan.PoolCeils(observed),
		Down: downUplinks(last, observed), Paused: paused}))
}
