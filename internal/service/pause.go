package service

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// A pause stops an infrastructure's traffic at its switches while
// everything stays configured: the paused ports' switch-side ends go down
// (plan.Paused), their counters, addresses, policies and forwarding
// entries stay. What is paused is kept in the record beside the spec, in
// the state directory or in etcd, so that it outlives the agents and an
// apply of the same spec, and the hosts' agents realize it like any
// change. It changes no spec: the generation stays, and its history entry
// (history.Pause, history.Resume) holds no spec, so that a rollback or a
// diff between generations goes by the specs alone.

// PauseRequest says what to pause or resume: at most one of VM, Network
// and PortGroup. With none, a pause pauses every port of the
// infrastructure, and a resume resumes everything paused.
type PauseRequest struct {
	Infra                  string
	VM, Network, PortGroup string
	// Wait, over etcd, waits that long at most for every host of the
	// infrastructure to report the pause realized, telling Progress of
	// each host that does.
	Wait     time.Duration
	Progress func(WaitEvent)
	// Log receives the plan as the change goes.
	Log io.Writer
	By  Actor
}

// target is the selector the request names (plan.Paused), "" for none.
func (r PauseRequest) target() (string, error) {
	var set []string
	if r.VM != "" {
		set = append(set, plan.PauseVM(r.VM))
	}
	if r.Network != "" {
		set = append(set, plan.PauseNetwork(r.Network))
	}
	if r.PortGroup != "" {
		set = append(set, plan.PausePortGroup(r.PortGroup))
	}
	switch len(set) {
	case 0:
		return "", nil
	case 1:
		return set[0], nil
	}
	return "", Invalid("pause or resume one VM, network or port group at a time (or the whole infrastructure)")
}

// PauseResult says what a pause or resume did.
type PauseResult struct {
	Infra string `json:"infra"`
	// What is what was asked for, as people say it ("VM web1", "every
	// port", "everything paused").
	What string `json:"what"`
	// Changed is false when it was paused (or not paused) already.
	Changed bool `json:"changed"`
	// Paused is what stays paused after it (plan.Paused's selectors).
	Paused []string `json:"paused"`
	// Executed counts the kernel changes made on this machine; over etcd
	// none (the hosts' agents make them).
	Executed int `json:"executed"`
	// Generation is the infrastructure's, which a pause keeps.
	Generation int `json:"generation"`
	// Seconds is how long it took, to the last change (over etcd, with
	// Wait, to the last host's report).
	Seconds float64 `json:"seconds"`
}

// nextPaused is what is paused after a pause (or resume) of target.
func nextPaused(current plan.Paused, target string, pause bool) plan.Paused {
	switch {
	case pause && target == "":
		return current.With(plan.PauseAll)
	case pause:
		return current.With(target)
	case target == "":
		return nil
	}
	return current.Without(target)
}

// pauseWhat says what a request asked for.
func pauseWhat(target string, pause bool) string {
	if target == "" && !pause {
		return "everything paused"
	}
	if target == "" {
		target = plan.PauseAll
	}
	return plan.Describe(target)
}

// checkTarget refuses a target the spec has nothing of.
func checkTarget(s *spec.Spec, target string) error {
	if target == "" {
		return nil
	}
	if err := (plan.Paused{target}).Check(s); err != nil {
		return tagged{ErrInvalid, fmt.Sprintf("%s has no %v", s.Name, err)}
	}
	return nil
}

// Pause stops the traffic of a VM's vNICs, of a network's or a port
// group's ports, or of every port, on this machine: under the
// infrastructure's lock, the applied spec is applied again with the
// record's pauses and this one.
func (l *Local) Pause(ctx context.Context, r PauseRequest) (*PauseResult, error) {
	return l.pausing(ctx, r, true)
}

// Resume starts again what Pause stopped: the same target, or with none
// everything paused.
func (l *Local) Resume(ctx context.Context, r PauseRequest) (*PauseResult, error) {
	return l.pausing(ctx, r, false)
}

func (l *Local) pausing(_ context.Context, r PauseRequest, pause bool) (*PauseResult, error) {
	verb := pauseVerb(pause)
	target, err := r.target()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res := &PauseResult{Infra: r.Infra, What: pauseWhat(target, pause)}
	err = l.changing(r.Infra, verb+" ", r.Log, func(eng *reconcile.Engine, st *store.Bolt) error {
		rec, err := recordHead(st, r.Infra)
		if err != nil {
			return err
		}
		doc, err := l.docOf(rec)
		if err != nil {
			return err
		}
		if err := checkTarget(doc.Spec, target); err != nil {
			return err
		}
		next := nextPaused(rec.Paused, target, pause)
		res.Changed = !next.Equal(rec.Paused)
		eng.Paused = &next
		applied, err := eng.Apply(doc)
		res.Executed = applied.Executed
		res.Seconds = time.Since(start).Seconds()
		res.Paused, res.Generation = nonNil(next), rec.Generation
		if err == nil && res.Changed {
			e := pauseEntry(r.By, res, pause)
			if _, err := st.AppendHistory(e); err != nil && r.Log != nil {
				fmt.Fprintf(r.Log, "warning: %s was %s, but its history could not keep the change: %v\n", r.Infra, pausedWord(pause), err)
			}
		}
		return err
	})
	note(l, r.By.event(verb, r.Infra, start, res.Executed, err), r.Log)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// pauseEntry is the history entry of a pause or resume that changed what
// is paused: the generation it kept, no spec of its own (it changed none),
// and what it did ("paused VM web1", "resumed everything paused").
func pauseEntry(by Actor, res *PauseResult, pause bool) history.Entry {
	verb := history.Resume
	if pause {
		verb = history.Pause
	}
	e := entryOf(by, change{verb: verb}, res.Infra, res.Generation)
	e.Summary = pausedWord(pause) + " " + res.What
	return e
}

func pausedWord(pause bool) string {
	if pause {
		return "paused"
	}
	return "resumed"
}

func pauseVerb(pause bool) string {
	if pause {
		return events.Pause
	}
	return events.Resume
}

func nonNil(p plan.Paused) []string {
	if p == nil {
		return []string{}
	}
	return p
}

// Pause stores in etcd that the target is paused, keeping the generation;
// each host's agent realizes it. With Wait it then waits for every host
// to report it realized.
func (c *Cluster) Pause(ctx context.Context, r PauseRequest) (*PauseResult, error) {
	return c.pausing(ctx, r, true)
}

// Resume stores in etcd that the target is no longer paused (with none,
// nothing), as Pause does.
func (c *Cluster) Resume(ctx context.Context, r PauseRequest) (*PauseResult, error) {
	return c.pausing(ctx, r, false)
}

func (c *Cluster) pausing(ctx context.Context, r PauseRequest, pause bool) (*PauseResult, error) {
	verb := pauseVerb(pause)
	target, err := r.target()
	if err != nil {
		return nil, err
	}
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := c.storePause(st, r.By, r.Infra, target, pause)
	note(c, r.By.event(verb, r.Infra, start, 0, err), r.Log)
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	if r.Wait <= 0 {
		return res, nil
	}
	err = c.waitPaused(ctx, st, r, res, verb, start)
	res.Seconds = time.Since(start).Seconds()
	return res, err
}

// storePause writes the record with what is paused after the change, and
// its history entry in the same transaction, unless another change got
// there first.
func (c *Cluster) storePause(st ClusterStore, by Actor, name, target string, pause bool) (*PauseResult, error) {
	c.change.Lock()
	defer c.change.Unlock()
	rec, rev, err := st.GetRev(name)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", pauseVerb(pause), name, err)
	}
	doc, err := c.docOf(rec)
	if err != nil {
		return nil, err
	}
	if err := checkTarget(doc.Spec, target); err != nil {
		return nil, err
	}
	next := nextPaused(rec.Paused, target, pause)
	res := &PauseResult{Infra: name, What: pauseWhat(target, pause), Changed: !next.Equal(rec.Paused), Paused: nonNil(next),
		Generation: rec.Generation}
	if !res.Changed {
		return res, nil
	}
	changed := *rec
	changed.Paused = next.Normal()
	if _, _, err = st.PutIfRecorded(&changed, rev, pauseEntry(by, res, pause)); err != nil {
		return nil, fmt.Errorf("%s %s: %w", pauseVerb(pause), name, err)
	}
	return res, nil
}

// waitPaused waits, at most r.Wait from start, until every host of the
// infrastructure reports its generation current with what res says is
// paused. Reports carry no revision of the record, so it reads them again
// every pauseWaitPoll.
func (c *Cluster) waitPaused(ctx context.Context, st ClusterStore, r PauseRequest, res *PauseResult, verb string, start time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, start.Add(r.Wait))
	defer cancel()
	doc, err := c.Spec(ctx, r.Infra)
	if err != nil {
		return err
	}
	hosts := hostNames(doc.Spec)
	want := plan.Paused(res.Paused)
	told := map[string]bool{}
	tick := time.NewTicker(pauseWaitPoll)
	defer tick.Stop()
	for {
		reports, err := st.Reports(r.Infra)
		if err != nil {
			return err
		}
		views := etcdstore.Assess(res.Generation, hosts, reports)
		done := true
		for _, v := range views {
			if v.State == etcdstore.HostFailed {
				return fmt.Errorf("%s %s: host %s failed: %s", verb, r.Infra, v.Host, strings.Join(v.Report.Errors, "; "))
			}
			realized := v.State == etcdstore.HostCurrent && plan.Paused(v.Report.Paused).Equal(want)
			if realized && !told[v.Host] {
				told[v.Host] = true
				if r.Progress != nil {
					r.Progress(WaitEvent{HostEvent: HostEvent{Host: v.Host, State: v.State, Report: v.Report}, After: time.Since(start),
						Listed: slices.Contains(hosts, v.Host)})
				}
			}
			done = done && (realized || !slices.Contains(hosts, v.Host))
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return waitFailed(verb+" "+r.Infra, r.Wait, ctx.Err())
		case <-tick.C:
		}
	}
}

// pauseWaitPoll is how often a wait for a pause reads the hosts' reports.
const pauseWaitPoll = 50 * time.Millisecond

// keptPaused is what a new spec keeps paused of the last record (nil:
// none): an apply resumes nothing, but forgets the pauses of what the spec
// no longer has.
func keptPaused(last *store.Record, next *spec.Spec) plan.Paused {
	if last == nil {
		return nil
	}
	return last.Paused.Prune(next).Normal()
}
