package etcdstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/etcdserver"
)

// step is one change a wait sees: a report put, or withdrawn (put nil).
type step struct {
	host string
	put  *Report
	rev  int64 // the report's revision; 0: the next after the record
}

func rep(host string, gen int, errs ...string) step {
	return step{host: host, put: &Report{Host: host, Generation: gen, Errors: errs}}
}

// old is a report written at revision rev, before the record waited for
// (at revision 50 in the cases).
func old(host string, gen int, rev int64) step {
	s := rep(host, gen)
	s.rev = rev
	return s
}

func gone(host string) step { return step{host: host} }

// failedRemoval is a host's report that it failed to remove its part, at
// revision rev (0: the next after the record or its deletion).
func failedRemoval(host string, rev int64, errs ...string) step {
	s := rep(host, 4, errs...)
	s.put.Removing, s.rev = true, rev
	return s
}

func eventText(evs []HostEvent) []string {
	var out []string
	for _, ev := range evs {
		s := ev.Host + " " + string(ev.State)
		if ev.Report == nil {
			s += " (no report)"
		}
		out = append(out, s)
	}
	return out
}

func TestProgress(t *testing.T) {
	cases := []struct {
		name    string
		gen     int
		hosts   []string
		initial []step
		steps   []step
		events  string // every event, in order, joined by ", "
		done    bool
		err     error  // what verdict ends with (nil: none)
		errText string // a part of that error's text
		pending string // a part of pending's text, when not done
	}{
		{name: "hosts current in any order", gen: 2, hosts: []string{"hv1", "hv2", "hv3"},
			initial: []step{rep("hv1", 1), rep("hv2", 1)},
			steps:   []step{rep("hv2", 2), rep("hv3", 2), rep("hv1", 2)},
			events:  "hv1 lagging, hv2 lagging, hv3 gone (no report), hv2 current, hv3 current, hv1 current",
			done:    true},
		{name: "already current", gen: 3, hosts: []string{"hv1"}, initial: []step{rep("hv1", 3)},
			events: "hv1 current", done: true},
		{name: "an older generation keeps it waiting", gen: 2, hosts: []string{"hv1", "hv2"},
			steps:   []step{rep("hv1", 2), rep("hv2", 1)},
			events:  "hv1 gone (no report), hv2 gone (no report), hv1 current, hv2 lagging",
			pending: "hv2 lagging, reports generation 1"},
		{name: "a report again at the same state says nothing", gen: 2, hosts: []string{"hv1"},
			steps:  []step{rep("hv1", 2), rep("hv1", 2)},
			events: "hv1 gone (no report), hv1 current", done: true},
		{name: "failure ends the wait with the host's errors", gen: 2, hosts: []string{"hv1", "hv2"},
			steps:  []step{rep("hv1", 2), rep("hv2", 2, "veth vn1: busy", "bridge: gone")},
			events: "hv1 gone (no report), hv2 gone (no report), hv1 current, hv2 failed",
			err:    ErrHostFailed, errText: "hv2: veth vn1: busy; bridge: gone"},
		{name: "a failure of an older generation is only lagging", gen: 2, hosts: []string{"hv1"},
			steps:   []step{rep("hv1", 1, "veth: busy")},
			events:  "hv1 gone (no report), hv1 lagging",
			pending: "hv1 lagging, reports generation 1"},
		{name: "a newer generation supersedes", gen: 2, hosts: []string{"hv1"},
			steps:  []step{rep("hv1", 3)},
			events: "hv1 gone (no report), hv1 lagging",
			err:    ErrSuperseded, errText: "hv1 reports generation 3"},
		{name: "an unexpected host keeps it waiting until it withdraws", gen: 2, hosts: []string{"hv1"},
			initial: []step{rep("hv1", 2), rep("hv9", 1)},
			steps:   []step{gone("hv9")},
			events:  "hv1 current, hv9 unexpected, hv9 gone (no report)", done: true},
		{name: "an unexpected host still reporting is pending", gen: 2, hosts: []string{"hv1"},
			initial: []step{rep("hv1", 2), rep("hv9", 1)},
			events:  "hv1 current, hv9 unexpected",
			pending: "hv9 reports generation 1 (no time given) but is not in the spec"},
		{name: "a lease expiring takes a current host back to gone", gen: 2, hosts: []string{"hv1", "hv2"},
			steps:   []step{rep("hv1", 2), gone("hv1"), rep("hv2", 2)},
			events:  "hv1 gone (no report), hv2 gone (no report), hv1 current, hv1 gone (no report), hv2 current",
			pending: "hv1 no report, last reported generation 2"},
		{name: "a host never heard of", gen: 1, hosts: []string{"hv1"},
			events: "hv1 gone (no report)", pending: "hv1 no report (agent not running?)"},
		{name: "a report from before the record is lagging, whatever it says", gen: 1, hosts: []string{"hv1", "hv2", "hv3"},
			initial: []step{old("hv1", 1, 10), old("hv2", 3, 11), old("hv3", 1, 12)},
			steps:   []step{rep("hv1", 1), old("hv3", 1, 49)},
			events:  "hv1 lagging, hv2 lagging, hv3 lagging, hv1 current",
			pending: "hv2 lagging, reports generation 3 (no time given) of an earlier record of the name; hv3 lagging"},
		{name: "destroyed: every report withdrawn", hosts: nil,
			initial: []step{rep("hv1", 4), rep("hv2", 4)},
			steps:   []step{rep("hv2", 4), gone("hv2"), gone("hv1")},
			events:  "hv1 unexpected, hv2 unexpected, hv2 gone (no report), hv1 gone (no report)", done: true},
		{name: "destroyed: a host still reporting", hosts: nil,
			initial: []step{rep("hv1", 4), rep("hv2", 4)},
			steps:   []step{gone("hv1")},
			events:  "hv1 unexpected, hv2 unexpected, hv1 gone (no report)",
			pending: "hv2 still reports generation 4"},
		{name: "destroyed: nothing reported", hosts: nil, done: true},
		{name: "destroyed: a failed removal ends the wait with the host's errors", hosts: nil,
			initial: []step{rep("hv1", 4), rep("hv2", 4)},
			steps:   []step{gone("hv1"), failedRemoval("hv2", 0, "destroy dc: veth vn1: busy")},
			events:  "hv1 unexpected, hv2 unexpected, hv1 gone (no report), hv2 failed",
			err:     ErrHostFailed, errText: "demo: a host failed to remove its part: hv2: destroy dc: veth vn1: busy"},
		{name: "destroyed: a failed removal from before the deletion is waited out", hosts: nil,
			initial: []step{failedRemoval("hv3", 40, "bridge: busy"), rep("hv1", 4)},
			steps:   []step{gone("hv1")},
			events:  "hv1 unexpected, hv3 unexpected, hv1 gone (no report)",
			pending: "hv3 failed to remove its part (no time given): bridge: busy"},
		{name: "destroyed: a removal that fails, then succeeds", hosts: nil,
			initial: []step{failedRemoval("hv3", 40, "bridge: busy")},
			steps:   []step{failedRemoval("hv3", 0, "bridge: busy"), gone("hv3")},
			events:  "hv3 unexpected, hv3 failed, hv3 gone (no report)", done: true},
		{name: "a host left out of the spec failing to remove its part fails the apply", gen: 2, hosts: []string{"hv1"},
			initial: []step{rep("hv1", 2), rep("hv3", 1)},
			steps:   []step{failedRemoval("hv3", 0, "bridge: busy")},
			events:  "hv1 current, hv3 unexpected, hv3 failed",
			err:     ErrHostFailed, errText: "demo generation 2: a host failed: hv3: bridge: busy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProgress(c.gen, c.hosts)
			p.since = 50
			rev := p.since
			report := func(s step) revReport {
				if s.rev != 0 {
					return revReport{*s.put, s.rev}
				}
				rev++
				return revReport{*s.put, rev}
			}
			var initial []revReport
			for _, s := range c.initial {
				initial = append(initial, report(s))
			}
			events := eventText(p.reset(initial))
			for _, s := range c.steps {
				if s.put != nil {
					events = append(events, eventText(p.put(report(s)))...)
				} else {
					events = append(events, eventText(p.remove(s.host))...)
				}
			}
			if got := strings.Join(events, ", "); got != c.events {
				t.Errorf("events:\n got %s\nwant %s", got, c.events)
			}
			done, err := p.verdict("demo")
			if done != c.done || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
				t.Fatalf("verdict = %v, %v; want %v, %v", done, err, c.done, c.err)
			}
			if err != nil && !strings.Contains(err.Error(), c.errText) {
				t.Errorf("error %q lacks %q", err, c.errText)
			}
			if pending := p.pending(); !strings.Contains(pending, c.pending) || (c.pending == "") != (pending == "" || done || err != nil) {
				t.Errorf("pending = %q, want it to contain %q", pending, c.pending)
			}
		})
	}
}

// waitResult is what a wait running in the background ended with, and
// the events it saw.
type waitResult struct {
	mu     sync.Mutex
	events []string
	err    chan error
}

func (w *waitResult) on(ev HostEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, ev.Host+" "+string(ev.State))
}

func (w *waitResult) seen() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.events, ", ")
}

func startWait(run func(on func(HostEvent)) error) *waitResult {
	w := &waitResult{err: make(chan error, 1)}
	go func() { w.err <- run(w.on) }()
	return w
}

func (w *waitResult) result(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-w.err:
		return err
	case <-time.After(limit):
		t.Fatalf("the wait did not end within %s (events: %s)", limit, w.seen())
		return nil
	}
}

func (w *waitResult) running(t *testing.T) {
	t.Helper()
	select {
	case err := <-w.err:
		t.Fatalf("the wait ended early: %v (events: %s)", err, w.seen())
	case <-time.After(300 * time.Millisecond):
	}
}

// A wait against etcd sees the agents' reports as they come, ends when
// every host is current, and ends with the host's errors when one fails.
func TestWaitCurrentWatchesReports(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	reporter := func(host string) *Reporter {
		rp, err := s.Reporter("demo", host, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rp.Close() })
		return rp
	}
	hv1, hv2 := reporter("hv1"), reporter("hv2")
	if err := hv1.Report(Report{Generation: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := startWait(func(on func(HostEvent)) error { return s.WaitCurrent(ctx, "demo", 2, 0, []string{"hv1", "hv2"}, on) })
	w.running(t)
	for _, r := range []struct {
		rp  *Reporter
		gen int
	}{{hv2, 1}, {hv2, 2}, {hv1, 2}} {
		if err := r.rp.Report(Report{Generation: r.gen}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.result(t, 10*time.Second); err != nil {
		t.Fatalf("WaitCurrent: %v", err)
	}
	if got, want := w.seen(), "hv1 lagging, hv2 gone, hv2 lagging, hv2 current, hv1 current"; got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}

	// Generation 3 fails on hv2.
	w = startWait(func(on func(HostEvent)) error { return s.WaitCurrent(ctx, "demo", 3, 0, []string{"hv1", "hv2"}, on) })
	w.running(t)
	if err := hv2.Report(Report{Generation: 3, Errors: []string{"bridge br0: no such device"}}); err != nil {
		t.Fatal(err)
	}
	err := w.result(t, 10*time.Second)
	if !errors.Is(err, ErrHostFailed) || !strings.Contains(err.Error(), "hv2: bridge br0: no such device") {
		t.Fatalf("WaitCurrent with hv2 failing: %v, want ErrHostFailed with its error", err)
	}
}

// An infrastructure destroyed and applied again starts over at generation
// 1: an agent's report of the one before, at generation 1 too, is not
// taken for the new one's.
func TestWaitIgnoresReportsOfAnEarlierRecord(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	rp, err := s.Reporter("demo", "hv1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	if err := rp.Report(Report{Generation: 1}); err != nil {
		t.Fatal(err)
	}
	stored, err := s.PutIf(record("demo", 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := startWait(func(on func(HostEvent)) error { return s.WaitCurrent(ctx, "demo", 1, stored, []string{"hv1"}, on) })
	w.running(t)
	if err := rp.Report(Report{Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.result(t, 10*time.Second); err != nil {
		t.Fatalf("WaitCurrent: %v", err)
	}
	if got, want := w.seen(), "hv1 lagging, hv1 current"; got != want {
		t.Errorf("events: %s, want %s", got, want)
	}
}

// A wait that runs out of time names each host not current and what it
// last reported; a wait for a destroy ends when the last report goes.
func TestWaitTimesOutAndWithdrawn(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	rp, err := s.Reporter("demo", "hv1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	if err := rp.Report(Report{Generation: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = s.WaitCurrent(ctx, "demo", 2, 0, []string{"hv1", "hv2"}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitCurrent of hosts that never catch up: %v, want the deadline", err)
	}
	for _, want := range []string{"hv1 lagging, reports generation 1", "hv2 no report"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not say %q", err, want)
		}
	}

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := startWait(func(on func(HostEvent)) error { return s.WaitWithdrawn(ctx, "demo", 0, on) })
	w.running(t)
	if err := rp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.result(t, 10*time.Second); err != nil {
		t.Fatalf("WaitWithdrawn: %v", err)
	}
	if got, want := w.seen(), "hv1 unexpected, hv1 gone"; got != want {
		t.Errorf("events: %s, want %s", got, want)
	}
}

// A wait whose etcd dies ends within a few timeouts saying etcd is
// unavailable, rather than waiting on a watch that never answers.
func TestWaitEndsWhenEtcdGoes(t *testing.T) {
	srv, err := etcdserver.Start(etcdserver.Config{DataDir: t.TempDir(), ClientURL: "http://127.0.0.1:0", PeerURL: "http://127.0.0.1:0",
		LogLevel: "error", NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Endpoints: []string{srv.Endpoint()}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := startWait(func(on func(HostEvent)) error { return s.WaitCurrent(ctx, "demo", 1, 0, []string{"hv1"}, on) })
	w.running(t)
	start := time.Now()
	srv.Kill()
	err = w.result(t, 30*time.Second)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "hv1 no report") {
		t.Fatalf("WaitCurrent with etcd gone: %v, want ErrUnavailable naming hv1", err)
	}
	t.Logf("%v (after %s)", err, time.Since(start).Round(time.Millisecond))
}

func TestWaitRefusesBadArguments(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	for _, c := range []struct {
		infra string
		gen   int
	}{{"demo", 0}, {"a/b", 1}} {
		if err := s.WaitCurrent(context.Background(), c.infra, c.gen, 0, nil, nil); err == nil {
			t.Errorf("WaitCurrent(%q, %d): no error", c.infra, c.gen)
		}
	}
}
