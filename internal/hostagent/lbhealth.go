package hostagent

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// Health checks: each agent probes the load balancers' backends that run
// on its host (plan.HealthTargets), and publishes what it found in its
// report. Every agent follows every host's reports of the infrastructures
// it realizes and marks down, on its own host's client ports, a backend
// its host found down, or whose host reports nothing (its agent, and most
// likely the host, is gone): new connections go to the others, connections
// made stay (package bpflb). A host's own findings take effect there at
// once, before its report has gone round.

// BackendProber sends a health probe into a backend's vNIC (the dataplane
// does): nil when the backend is healthy.
type BackendProber interface {
	ProbeBackend(p plan.BackendProbe) error
}

// LBCounter reads what a client port's load balancers counted, by backend
// address and port (the dataplane does).
type LBCounter interface {
	LBCounts(ns, port string) ([]status.BackendConns, error)
}

// reportReader is a cluster that lists and follows hosts' reports
// (etcdstore.Store is).
type reportReader interface {
	Reports(infra string) ([]etcdstore.Report, error)
	WatchReports(ctx context.Context, infra string) <-chan struct{}
}

// probeState is one backend's health as its host's probes found it: up or
// down, changed by Rise probes in a row that succeed or Fall that fail. The
// first probe decides at once: a backend is neither held back at start
// nor counted on before anything is known.
type probeState struct {
	known, up bool
	run       int // probes in a row that disagree with up
	since     time.Time
	err       string
}

// record takes a probe's result, and reports whether the state changed.
func (st *probeState) record(err error, rise, fall int, now time.Time) bool {
	ok := err == nil
	switch {
	case !st.known:
		st.known, st.up, st.since = true, ok, now
	case ok == st.up:
		st.run = 0
		if ok {
			st.err = ""
		}
		return false
	default:
		st.run++
		need := rise
		if st.up {
			need = fall
		}
		if st.run < need {
			return false
		}
		st.up, st.run, st.since = ok, 0, now
	}
	st.err = ""
	if err != nil {
		st.err = err.Error()
	}
	return true
}

// healthRun probes one infrastructure's backends on the host.
type healthRun struct {
	targets []plan.HealthTarget
	cancel  context.CancelFunc
	mu      sync.Mutex
	states  map[string]*probeState
	// down is the backends marked down on the host's ports, from every
	// host's findings: Options.LBDown of its applies.
	down map[string]bool
}

// health is what the host's probes found, for its report.
func (h *healthRun) health() []status.BackendHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []status.BackendHealth
	for key, st := range h.states {
		if st.known {
			out = append(out, status.BackendHealth{Key: key, Up: st.up, Since: st.since, Error: st.err})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// healthChanged notes that infra's health needs another look, and wakes
// Run.
func (a *Agent) healthChanged(infra string) {
	a.healthMu.Lock()
	if a.healthDirty == nil {
		a.healthDirty = map[string]bool{}
	}
	a.healthDirty[infra] = true
	a.healthMu.Unlock()
	select {
	case a.wake() <- struct{}{}:
	default:
	}
}

// syncHealth starts, restarts or stops the probes and the following of
// reports for an infrastructure after a pass: the targets are its
// backends on this host with a health check.
func (a *Agent) syncHealth(doc *spec.Document) {
	name := doc.Spec.Name
	prober, ok := a.DP.(BackendProber)
	if !ok || !doc.Spec.HasBalancers() {
		a.stopHealth(name)
		return
	}
	targets := plan.HealthTargets(doc.Spec, a.Host, a.hostNS())
	checked := len(plan.HealthTargets(doc.Spec, "", "")) > 0
	if h, ok := a.healthRuns[name]; ok && reflect.DeepEqual(h.targets, targets) {
		return
	}
	a.stopHealth(name)
	if !checked {
		return
	}
	ctx, cancel := context.WithCancel(a.runContext())
	h := &healthRun{targets: targets, cancel: cancel, states: map[string]*probeState{}}
	if a.healthRuns == nil {
		a.healthRuns = map[string]*healthRun{}
	}
	a.healthRuns[name] = h
	for _, t := range targets {
		go a.probeLoop(ctx, name, h, t, prober)
	}
	if rr, ok := a.Cluster.(reportReader); ok {
		go func() {
			for range rr.WatchReports(ctx, name) {
				a.healthChanged(name)
			}
		}()
	}
}

func (a *Agent) hostNS() string {
	if a.HostNS == "" {
		return plan.CurrentNS
	}
	return a.HostNS
}

// probeLoop probes one backend every interval until ctx ends.
func (a *Agent) probeLoop(ctx context.Context, infra string, h *healthRun, t plan.HealthTarget, prober BackendProber) {
	tick := time.NewTicker(t.Interval)
	defer tick.Stop()
	for {
		err := prober.ProbeBackend(t.Probe)
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		st := h.states[t.Key]
		if st == nil {
			st = &probeState{}
			h.states[t.Key] = st
		}
		changed := st.record(err, t.Rise, t.Fall, time.Now())
		up := st.up
		h.mu.Unlock()
		if changed {
			a.logf("%s: backend %s is %s%s\n", infra, t.Key, map[bool]string{true: "up", false: "down"}[up], errSuffix(err))
			a.healthChanged(infra)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

func (a *Agent) stopHealth(infra string) {
	if h, ok := a.healthRuns[infra]; ok {
		h.cancel()
		delete(a.healthRuns, infra)
	}
}

func (a *Agent) stopAllHealth() {
	for name := range a.healthRuns {
		a.stopHealth(name)
	}
}

// lbDown works out which backends of the infrastructure the host's ports
// mark down: those whose host found them down, or reports nothing. The
// host's own findings are its probes', not its report's, which may not
// have gone round yet.
func (a *Agent) lbDown(s *spec.Spec) map[string]bool {
	h, ok := a.healthRuns[s.Name]
	if !ok {
		return nil
	}
	mine := map[string]bool{} // this host's findings: down
	for _, bh := range h.health() {
		mine[bh.Key] = !bh.Up
	}
	var reports map[string]etcdstore.Report // by host; nil: not read
	if rr, ok := a.Cluster.(reportReader); ok {
		if rs, err := rr.Reports(s.Name); err == nil {
			reports = map[string]etcdstore.Report{}
			for _, r := range rs {
				reports[r.Host] = r
			}
		} else {
			a.logf("%s: read reports for health: %v; backends keep their state\n", s.Name, err)
			return h.down
		}
	}
	down := map[string]bool{}
	for _, t := range plan.HealthTargets(s, "", "") {
		own, probed := mine[t.Key]
		switch {
		case t.Host == a.Host && probed:
			down[t.Key] = own
		case reports == nil:
		default:
			r, ok := reports[t.Host]
			if !ok {
				// Its host is gone; or, for this host's own, the agent
				// has just started: its probes will say.
				down[t.Key] = t.Host != a.Host
				continue
			}
			for _, bh := range r.Health {
				if bh.Key == t.Key {
					down[t.Key] = !bh.Up
				}
			}
		}
	}
	maps.DeleteFunc(down, func(_ string, d bool) bool { return !d })
	return down
}

// balancerHealth is, for an apply of an infrastructure whose health is
// followed, the backends its ports mark down, kept as the ones marked;
// nil for one whose health is not.
func (a *Agent) balancerHealth(s *spec.Spec) map[string]bool {
	h, ok := a.healthRuns[s.Name]
	if !ok {
		return nil
	}
	down := a.lbDown(s)
	if !maps.Equal(down, h.down) {
		a.logf("%s: backends down: %s\n", s.Name, keysText(down))
	}
	h.down = down
	return down
}

// onHealth takes each infrastructure whose health may have changed: its
// report gets the host's findings, and when the backends marked down
// change, a pass applies it with them.
func (a *Agent) onHealth() {
	a.healthMu.Lock()
	dirty := a.healthDirty
	a.healthDirty = nil
	a.healthMu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(dirty)) {
		h, ok := a.healthRuns[name]
		l, loaded := a.loaded[name]
		if !ok || !loaded {
			continue
		}
		if last, ok := a.last[name]; ok && !reflect.DeepEqual(last.Health, h.health()) {
			last.Health, last.At = h.health(), time.Time{}
			a.publish(name, last)
		}
		if maps.Equal(a.lbDown(l.doc.Spec), h.down) {
			continue
		}
		n, err := a.apply(l.doc, false)
		var errs []string
		if err != nil {
			errs = []string{err.Error()}
		}
		if last, ok := a.last[name]; ok {
			a.report(name, last.Generation, n, errs)
		}
	}
}

func keysText(m map[string]bool) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// balancerConns reads what the infrastructure's client ports on the host
// sent each backend, for its report: nothing when it has no load
// balancer, or the dataplane counts nothing.
func (a *Agent) balancerConns(infra string) []status.BackendConns {
	c, ok := a.DP.(LBCounter)
	l, loaded := a.loaded[infra]
	if !ok || !loaded || !l.doc.Spec.HasBalancers() {
		return nil
	}
	return plan.SumBalancerConns(l.doc.Spec, a.Host, a.hostNS(), c.LBCounts)
}

// wake is the channel Run waits on for health to look at, made on first
// use.
func (a *Agent) wake() chan struct{} {
	a.healthMu.Lock()
	defer a.healthMu.Unlock()
	if a.healthWake == nil {
		a.healthWake = make(chan struct{}, 1)
	}
	return a.healthWake
}
