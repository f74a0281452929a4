package reconcile

import (
	"fmt"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// observation is what an apply reads and works out before it plans.
type observation struct {
	models   *modelSet
	rec      *store.Record   // of the last apply; nil before the first
	scope    plan.Scope      // what it read; nil: everything
	model    []plan.Resource // the desired state of the whole infrastructure
	desired  []plan.Resource // the part of model the scope holds
	observed []plan.Resource // what it read that the plan compares with desired
	// vouched is the ID of each namespace the record's identities showed
	// to be still this store's (see recordStands), by name.
	vouched vouchedIDs
}

// observe reads what of the host is this store's, and the desired state in
// the light of it, within the scope a change from the last apply can touch
// (see scopeFor). It fails when the spec would meet namespaces this store
// did not make (see claim). An apply sweeps (see mustSweep) once the last
// record is read and before the kernel is: sweep, when not nil.
func (e *Engine) observe(doc *spec.Document, sweep func(last *store.Record) error) (observation, error) {
	name := doc.Spec.Name
	if err := e.checkHost(doc); err != nil {
		return observation{}, err
	}
	lap := e.stopwatch()
	rec, m, err := e.models(doc)
	if err != nil {
		return observation{}, fmt.Errorf("apply %s: %w", name, err)
	}
	lap("last record, models (%s)", m.how())
	if sweep != nil {
		if err := sweep(rec); err != nil {
			return observation{}, err
		}
	}
	if e.Host == "" {
		if err := e.checkAttached(doc, m.last); err != nil {
			return observation{}, err
		}
	}
	scope, vouched := e.scopeFor(doc, m, rec)
	plain := m.desired(nil)
	hints := scope.Desired(plain)
	lap("scope and hints")
	observed, err := e.observeScope(name, scope, hints)
	if err != nil {
		return observation{}, fmt.Errorf("observe %s: %w", name, err)
	}
	lap("observe (%d resources)", len(observed))
	observed, strangers := claimWith(e.listedIn(name, rec), e.Store.ID(), name, observed, nil)
	model := m.desired(observed)
	if err := refuseStrangers(name, strangers, model); err != nil {
		return observation{}, err
	}
	for _, s := range strangers {
		e.logf("left %s\n", s)
	}
	desired := hints // the dataplane only reads them
	isPlain := plan.SameModel(model, plain)
	if !isPlain {
		desired = scope.Desired(model)
	}
	observed = scope.Observed(observed, desired, model)
	realized := m.realizedIn(scope, observed, isPlain)
	lap("model")
	return observation{models: m, rec: rec, scope: scope, model: model, desired: desired,
		observed: plan.ResolveSteer(observed, desired, realized), vouched: vouched}, nil
}

// checkHost checks what the spec names of a real machine (devices, TAPs,
// namespaces) against the machine, before anything is planned. Only a host
// model realizes these: the single-machine lab has no real host.
func (e *Engine) checkHost(doc *spec.Document) error {
	s := doc.Spec
	if e.Host == "" {
		if s.NamesDevices() {
			return fmt.Errorf("%s names real devices (device:), which only a host agent realizes on its own host (vnet agent host, docs/hosts.md)", s.Name)
		}
		return nil // what VMs attach is checked beside the last apply's spec (checkAttached)
	}
	hf, ok := e.DP.(HostFactReader)
	if !ok {
		return nil
	}
	checked := plan.AllVMs
	if !e.Full {
		// What the last apply in this process checked stood then; what
		// became of it since is drift, which a full apply checks.
		checked = plan.CheckedVMs(e.Memo.lastSpec(s.Name), s)
	}
	links, namespaces := plan.HostNames(s, e.Host, checked)
	if len(links) == 0 && len(namespaces) == 0 {
		return nil
	}
	underlay := ""
	if h, ok := s.Host(e.Host); ok {
		underlay = h.Underlay
	}
	ns := e.HostNS
	if ns == "" {
		ns = plan.CurrentNS
	}
	facts, err := hf.HostFacts(ns, links, namespaces, underlay)
	if err != nil {
		return fmt.Errorf("read host %s: %w", e.Host, err)
	}
	speeds, err := plan.CheckHostFacts(doc, e.Host, facts, checked)
	if err != nil {
		return err
	}
	e.deviceSpeeds = speeds
	return nil
}

// scopeFor returns the namespaces an apply of doc reads and plans, nil for
// all of them. An apply is full when asked (Full), when there is no record
// of a previous one, when the last one never finished (it may have left
// changes anywhere), when the store cannot tell that, when the change
// reaches beyond VMs (plan.ChangeScope), and when the host no longer holds
// what the record names as this store's in the namespaces the change
// touches, or anywhere when it touches none (recordStandsWithin).
// Otherwise it reads only the namespaces of what the change creates,
// deletes or changes: drift elsewhere waits for a full apply. It returns,
// with the scope, the namespaces the record's identities vouched for (see
// recordStandsWithin).
func (e *Engine) scopeFor(doc *spec.Document, m *modelSet, rec *store.Record) (plan.Scope, vouchedIDs) {
	why := ""
	var scope plan.Scope
	var vouched vouchedIDs
	p, journaled := e.Store.(store.Pending)
	switch {
	case e.Full:
		why = "asked for"
	case !journaled:
		why = "the store cannot tell an unfinished apply"
	case p.IsPending(doc.Spec.Name):
		why = "the last apply did not finish"
	case m.otherBuild:
		why = "the last apply was made by another build of vnet"
	default:
		before, after := m.prev, m.next
		if m.change != nil {
			before, after = m.change.Before, m.change.After
		}
		scope, why = plan.ChangeScope(m.last, doc.Spec, before, after)
		// Load balancers' health comes from the agents' probes, not from
		// the spec: every pass reads it back from their ports.
		scope = scope.WithKind(m.next, plan.KindLB)
		if !scope.Full() {
			var gone string
			if gone, vouched = e.recordStandsWithin(doc.Spec.Name, scope, m.prev, recordedIDs(rec)); gone != "" {
				scope, why = nil, gone
				e.logf("reading the whole infrastructure: %s\n", gone)
			}
		}
	}
	if scope.Full() {
		e.tracef("full observation: %s\n", why)
	} else {
		e.tracef("scoped observation: %d namespaces\n", len(scope))
	}
	return scope, vouched
}

// observeScope reads the namespaces in scope, all when it is nil or the
// dataplane cannot read only some.
func (e *Engine) observeScope(name string, scope plan.Scope, hints []plan.Resource) ([]plan.Resource, error) {
	if so, ok := e.DP.(ScopedObserver); ok {
		return so.ObserveScope(name, scope, hints)
	}
	return e.DP.Observe(name, hints)
}
