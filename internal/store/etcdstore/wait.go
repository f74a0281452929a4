package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	// ErrHostFailed is wrapped by a wait that ended because a host
	// reported errors for the generation waited for.
	ErrHostFailed = errors.New("a host failed")
	// ErrSuperseded is wrapped by a wait that ended because a host
	// reports a newer generation than the one waited for: another apply
	// came after it, and its generation will never be realized.
	ErrSuperseded = errors.New("superseded by a newer generation")
)

// HostEvent is a change in one host's standing that a wait saw: its new
// state and the report that state rests on. State HostGone with no Report
// is a report withdrawn (or expired with its agent's lease).
type HostEvent struct {
	Host   string
	State  HostState
	Report *Report
}

// WaitCurrent waits until every host in hosts reports generation gen of
// infra without errors and no host the spec does not name reports it (a
// host left out of the spec withdraws its report once it removed its
// part). It reads the reports once, then watches them change, calling on
// (when not nil) for each host whose state changed, in the order seen.
//
// stored is the etcd revision of the record of gen (what PutIf or GetRev
// returned). A report written before it is of an earlier record: an
// infrastructure destroyed and applied again starts over at generation 1,
// and an agent that has not caught up yet may still report generation 1
// of the one before. Such a report counts as lagging. With stored 0 every
// report is taken at its word.
//
// It ends with an error wrapping ErrHostFailed when a host reports errors
// for gen, ErrSuperseded when one reports a newer generation (after stored),
// ErrUnavailable when etcd stops answering, and ctx's error when ctx ends
// first; each names the hosts that are not there yet and what they last
// reported.
func (s *Store) WaitCurrent(ctx context.Context, infra string, gen int, stored int64, hosts []string, on func(HostEvent)) error {
	if gen <= 0 {
		return fmt.Errorf("wait for %s: generation %d: must be positive", infra, gen)
	}
	p := newProgress(gen, hosts)
	p.since = stored
	return s.wait(ctx, infra, p, on)
}

// WaitWithdrawn waits until no host reports infra: each agent withdraws its
// report once it removed its part of a destroyed infrastructure, or when it
// stops, and etcd deletes the report of an agent that died once its lease
// runs out. An agent whose removal fails reports that instead
// (Report.Removing), and the wait ends with an error wrapping
// ErrHostFailed that names each such host and its errors.
//
// removed is the etcd revision at which the record was deleted (what
// DeleteIfRev returned). A failed removal reported at or before it is of
// an earlier attempt (the host left out of the spec before the destroy),
// which its agent tries again on seeing the record gone: it is waited out
// rather than taken for a failure. With removed 0 every report is taken
// at its word. Events and the other errors are WaitCurrent's.
func (s *Store) WaitWithdrawn(ctx context.Context, infra string, removed int64, on func(HostEvent)) error {
	p := newProgress(0, nil)
	p.since = removed
	return s.wait(ctx, infra, p, on)
}

// healthInterval is how often a wait checks that etcd still answers: a
// watch whose etcd is out of reach waits silently for it to come back.
const healthInterval = 2 * time.Second

// errRewatch asks wait to read the reports afresh and watch again.
var errRewatch = errors.New("watch ended")

func (s *Store) wait(ctx context.Context, infra string, p *progress, on func(HostEvent)) error {
	if err := checkName("infrastructure", infra); err != nil {
		return err
	}
	emit := func(evs []HostEvent) {
		if on != nil {
			for _, ev := range evs {
				on(ev)
			}
		}
	}
	for {
		reports, rev, err := s.reportsAt(infra)
		if err != nil {
			return p.ended(infra, err)
		}
		emit(p.reset(reports))
		if done, err := p.verdict(infra); done || err != nil {
			return err
		}
		err = s.watchReports(ctx, infra, rev+1, p, emit)
		if !errors.Is(err, errRewatch) {
			return err
		}
		// A leader election ends within a second or two; reading again at
		// once would only meet it again.
		select {
		case <-ctx.Done():
			return p.ended(infra, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// reportsAt reads the reports of infra, each with the revision it was
// written at, and the revision they stand at.
func (s *Store) reportsAt(infra string) ([]revReport, int64, error) {
	var resp *clientv3.GetResponse
	err := s.call("reports of "+infra, func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, s.reportPrefix(infra), clientv3.WithPrefix())
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]revReport, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r, err := decodeReport(kv.Key, kv.Value)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, revReport{r, kv.ModRevision})
	}
	return out, resp.Header.Revision, nil
}

func decodeReport(key, val []byte) (Report, error) {
	var r Report
	if err := json.Unmarshal(val, &r); err != nil {
		return r, fmt.Errorf("etcd key %s: not a vnet report: %w", key, err)
	}
	return r, nil
}

// watchReports applies each change to the reports of infra from revision
// rev on to p until p's verdict ends the wait. It returns errRewatch when
// the watch broke in a way a fresh read mends (history compacted, leader
// lost).
func (s *Store) watchReports(ctx context.Context, infra string, rev int64, p *progress, emit func([]HostEvent)) error {
	prefix := s.reportPrefix(infra)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	watch := s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
	health := time.NewTicker(healthInterval)
	defer health.Stop()
	for {
		select {
		case <-ctx.Done():
			return p.ended(infra, ctx.Err())
		case <-health.C:
			err := s.call("watch reports of "+infra, func(ctx context.Context) error {
				_, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
				return err
			})
			if err != nil {
				return p.ended(infra, err)
			}
		case resp, ok := <-watch:
			if !ok {
				if ctx.Err() != nil {
					return p.ended(infra, ctx.Err())
				}
				return errRewatch
			}
			if err := resp.Err(); err != nil {
				if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision != 0 || noLeader(err) {
					return errRewatch
				}
				return p.ended(infra, s.fail("watch reports of "+infra, err))
			}
			for _, ev := range resp.Events {
				host := strings.TrimPrefix(string(ev.Kv.Key), prefix)
				switch ev.Type {
				case mvccpb.PUT:
					r, err := decodeReport(ev.Kv.Key, ev.Kv.Value)
					if err != nil {
						return err
					}
					emit(p.put(revReport{r, ev.Kv.ModRevision}))
				case mvccpb.DELETE:
					emit(p.remove(host))
				}
			}
			if done, err := p.verdict(infra); done || err != nil {
				return err
			}
		}
	}
}

// revReport is a report and the etcd revision it was written at.
type revReport struct {
	Report
	rev int64
}

// progress follows the reports of one infrastructure toward a wait's
// goal: every host the spec names (hosts) current at generation gen, and no
// report from a host it does not name. With gen 0 and no hosts the goal is
// that no report remains.
type progress struct {
	gen   int
	since int64 // reports written at or before it are of an earlier record
	hosts []string
	live  map[string]revReport // reports standing now, by host
	last  map[string]revReport // each host's last report seen, withdrawn ones too
	told  map[string]HostState
}

func newProgress(gen int, hosts []string) *progress {
	return &progress{gen: gen, hosts: hosts, live: map[string]revReport{}, last: map[string]revReport{}, told: map[string]HostState{}}
}

// put notes a host's report and returns the hosts whose state changed.
func (p *progress) put(r revReport) []HostEvent {
	p.live[r.Host], p.last[r.Host] = r, r
	return p.changes()
}

// remove notes a host's report withdrawn.
func (p *progress) remove(host string) []HostEvent {
	delete(p.live, host)
	return p.changes()
}

// reset replaces every report with those read afresh.
func (p *progress) reset(reports []revReport) []HostEvent {
	p.live = make(map[string]revReport, len(reports))
	for _, r := range reports {
		p.live[r.Host], p.last[r.Host] = r, r
	}
	return p.changes()
}

// views are Assess's, but a host whose report was written before the
// record (or before its deletion) is lagging when the spec names it,
// whatever generation it names, and unexpected when it does not, even if
// it reports a failed removal.
func (p *progress) views() []HostView {
	reports := make([]Report, 0, len(p.live))
	for _, r := range p.live {
		reports = append(reports, r.Report)
	}
	views := Assess(p.gen, p.hosts, reports)
	for i, v := range views {
		if v.Report == nil || !p.stale(v.Host) {
			continue
		}
		if slices.Contains(p.hosts, v.Host) {
			views[i].State = HostLagging
		} else {
			views[i].State = HostUnexpected
		}
	}
	return views
}

// stale says whether the host's live report was written before the record
// waited for.
func (p *progress) stale(host string) bool {
	r, ok := p.live[host]
	return ok && r.rev <= p.since
}

// changes compares each host's state with the one last told, in Assess's
// order, then the unnamed hosts whose report went.
func (p *progress) changes() []HostEvent {
	var evs []HostEvent
	seen := map[string]bool{}
	for _, v := range p.views() {
		seen[v.Host] = true
		if told, ok := p.told[v.Host]; ok && told == v.State {
			continue
		}
		p.told[v.Host] = v.State
		evs = append(evs, HostEvent{Host: v.Host, State: v.State, Report: v.Report})
	}
	var went []string
	for h := range p.told {
		if !seen[h] {
			went = append(went, h)
		}
	}
	sort.Strings(went)
	for _, h := range went {
		delete(p.told, h)
		evs = append(evs, HostEvent{Host: h, State: HostGone})
	}
	return evs
}

// verdict says whether the goal is reached, or gives the error that ends
// the wait without it (nil, false: wait on).
func (p *progress) verdict(infra string) (bool, error) {
	views := p.views()
	var failed, newer []string
	for _, v := range views {
		switch {
		case v.State == HostFailed:
			failed = append(failed, fmt.Sprintf("%s: %s", v.Host, strings.Join(v.Report.Errors, "; ")))
		case v.State == HostLagging && v.Report.Generation > p.gen && !p.stale(v.Host):
			newer = append(newer, fmt.Sprintf("%s reports generation %d", v.Host, v.Report.Generation))
		}
	}
	switch {
	case len(failed) > 0 && p.gen == 0:
		return false, fmt.Errorf("%s: %w to remove its part: %s", infra, ErrHostFailed, strings.Join(failed, "; "))
	case len(failed) > 0:
		return false, fmt.Errorf("%s generation %d: %w: %s", infra, p.gen, ErrHostFailed, strings.Join(failed, "; "))
	case len(newer) > 0:
		return false, fmt.Errorf("%s generation %d: %w: %s", infra, p.gen, ErrSuperseded, strings.Join(newer, ", "))
	}
	return Converged(views), nil
}

// ended wraps err, which ends the wait before its goal, with the hosts not
// there yet.
func (p *progress) ended(infra string, err error) error {
	if pending := p.pending(); pending != "" {
		return fmt.Errorf("%s: %s: %w", p.goal(infra), pending, err)
	}
	return err
}

func (p *progress) goal(infra string) string {
	if p.gen == 0 {
		return "hosts still reporting " + infra
	}
	return fmt.Sprintf("hosts not current at %s generation %d", infra, p.gen)
}

// pending describes each host that keeps the goal away, with what it last
// reported.
func (p *progress) pending() string {
	var parts []string
	for _, v := range p.views() {
		if v.State == HostCurrent {
			continue
		}
		var what string
		switch {
		case v.Report != nil && v.Report.Removing:
			what = fmt.Sprintf("failed to remove its part (%s): %s", reportedAt(*v.Report), strings.Join(v.Report.Errors, "; "))
		case v.Report != nil && p.gen == 0:
			what = fmt.Sprintf("still reports generation %d (%s)", v.Report.Generation, reportedAt(*v.Report))
		case v.Report != nil && v.State == HostUnexpected:
			what = fmt.Sprintf("reports generation %d (%s) but is not in the spec", v.Report.Generation, reportedAt(*v.Report))
		case v.Report != nil && p.stale(v.Host) && v.Report.Generation >= p.gen:
			what = fmt.Sprintf("%s, reports generation %d (%s) of an earlier record of the name", v.State, v.Report.Generation, reportedAt(*v.Report))
		case v.Report != nil:
			what = fmt.Sprintf("%s, reports generation %d (%s)", v.State, v.Report.Generation, reportedAt(*v.Report))
		default:
			what = "no report"
			if r, ok := p.last[v.Host]; ok {
				what += fmt.Sprintf(", last reported generation %d (%s) and withdrew it or its agent stopped", r.Generation, reportedAt(r.Report))
			} else {
				what += " (agent not running?)"
			}
		}
		parts = append(parts, v.Host+" "+what)
	}
	return strings.Join(parts, "; ")
}

func reportedAt(r Report) string {
	if r.At.IsZero() {
		return "no time given"
	}
	return "at " + r.At.Local().Format("15:04:05.000")
}
