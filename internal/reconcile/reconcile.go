// Package reconcile drives an apply or a destroy: it observes the host,
// plans with package plan, executes through a Dataplane, and on any failure
// converges the host back to what it observed before.
package reconcile

import (
	"errors"
	"fmt"
	"io"
	"runtime"
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

// Sweeper is a dataplane that can find and remove what a command killed
// halfway left of an infrastructure where no observation sees it (an
// unfinished namespace entry, an emptied cgroup directory).
type Sweeper interface {
	Sweep(infra string) ([]string, error)
}

// BatchDeleter is a dataplane that carries out a destroy's deletes faster
// all together than one by one, with the same result; it returns an error
// per action that failed.
type BatchDeleter interface {
	DeleteAll(actions []plan.Action) []error
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
	// Host and HostNS, when Host is set, realize only that host's part of
	// each spec, as its agent does (plan.Options.Host).
	Host, HostNS string

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
	return o
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
	links, namespaces := plan.HostNames(s, e.Host)
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
	speeds, err := plan.CheckHostFacts(doc, e.Host, facts)
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
	if last == nil {
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

// observe reads what of the host is this store's, and the desired state in
// the light of it. It fails when the spec would meet namespaces this store
// did not make (see claim).
func (e *Engine) observe(doc *spec.Document) (desired, observed []plan.Resource, err error) {
	name := doc.Spec.Name
	if err := e.checkHost(doc); err != nil {
		return nil, nil, err
	}
	last := e.lastSpec(name)
	observed, err = e.DP.Observe(name, e.model(doc, nil, last))
	if err != nil {
		return nil, nil, fmt.Errorf("observe %s: %w", name, err)
	}
	observed, strangers := e.claim(name, observed, nil)
	desired = e.model(doc, observed, last)
	if err := refuseStrangers(name, strangers, desired); err != nil {
		return nil, nil, err
	}
	for _, s := range strangers {
		e.logf("left %s\n", s)
	}
	return desired, plan.ResolveSteer(observed, desired, e.realizedModel(last, observed)), nil
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

// lastSpec is the spec of the last apply, or nil.
func (e *Engine) lastSpec(name string) *spec.Spec {
	rec, err := e.Store.Get(name)
	if err != nil {
		return nil
	}
	doc, err := spec.Decode(rec.SpecFile, rec.Spec)
	if err != nil {
		return nil
	}
	return doc.Spec
}

// Plan returns what an apply of the spec would do.
func (e *Engine) Plan(doc *spec.Document) (plan.Plan, error) {
	desired, observed, err := e.observe(doc)
	if err != nil {
		return plan.Plan{}, err
	}
	return plan.Diff(desired, observed), nil
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
	if _, err := e.Sweep(name); err != nil {
		return Result{}, fmt.Errorf("apply %s: %w", name, err)
	}
	desired, before, err := e.observe(doc)
	if err != nil {
		return Result{}, err
	}
	p := plan.Diff(desired, before)
	res := Result{Plan: p}
	e.logf("%s", p)
	if !p.Empty() {
		if err := e.DP.Probe(desired); err != nil {
			return res, fmt.Errorf("apply %s: %w", name, err)
		}
	}
	for i, a := range p.Actions {
		err := e.step(i, a)
		if err == nil {
			res.Executed++
			continue
		}
		return res, e.rollback(name, before, desired, fmt.Errorf("apply %s: step %d of %d: %w", name, i+1, len(p.Actions), err))
	}
	if err := e.record(doc, desired, !p.Empty()); err != nil {
		return res, e.rollback(name, before, desired, fmt.Errorf("apply %s: %w", name, err))
	}
	return res, nil
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
func (e *Engine) rollback(name string, before, desired []plan.Resource, cause error) error {
	e.logf("apply failed: %v\nrolling back\n", cause)
	now, err := e.DP.Observe(name, append(append([]plan.Resource{}, before...), desired...))
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
	now, _ = e.claim(name, now, making)
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
	return fmt.Errorf("%w (%w)", cause, ErrRolledBack)
}

func (e *Engine) record(doc *spec.Document, realized []plan.Resource, changed bool) error {
	gen := 0
	if old, err := e.Store.Get(doc.Spec.Name); err == nil {
		gen = old.Generation
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if changed {
		gen++
	}
	return e.Store.Put(&store.Record{Name: doc.Spec.Name, SpecFile: doc.File, Spec: doc.Source,
		Realized: realized, Generation: gen, AppliedAt: time.Now().UTC()})
}

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
	if _, err := e.Sweep(name); err != nil {
		return plan.Plan{}, fmt.Errorf("destroy %s: %w", name, err)
	}
	observed, err := e.DP.Observe(name, nil)
	if err != nil {
		return plan.Plan{}, fmt.Errorf("observe %s: %w", name, err)
	}
	mine, strangers := e.claim(name, observed, nil)
	for _, s := range strangers {
		e.logf("left %s\n", s)
	}
	p := plan.Diff(nil, mine)
	var errs []error
	if bd, ok := e.DP.(BatchDeleter); ok {
		errs = bd.DeleteAll(p.Actions)
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
	if err := e.Store.Delete(name); err != nil {
		return p, fmt.Errorf("destroy %s: forget state: %w", name, err)
	}
	return p, nil
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

func (e *Engine) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format, args...)
	}
}
