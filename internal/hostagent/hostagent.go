// Package hostagent is the per-host agent of a cluster: it watches the
// infrastructures stored in etcd, realizes on its host the part of each
// that the spec places there (plan.Options.Host), keeps a local record of
// what it realized, and reports under a lease what it did.
package hostagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
	"github.com/vnet-project/vnet/internal/teamagent"
)

// DefaultInterval is how often the agent reconciles without a change in
// etcd, to repair what was changed behind its back.
const DefaultInterval = 30 * time.Second

// DefaultCounterInterval is how often the agent reads its host's port
// security counters between passes, and reports them again if they moved.
const DefaultCounterInterval = 5 * time.Second

// Cluster is what the agent needs of the shared store.
type Cluster interface {
	List() ([]*store.Record, error)
	Reporter(infra, host string, ttl time.Duration) (*etcdstore.Reporter, error)
	WatchInfra(ctx context.Context) <-chan struct{}
	// ClaimHost makes this agent the one of host, or fails with
	// etcdstore.ErrHostClaimed naming the agent that is.
	ClaimHost(host string, ttl time.Duration) (*etcdstore.HostClaim, error)
}

// Agent realizes one host's part of every infrastructure in the cluster.
type Agent struct {
	Cluster Cluster
	Local   store.Store // what this host realized, by infrastructure
	DP      reconcile.Dataplane
	Host    string
	HostNS  string // where host-level objects live; "" for the agent's own namespace
	// UnderlayMTU finds the MTU of the link that holds an underlay
	// address, or fails when the machine has no such address.
	UnderlayMTU func(addr string) (int, error)
	Interval    time.Duration // DefaultInterval when zero
	// CounterInterval is how often the port security counters in the
	// reports are refreshed between passes (DefaultCounterInterval when
	// zero): a report is rewritten only when they changed.
	CounterInterval time.Duration
	TTL             time.Duration // of the reports; etcdstore.DefaultReportTTL when zero
	Log             io.Writer
	// Trace, when set, receives where each pass's time goes: reading etcd,
	// loading each spec, the engine's phases (reconcile.Engine.Trace) and
	// the report.
	Trace io.Writer

	// TeamDP, when set, runs the lab's teaming agent (package teamagent) for
	// each infrastructure that teams real uplinks on this host: failover
	// on carrier loss, LBT, team-wide limit splits. Nil: none runs.
	TeamDP teamagent.Dataplane

	reporters map[string]*etcdstore.Reporter
	last      map[string]etcdstore.Report // what each reporter last published
	secRes    map[string][]plan.Resource  // each infrastructure's realized port policies
	// standing is how many objects stand for each infrastructure on the
	// host, as its last apply recorded them: a pass need not read the
	// local record back to report it.
	standing map[string]int
	teaming  map[string]*teamRun // by infrastructure
	// healthRuns probe each infrastructure's backends on the host
	// (lbhealth.go); healthDirty are those whose health changed since
	// Run last looked, and healthWake wakes it.
	healthRuns  map[string]*healthRun
	healthMu    sync.Mutex
	healthDirty map[string]bool
	healthWake  chan struct{}
	ctx         context.Context // of Run, which the teaming agents run under
	logMu       sync.Mutex
	// loaded is each infrastructure's spec as last loaded, and memo its
	// model: a pass over a spec that did not change, or changed in one
	// network, need not decode and model all of it again.
	loaded map[string]loadedSpec
	memo   reconcile.Memo
}

type loadedSpec struct {
	src, encoded []byte
	doc          *spec.Document
}

// load is the spec a record holds, as a host realizes it (see
// store.Record.Valid: one that `vnet apply` would accept, and the one
// vnet status shows), or the document it made of the same bytes before.
func (a *Agent) load(rec *store.Record) (*spec.Document, error) {
	if l, ok := a.loaded[rec.Name]; ok && rec.Damage == nil && l.doc.File == rec.SpecFile &&
		bytes.Equal(l.src, rec.Spec) && bytes.Equal(l.encoded, rec.SpecEncoded) {
		return l.doc, nil
	}
	doc, err := rec.Valid(nil)
	if err != nil {
		delete(a.loaded, rec.Name)
		return nil, err
	}
	if a.loaded == nil {
		a.loaded = map[string]loadedSpec{}
	}
	a.loaded[rec.Name] = loadedSpec{src: rec.Spec, encoded: rec.SpecEncoded, doc: doc}
	return doc, nil
}

// Run reconciles now, on every change in etcd and every Interval, until
// ctx ends; then it withdraws its reports. The kernel objects stay: a
// stopped or killed agent changes nothing on its host, and the next one
// finds them as they are.
func (a *Agent) Run(ctx context.Context) error {
	interval := a.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	a.ctx = ctx
	claim, err := a.claim(ctx)
	if err != nil || claim == nil && ctx.Err() != nil {
		return err
	}
	defer claim.Release()
	watch := a.Cluster.WatchInfra(ctx)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	counterInterval := a.CounterInterval
	if counterInterval <= 0 {
		counterInterval = DefaultCounterInterval
	}
	counters := time.NewTicker(counterInterval)
	defer counters.Stop()
	defer a.closeReporters()
	defer a.stopAllTeaming()
	defer a.stopAllHealth()
	lost, reclaim := claim.Lost(), (<-chan time.Time)(nil)
	a.Reconcile()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-watch:
			if !ok {
				return nil
			}
			// A change in etcd: read only what it touches.
			a.reconcile(false)
		case <-tick.C:
			// Every interval, read everything and repair drift.
			a.Reconcile()
		case <-counters.C:
			a.RefreshCounters()
		case <-a.wake():
			a.onHealth()
		case <-lost:
			// Cut off from etcd for longer than the claim's lease.
			if lost, reclaim, err = a.renew(claim); err != nil {
				return err
			}
		case <-reclaim:
			if lost, reclaim, err = a.renew(claim); err != nil {
				return err
			}
		}
	}
}

// renew claims the host again after its claim was lost: it is this
// agent's again unless another agent took it meanwhile, which ends this
// one. It returns the claim's new Lost, or, while etcd does not answer,
// when to try again; meanwhile the agent goes on as it was.
func (a *Agent) renew(claim *etcdstore.HostClaim) (<-chan struct{}, <-chan time.Time, error) {
	err := claim.Renew()
	switch {
	case err == nil:
		return claim.Lost(), nil, nil
	case errors.Is(err, etcdstore.ErrHostClaimed):
		return nil, nil, err
	}
	a.logf("claim host %s again: %v; trying again\n", a.Host, err)
	return nil, time.After(time.Second), nil
}

// claim claims the host for this agent, trying again each second while
// etcd does not answer; it fails at once when another agent holds it.
// A nil claim with no error means ctx ended first.
func (a *Agent) claim(ctx context.Context) (*etcdstore.HostClaim, error) {
	ttl := a.TTL
	if ttl <= 0 {
		ttl = etcdstore.DefaultReportTTL
	}
	for {
		claim, err := a.Cluster.ClaimHost(a.Host, ttl)
		if err == nil || !errors.Is(err, etcdstore.ErrUnavailable) {
			return claim, err
		}
		a.logf("claim host %s: %v; trying again\n", a.Host, err)
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(time.Second):
		}
	}
}

// Reconcile converges the host to what etcd holds: each infrastructure that
// places something on the host is applied and reported, each this host
// realized that etcd no longer places here is destroyed. When etcd cannot
// be read, nothing changes. It reads every namespace of the host's
// infrastructures, and so repairs drift.
func (a *Agent) Reconcile() { a.reconcile(true) }

// reconcile is Reconcile; unless full, each apply reads only what the
// change from its last apply on this host touches.
func (a *Agent) reconcile(full bool) {
	lap := a.stopwatch()
	a.tracef("pass (full %v)\n", full)
	recs, err := a.Cluster.List()
	if err != nil {
		a.logf("read infrastructures: %v; nothing changed\n", err)
		return
	}
	lap("read %d infrastructures from etcd", len(recs))
	here := map[string]bool{}
	for _, rec := range recs {
		doc, err := a.load(rec)
		lap("%s: load the spec (%d bytes)", rec.Name, len(rec.Spec))
		if err != nil {
			// This infrastructure's alone: what stands of it stays until a
			// record that loads says otherwise, and the others go on.
			a.logf("%s: stored spec does not load: %v; what stands on this host is left as it is\n", rec.Name, err)
			if a.recorded(rec.Name) {
				here[rec.Name] = true
				gen := rec.Generation
				if last, ok := a.last[rec.Name]; ok && rec.Damage != nil {
					gen = last.Generation // a damaged record has none: the one realized
				}
				a.report(rec.Name, gen, a.realized(rec.Name), []string{err.Error()})
			}
			continue
		}
		if !plan.PlacesOn(doc.Spec, a.Host) {
			continue
		}
		here[rec.Name] = true
		n, err := a.apply(doc, full)
		lap("%s: apply", rec.Name)
		var errs []string
		if err != nil {
			errs = []string{err.Error()}
		}
		a.report(rec.Name, rec.Generation, n, errs)
		lap("%s: report", rec.Name)
	}
	a.removeGone(here)
	lap("remove what is gone")
}

// stopwatch returns a function that traces the time since it was last
// called (or made), under a label.
func (a *Agent) stopwatch() func(format string, args ...any) {
	if a.Trace == nil {
		return reconcile.Stopwatch(nil)
	}
	return reconcile.Stopwatch(a.tracef)
}

func (a *Agent) tracef(format string, args ...any) {
	if a.Trace != nil {
		fmt.Fprintf(a.Trace, time.Now().Format("15:04:05.000 ")+format, args...)
	}
}

// apply realizes one infrastructure's part and returns how many objects
// stand for it on the host.
func (a *Agent) apply(doc *spec.Document, full bool) (int, error) {
	name := doc.Spec.Name
	if h, _ := doc.Spec.Host(a.Host); h.Underlay != "" && a.UnderlayMTU != nil {
		mtu, err := a.UnderlayMTU(h.Underlay)
		if err != nil {
			return a.realized(name), fmt.Errorf("host %s: %w", a.Host, err)
		}
		if err := plan.CheckHostMTU(doc.Spec, a.Host, mtu); err != nil {
			return a.realized(name), err
		}
	}
	var log bytes.Buffer
	eng := a.engine(&log)
	start := time.Now()
	eng.Full = full
	eng.UplinksDown = a.uplinksDown(doc.Spec)
	a.syncHealth(doc)
	eng.LBDown = a.balancerHealth(doc.Spec)
	res, err := eng.Apply(doc)
	if err == nil {
		a.syncTeaming(a.runContext(), doc, res.Executed > 0)
	}
	switch {
	case err != nil:
		a.logf("%s: apply failed:\n%s", name, log.String())
	case res.Executed > 0:
		a.logf("%s: applied %d changes:\n%s", name, res.Executed, log.String())
	}
	if err != nil || res.Executed > 0 {
		a.event(events.Event{Action: events.Apply, Infra: name, OK: err == nil, Changes: res.Executed,
			Seconds: time.Since(start).Seconds(), Error: errText(err)})
	}
	if res.Realized != nil {
		// Recorded, even when the apply failed after (its good copy could
		// not follow the local record).
		return a.keepRealized(name, res.Realized), err
	}
	return a.realized(name), err
}

func (a *Agent) engine(log io.Writer) *reconcile.Engine {
	return &reconcile.Engine{DP: a.DP, Store: a.Local, Log: log, Host: a.Host, HostNS: a.HostNS, Trace: a.Trace, Memo: &a.memo}
}

// realized counts the objects that stand for an infrastructure on the host
// as its last apply recorded them, read from the local record when no
// apply of this agent recorded it yet (see keepRealized).
func (a *Agent) realized(name string) int {
	if n, ok := a.standing[name]; ok {
		return n
	}
	rec, err := a.Local.Get(name)
	if err != nil {
		delete(a.secRes, name)
		return 0
	}
	return a.keepRealized(name, rec.Realized)
}

// keepRealized counts what an apply recorded as standing for an
// infrastructure, and keeps its port policies for the counters in its
// reports.
func (a *Agent) keepRealized(name string, recorded []plan.Resource) int {
	var sec []plan.Resource
	for i := range recorded {
		if k := recorded[i].Kind; k == plan.KindPortSec || k == plan.KindPortBPF {
			sec = append(sec, recorded[i])
		}
	}
	if a.secRes == nil {
		a.secRes = map[string][]plan.Resource{}
	}
	a.secRes[name] = sec
	if a.standing == nil {
		a.standing = map[string]int{}
	}
	a.standing[name] = len(recorded)
	return len(recorded)
}

// security reads what the firewall rules of the infrastructure's ports on
// the host counted, compacted for a report; nothing when the host has no
// port policy of it or the dataplane counts nothing.
func (a *Agent) security(infra string) ([]status.PortSecurity, int, error) {
	fc, ok := a.DP.(reconcile.FirewallCounting)
	l, loaded := a.loaded[infra]
	if !ok || !loaded || len(a.secRes[infra]) == 0 {
		return nil, 0, nil
	}
	ports, err := reconcile.HostSecurity(fc, l.doc.Spec, a.Host, a.secRes[infra])
	if err != nil {
		return nil, 0, err
	}
	kept, omitted := etcdstore.CompactSecurity(ports, etcdstore.MaxReportedPorts)
	return kept, omitted, nil
}

// RefreshCounters reports again, with the port security counters as they
// are now, each infrastructure whose counters changed since its last
// report. Between passes this is all that changes in a report: a quiet
// host does not write to etcd.
func (a *Agent) RefreshCounters() {
	names := make([]string, 0, len(a.last))
	for name := range a.last {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		last := a.last[name]
		sec, omitted, err := a.security(name)
		if err != nil {
			a.logf("%s: read port security counters: %v\n", name, err)
			continue
		}
		conns := a.balancerConns(name)
		if omitted == last.SecurityOmitted && reflect.DeepEqual(sec, last.Security) && reflect.DeepEqual(conns, last.Conns) {
			continue
		}
		last.Security, last.SecurityOmitted, last.Conns, last.At = sec, omitted, conns, time.Time{}
		a.publish(name, last)
	}
}

// removeGone destroys what the host realized of infrastructures etcd no
// longer places on it, and withdraws their reports. A destroy that fails
// leaves the local record, so the next pass tries again; until one
// succeeds the infrastructure's report says the removal failed, so that
// a destroy that waits, and vnet status, see the host still holds it.
func (a *Agent) removeGone(here map[string]bool) {
	locals, err := a.localNames()
	if err != nil {
		a.logf("read local records: %v\n", err)
		return
	}
	failed := map[string]bool{}
	for _, name := range locals {
		if here[name] {
			continue
		}
		a.stopTeaming(name)
		a.stopHealth(name)
		var log bytes.Buffer
		p, err := a.engine(&log).Destroy(name)
		if err != nil {
			a.logf("%s: remove: %v\n%s", name, err, log.String())
			a.reportRemovalFailed(name, err)
			failed[name] = true
			continue
		}
		a.memo.Forget(name)
		delete(a.loaded, name)
		delete(a.standing, name)
		a.logf("%s: no longer placed on %s; removed %d objects\n%s", name, a.Host, len(p.Actions), log.String())
		a.event(events.Event{Action: events.Destroy, Infra: name, OK: true, Changes: len(p.Actions)})
		a.closeReporter(name)
	}
	for name := range a.reporters {
		if !here[name] && !failed[name] {
			a.closeReporter(name)
		}
	}
}

// reportRemovalFailed reports that removing the host's part of infra
// failed with err. The event is kept once per distinct failure, not at
// every pass that meets it again.
func (a *Agent) reportRemovalFailed(infra string, err error) {
	errs := []string{err.Error()}
	last, had := a.last[infra]
	if !had || !last.Removing || !slices.Equal(last.Errors, errs) {
		a.event(events.Event{Action: events.Destroy, Infra: infra, OK: false, Error: err.Error()})
	}
	r := etcdstore.Report{Generation: last.Generation, Resources: a.realized(infra), Errors: errs, Removing: true}
	// The port counters are of objects on their way out: none are read
	// for the report, nor refreshed between passes.
	delete(a.secRes, infra)
	a.publish(infra, r)
}

// recorded reports whether the local store records the infrastructure,
// reading its record without what was realized where the store can.
func (a *Agent) recorded(name string) bool {
	var rec *store.Record
	var err error
	if h, ok := a.Local.(store.HeadReader); ok {
		rec, err = h.Head(name)
	} else {
		rec, err = a.Local.Get(name)
	}
	return err == nil && rec != nil
}

// namer is a store that lists its records' names without reading them
// (store.Bolt does).
type namer interface {
	Names() ([]string, error)
}

// localNames are the infrastructures the local store records, by name.
func (a *Agent) localNames() ([]string, error) {
	if n, ok := a.Local.(namer); ok {
		names, err := n.Names()
		sort.Strings(names)
		return names, err
	}
	recs, err := a.Local.List()
	names := make([]string, 0, len(recs))
	for _, r := range recs {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	return names, err
}

// report publishes what a pass left standing. The port security counters
// are the last report's: reading them dumps every port's rules on the
// host, which at thousands of ports would hold the report back longer
// than the pass took, so they follow within CounterInterval
// (RefreshCounters). Only an infrastructure's first report reads them.
func (a *Agent) report(infra string, gen, resources int, errs []string) {
	r := etcdstore.Report{Generation: gen, Resources: resources, Errors: errs}
	if h, ok := a.healthRuns[infra]; ok {
		r.Health = h.health()
	}
	if last, ok := a.last[infra]; ok {
		r.Security, r.SecurityOmitted, r.Conns = last.Security, last.SecurityOmitted, last.Conns
		a.publish(infra, r)
		return
	}
	var err error
	if r.Security, r.SecurityOmitted, err = a.security(infra); err != nil {
		// The standing matters more than the counters: report it without.
		a.logf("%s: read port security counters: %v\n", infra, err)
	}
	a.publish(infra, r)
}

// publish hands r to the infrastructure's reporter, made on first use.
func (a *Agent) publish(infra string, r etcdstore.Report) {
	if a.reporters == nil {
		a.reporters = map[string]*etcdstore.Reporter{}
		a.last = map[string]etcdstore.Report{}
	}
	rp, ok := a.reporters[infra]
	if !ok {
		var err error
		if rp, err = a.Cluster.Reporter(infra, a.Host, a.TTL); err != nil {
			a.logf("%s: report: %v\n", infra, err)
			return
		}
		a.reporters[infra] = rp
	}
	a.last[infra] = r
	err := rp.Report(r)
	if err != nil && !errors.Is(err, etcdstore.ErrReporterClosed) {
		// The reporter publishes again by itself once etcd answers.
		a.logf("%s: report: %v\n", infra, err)
	}
}

func (a *Agent) closeReporter(infra string) {
	if rp, ok := a.reporters[infra]; ok {
		if err := rp.Close(); err != nil {
			a.logf("%s: withdraw report: %v\n", infra, err)
		}
		delete(a.reporters, infra)
		delete(a.last, infra)
		delete(a.secRes, infra)
	}
}

func (a *Agent) closeReporters() {
	for name := range a.reporters {
		a.closeReporter(name)
	}
}

// eventRecorder is a cluster that keeps events (etcdstore.Store does).
type eventRecorder interface {
	AppendEvent(ev events.Event) error
}

// event keeps what the agent changed on its host in the cluster's event
// list, when the cluster keeps one; etcd out of reach loses the event, not
// the change.
func (a *Agent) event(ev events.Event) {
	rec, ok := a.Cluster.(eventRecorder)
	if !ok {
		return
	}
	ev.Time, ev.Host, ev.Who = time.Now().UTC(), a.Host, "agent"
	if err := rec.AppendEvent(ev); err != nil {
		a.logf("%s: event: %v\n", ev.Infra, err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (a *Agent) logf(format string, args ...any) {
	if a.Log != nil {
		a.logMu.Lock()
		defer a.logMu.Unlock()
		fmt.Fprintf(a.Log, time.Now().Format("15:04:05.000 ")+format, args...)
	}
}

// runContext is Run's context, or the background's for a Reconcile
// called without Run.
func (a *Agent) runContext() context.Context {
	if a.ctx == nil {
		return context.Background()
	}
	return a.ctx
}

// ErrRunning is returned by Claim when another agent uses the directory.
var ErrRunning = errors.New("another host agent uses this state directory")
