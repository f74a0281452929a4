// Package reconcile drives an apply or a destroy: it observes the host,
// plans with package plan, executes through a Dataplane, and on any failure
// converges the host back to what it observed before.
package reconcile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// Dataplane is what the engine needs from the kernel side.
type Dataplane interface {
	Observe(infra string, hints []plan.Resource) ([]plan.Resource, error)
	Execute(a plan.Action) error
	Probe(needs []plan.Resource) error
}

// ScopedObserver is a dataplane that can read only some namespaces of an
// infrastructure (all of them for a nil scope).
type ScopedObserver interface {
	ObserveScope(infra string, scope plan.Scope, hints []plan.Resource) ([]plan.Resource, error)
}

// Sweeper is a dataplane that can find and remove what a command killed
// halfway left of an infrastructure where no observation sees it (an
// unfinished namespace entry, an emptied cgroup directory).
type Sweeper interface {
	Sweep(infra string) ([]string, error)
}

// BatchDeleter is a dataplane that carries out a destroy's deletes faster
// all together than one by one, with the same result; it returns an error
// per action that failed, and calls lap (a Stopwatch) after each part.
type BatchDeleter interface {
	DeleteAll(actions []plan.Action, lap func(format string, args ...any)) []error
}

// DevicePreparer is a dataplane that records, for a whole plan before its
// first step, the state of the devices the plan changes, which each step
// would otherwise record alone.
type DevicePreparer interface {
	PrepareDevices(actions []plan.Action) error
	// DropUnusedDeviceRecords removes, after a rollback, the records of
	// devices the plan never got to change.
	DropUnusedDeviceRecords(actions []plan.Action)
}

// BatchExecutor is a dataplane that carries out some consecutive steps of
// a plan faster together than one by one, with the same result: those
// with the same non-empty BatchKey, at most MaxBatch at once.
// ExecuteBatch returns how many it carried out before the first that
// failed, and that one's error.
type BatchExecutor interface {
	BatchKey(a plan.Action) string
	MaxBatch() int
	ExecuteBatch(actions []plan.Action) (int, error)
}

// Engine applies and destroys infrastructures.
type Engine struct {
	DP    Dataplane
	Store store.Store
	Log   io.Writer // the plan and progress; io.Discard to silence
	// FailBefore, when set, is called before each step; an error it returns
	// fails the apply there. Tests use it to prove rollback at every step.
	FailBefore func(step int, a plan.Action) error
	NumCPU     int // CPUs for VM cpusets; 0 means this machine's
	// Full makes every apply read the whole infrastructure and repair any
	// drift, rather than only what the change from the last apply touches.
	Full bool
	// Trace, when set, receives where an apply's time goes.
	Trace io.Writer
	// Host and HostNS, when Host is set, realize only that host's part of
	// each spec, as its agent does (plan.Options.Host).
	Host, HostNS string
	// UplinksDown, on a real host, are the teamed uplinks whose device has
	// no carrier ("host/uplink", plan.Options.Down): an apply cannot bring
	// those up, so it keeps ports off them as the host's teaming agent does.
	UplinksDown map[string]bool
	// Memo, when set, keeps the spec and model of each apply for the next
	// one, which otherwise decodes the record's spec and models it again.
	Memo *Memo
	// Specs, when set, keeps the specs applied, so that reading the last
	// one back does not decode its YAML again.
	Specs *spec.Cache

	deviceSpeeds map[string]uint64 // of the host's real NICs, read by checkHost
}

// HostFactReader is a dataplane that can read the links and namespaces of
// the machine that a host's part of a spec names (plan.HostFacts).
type HostFactReader interface {
	HostFacts(hostNS string, links, namespaces []string, underlay string) (plan.HostFacts, error)
}

// scoped gives the planner's options the engine's host.
func (e *Engine) scoped(o plan.Options) plan.Options {
	o.Host, o.HostNS, o.DeviceSpeeds = e.Host, e.HostNS, e.deviceSpeeds
	if len(e.UplinksDown) > 0 {
		down := maps.Clone(e.UplinksDown)
		maps.Copy(down, o.Down)
		o.Down = down
	}
	return o
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

// checkHost checks what the spec names of a real machine (devices, TAPs,
// namespaces) against the machine, before anything is planned. Only a host
// model realizes these: the single-machine lab has no real host.
func (e *Engine) checkHost(doc *spec.Document) error {
	s := doc.Spec
	if e.Host == "" {
		if s.UsesRealHost() {
			return fmt.Errorf("%s names real devices or attaches vNICs (device:, attach:), which only a host agent realizes on its own host (vnet agent host, docs/hosts.md)", s.Name)
		}
		return nil
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

// model is the desired state. Teams keep the assignments observed (LBT
// moves, failovers without failback) and team-wide limits their split;
// every uplink counts as up: apply brings them up. Offloads that last, the
// spec of the last apply (nil before the first), set and this one drops go
// back to a veth's defaults.
func (e *Engine) model(doc *spec.Document, observed []plan.Resource, last *spec.Spec) []plan.Resource {
	desired := e.markOwn(doc.Spec.Name, plan.Model(doc.Spec, e.scoped(plan.Options{NumCPU: e.numCPU(), Teams: plan.Assignments(observed), PoolCeils: plan.PoolCeils(observed),
		Now: time.Now().UTC().Truncate(time.Second)})))
	if last == nil || last == doc.Spec { // the same spec drops no offloads
		return desired
	}
	return plan.ResetDroppedOffloads(desired, plan.Model(last, e.scoped(plan.Options{NumCPU: e.numCPU()})))
}

func (e *Engine) numCPU() int {
	if e.NumCPU != 0 {
		return e.NumCPU
	}
	return runtime.NumCPU()
}

// observation is what an apply reads and works out before it plans.
type observation struct {
	models   *modelSet
	rec      *store.Record   // of the last apply; nil before the first
	scope    plan.Scope      // what it read; nil: everything
	model    []plan.Resource // the desired state of the whole infrastructure
	desired  []plan.Resource // the part of model the scope holds
	observed []plan.Resource // what it read that the plan compares with desired
}

// observe reads what of the host is this store's, and the desired state in
// the light of it, within the scope a change from the last apply can touch
// (see scopeFor). It fails when the spec would meet namespaces this store
// did not make (see claim).
func (e *Engine) observe(doc *spec.Document) (observation, error) {
	name := doc.Spec.Name
	if err := e.checkHost(doc); err != nil {
		return observation{}, err
	}
	lap := e.stopwatch()
	rec, m, err := e.models(doc)
	if err != nil {
		return observation{}, fmt.Errorf("apply %s: %w", name, err)
	}
	lap("last record, models (spliced %v)", m.change != nil)
	scope := e.scopeFor(doc, m)
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
	if !sameSlice(model, plain) {
		desired = scope.Desired(model)
	}
	observed = scope.Observed(observed, desired, model)
	realized := scope.Desired(m.realized(observed))
	lap("model")
	return observation{models: m, rec: rec, scope: scope, model: model, desired: desired,
		observed: plan.ResolveSteer(observed, desired, realized)}, nil
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
	opt        plan.Options    // what they were made with
	// otherBuild says the last apply was made by another build of vnet,
	// whose model of the same spec may differ from this one's.
	otherBuild bool
	// plain is desired when observation tells nothing, made once: an
	// apply asks for it before and after it observes.
	plain []plan.Resource
	// change, when set, is how next was spliced from prev: the resources
	// the two can disagree on.
	change *plan.Splice
}

// models reads the record of the last apply (nil before the first) and
// makes the models of both specs, the last one's meanwhile. When the memo
// holds the last spec's model and the change is one of virtual networks,
// the next model is that one with the touched networks modelled again
// (plan.SpliceModel).
func (e *Engine) models(doc *spec.Document) (*store.Record, *modelSet, error) {
	opt := e.scoped(plan.Options{NumCPU: e.numCPU()})
	m := &modelSet{e: e, doc: doc, opt: opt}
	if rec, ok := e.splice(doc, m); ok {
		return rec, m, nil
	}
	var rec *store.Record
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec, err = e.lastRecord(doc.Spec.Name)
		if errors.Is(err, store.ErrNotFound) {
			rec, err = nil, nil
		}
		if rec == nil || sameSpec(rec, doc) {
			return // none, or the last spec is this one: its model is m.next
		}
		if s, model, ok := e.Memo.get(doc.Spec.Name, rec.Spec, opt); ok {
			m.last, m.prev = s, model
		} else if m.last = e.specOf(rec); m.last != nil {
			m.prev = plan.Model(m.last, opt)
		}
		if m.last != nil {
			m.otherBuild = rec.Engine != engineBuild()
		}
	}()
	m.next = plan.Model(doc.Spec, opt)
	<-done
	if err == nil && sameSpec(rec, doc) {
		m.last, m.prev = doc.Spec, m.next
		m.otherBuild = rec.Engine != engineBuild()
	}
	return rec, m, err
}

// splice makes m's models of the memo's model of the last apply, when it
// holds the record's spec and the change is one plan.SpliceModel bounds.
func (e *Engine) splice(doc *spec.Document, m *modelSet) (*store.Record, bool) {
	if e.Memo == nil {
		return nil, false
	}
	rec, err := e.lastRecord(doc.Spec.Name)
	if err != nil || sameSpec(rec, doc) {
		return nil, false
	}
	kept, ok := e.Memo.entry(doc.Spec.Name, rec.Spec, m.opt)
	if !ok {
		return nil, false
	}
	sp, ok := plan.SpliceModel(kept.spec, doc.Spec, kept.model, kept.keys, m.opt)
	if !ok {
		return nil, false
	}
	m.last, m.prev, m.next, m.change = kept.spec, kept.model, sp.Model, &sp
	if sameSlice(sp.Model, kept.model) && len(kept.desired) == len(kept.model) &&
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

// sameSlice reports whether two slices are one: the same elements in
// the same memory.
func sameSlice(a, b []plan.Resource) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// lastRecord reads the record of the last apply, without what was realized
// where the store can (see listedIn).
func (e *Engine) lastRecord(name string) (*store.Record, error) {
	if h, ok := e.Store.(store.HeadReader); ok {
		return h.Head(name)
	}
	return e.Store.Get(name)
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
		next = plan.Model(m.doc.Spec, m.e.scoped(plan.Options{NumCPU: m.e.numCPU(), Teams: teams, PoolCeils: ceils,
			Now: time.Now().UTC().Truncate(time.Second)}))
	}
	desired := m.e.markOwn(m.doc.Spec.Name, next)
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
	return m.e.realizedModel(m.last, observed)
}

// hasSteer reports whether a model steers (teams): what it makes then
// depends on the time (plan.Options.Now).
func hasSteer(rs []plan.Resource) bool { return plan.HasKind(rs, plan.KindSteer) }

// scopeFor returns the namespaces an apply of doc reads and plans, nil for
// all of them. An apply is full when asked (Full), when there is no record
// of a previous one, when the last one never finished (it may have left
// changes anywhere), when the store cannot tell that, and when the change
// reaches beyond VMs (plan.ChangeScope). Otherwise it reads only the
// namespaces of what the change creates, deletes or changes: drift
// elsewhere waits for a full apply.
func (e *Engine) scopeFor(doc *spec.Document, m *modelSet) plan.Scope {
	why := ""
	var scope plan.Scope
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
	}
	if scope.Full() {
		e.tracef("full observation: %s\n", why)
	} else {
		e.tracef("scoped observation: %d namespaces\n", len(scope))
	}
	return scope
}

// observeScope reads the namespaces in scope, all when it is nil or the
// dataplane cannot read only some.
func (e *Engine) observeScope(name string, scope plan.Scope, hints []plan.Resource) ([]plan.Resource, error) {
	if so, ok := e.DP.(ScopedObserver); ok {
		return so.ObserveScope(name, scope, hints)
	}
	return e.DP.Observe(name, hints)
}

// realizedModel is what last, the spec of the last apply, makes of the host
// as it is: with its uplinks up or down, and the agent's assignments and
// splits. It explains the steering programs the kernel holds, so that a
// rollback can make them again.
func (e *Engine) realizedModel(last *spec.Spec, observed []plan.Resource) []plan.Resource {
	if last == nil {
		return nil
	}
	return plan.Model(last, e.scoped(plan.Options{NumCPU: e.numCPU(), Teams: plan.Assignments(observed), PoolCeils: plan.PoolCeils(observed),
		Down: downUplinks(last, observed)}))
}

// lastSpec is the spec of the last apply of doc's infrastructure, or nil;
// doc's own when the record holds the same file.
func (e *Engine) lastSpec(doc *spec.Document) *spec.Spec {
	rec, err := e.lastRecord(doc.Spec.Name)
	if err != nil {
		return nil
	}
	if sameSpec(rec, doc) {
		return doc.Spec
	}
	return e.specOf(rec)
}

// sameSpec reports whether a record (nil: none) holds doc as it was
// applied, byte for byte: then its spec need not be decoded again.
func sameSpec(rec *store.Record, doc *spec.Document) bool {
	return rec != nil && len(doc.Source) > 0 && rec.SpecFile == doc.File && bytes.Equal(rec.Spec, doc.Source)
}

// specOf is a record's spec, or nil.
func (e *Engine) specOf(rec *store.Record) *spec.Spec {
	if rec == nil {
		return nil
	}
	doc, err := e.Specs.Decode(rec.SpecFile, rec.Spec)
	if err != nil {
		return nil
	}
	return doc.Spec
}

// Plan returns what an apply of the spec would do.
func (e *Engine) Plan(doc *spec.Document) (plan.Plan, error) {
	doc, err := e.pinVNIs(doc)
	if err != nil {
		return plan.Plan{}, err
	}
	o, err := e.observe(doc)
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
	if e.mustSweep(name) {
		if _, err := e.Sweep(name); err != nil {
			return Result{}, fmt.Errorf("apply %s: %w", name, err)
		}
		lap("sweep")
	}
	o, err := e.observe(doc)
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
	lap("execute")
	kinds.trace(e.tracef)
	recErr := e.record(doc, o.rec, o.model, !p.Empty())
	if recErr != nil && !errors.Is(recErr, store.ErrWriteKept) {
		// The store holds the record it held before (or cannot tell, and
		// keeps the pending note for the next apply to read everything):
		// the host goes back to what that record names.
		return res, e.rollback(name, o, fmt.Errorf("apply %s: %w", name, recErr), !errors.Is(recErr, store.ErrWriteUnknown))
	}
	// Recorded (or, ErrWriteKept, recorded in state.db alone, which no
	// longer takes the write back): the host stays as the record names it.
	res.Realized = o.model
	var keys []string
	if o.models.change != nil {
		keys = o.models.change.Keys
	}
	e.Memo.put(name, doc.Source, doc.Spec, o.models.opt, o.models.next, keys, o.models.plain)
	// A full apply leaves the host as the record says, also after a killed one.
	if !p.Empty() || o.scope.Full() {
		e.clearPending(name)
	}
	lap("record")
	if recErr != nil {
		return res, fmt.Errorf("apply %s: applied and recorded, but: %w", name, recErr)
	}
	return res, nil
}

// setPending notes, where the store can, that the host begins to change:
// should the apply be killed, the next one reads everything.
func (e *Engine) setPending(name string) error {
	if p, ok := e.Store.(store.Pending); ok {
		return p.SetPending(name)
	}
	return nil
}

// clearPending notes that the host is as the record says. Should it fail,
// the next apply is merely full.
func (e *Engine) clearPending(name string) {
	if p, ok := e.Store.(store.Pending); ok {
		_ = p.ClearPending(name)
	}
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

// record stores the apply; old is the record it read (nil: none), which
// the infrastructure's lock kept current.
func (e *Engine) record(doc *spec.Document, old *store.Record, realized []plan.Resource, changed bool) error {
	gen := 0
	if old != nil {
		gen = old.Generation
	}
	if changed {
		gen++
	}
	err := e.Store.Put(&store.Record{Name: doc.Spec.Name, SpecFile: doc.File, Spec: doc.Source,
		Realized: realized, Generation: gen, AppliedAt: time.Now().UTC(), Engine: engineBuild()})
	if err == nil {
		e.Specs.Add(doc)
	}
	return err
}

// engineBuild names this build of vnet: its module version and, when the
// binary was built from a checkout, the commit and whether it was modified.
var engineBuild = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	build := info.Main.Version
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision", "vcs.modified":
			build += " " + kv.Key + "=" + kv.Value
		}
	}
	return build
})

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
	if err := e.Store.Delete(name); err != nil {
		return p, fmt.Errorf("destroy %s: forget state: %w", name, err)
	}
	e.clearPending(name)
	lap("forget the record")
	return p, nil
}

// mustSweep reports whether an apply sweeps first. A host agent's pass
// for a change does not when the store says the last apply or destroy
// finished: what a killed command leaves, it leaves with that note set
// (setPending), and a sweep reads every namespace entry of the machine,
// tens of thousands at scale. Its full passes sweep, as every other
// apply does.
func (e *Engine) mustSweep(name string) bool {
	p, journaled := e.Store.(store.Pending)
	return e.Host == "" || e.Full || !journaled || p.IsPending(name)
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
	for _, what := range done {
		e.logf("removed what an interrupted command left: %s\n", what)
	}
	if err != nil {
		return done, fmt.Errorf("remove what an interrupted command left: %w", err)
	}
	return done, nil
}

// stopwatch returns a function that traces the time since it was last
// called (or made), under a label.
func (e *Engine) stopwatch() func(format string, args ...any) {
	if e.Trace == nil {
		return Stopwatch(nil)
	}
	return Stopwatch(e.tracef)
}

// Stopwatch returns a function that prints, with printf, the time since it
// was last called (or made) under a label; with a nil printf it prints
// nothing.
func Stopwatch(printf func(format string, args ...any)) func(format string, args ...any) {
	t := time.Now()
	return func(format string, args ...any) {
		if printf == nil {
			return
		}
		now := time.Now()
		printf("%8.1f ms  %s\n", float64(now.Sub(t).Microseconds())/1000, fmt.Sprintf(format, args...))
		t = now
	}
}

func (e *Engine) tracef(format string, args ...any) {
	if e.Trace != nil {
		fmt.Fprintf(e.Trace, format, args...)
	}
}

func (e *Engine) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format, args...)
	}
}
