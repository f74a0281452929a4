package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/spec"
)

// OpenCounting gives a dataplane to read counters with and a function that
// releases it. Each round of reading opens its own, so that a namespace
// made again since the last round is read, not a stale handle to the old;
// and a handle kept between rounds would keep a namespace another process
// deleted alive, with its links, until the next round.
type OpenCounting func() (Counting, func(), error)

// PaceFactor bounds the sampler's share of a CPU: the next round starts no
// sooner than PaceFactor times the last round's duration after its start,
// so sampling takes at most 1/PaceFactor (2%) of one CPU however many
// namespaces a round reads.
const PaceFactor = 50

// Period is the time from a round's start to the next one's: the interval
// asked for, stretched when a round took longer than 1/PaceFactor of it.
func Period(interval, took time.Duration) time.Duration {
	return max(interval, took*PaceFactor)
}

// worthTelling says whether a period is far enough (a factor of two) from
// the one last told to tell again: a period that wavers around the
// interval does not fill the log.
func worthTelling(told, now time.Duration) bool {
	return now >= 2*told || told >= 2*now
}

// Sampler reads every infrastructure's counters at an interval and keeps
// each one's snapshots for a while, so that rates over a window can be
// answered at once. Rates come from the snapshots' timestamps, so a
// stretched interval changes how fine the steps are, not what they mean.
type Sampler struct {
	Infras   func() []*spec.Spec // what to sample, asked each round
	Open     OpenCounting
	Interval time.Duration
	Keep     time.Duration // how much history each infrastructure keeps
	// Logf, when set, is told when rounds take long enough that the
	// interval is stretched, and when it is no longer.
	Logf func(format string, args ...any)

	mu    sync.Mutex
	rings map[string]*Ring
	errs  map[string]error
	every time.Duration // the period of the last round, 0 before one
}

// Run samples until ctx ends, a round every Period.
func (s *Sampler) Run(ctx context.Context) {
	told := s.Interval
	for {
		start := time.Now()
		s.SampleOnce()
		took := time.Since(start)
		p := Period(s.Interval, took)
		s.mu.Lock()
		s.every = p
		s.mu.Unlock()
		if s.Logf != nil && worthTelling(told, p) {
			s.Logf("sampling counters every %s, not every %s: a round takes %s, and sampling keeps to 1/%d of a CPU",
				p.Round(time.Millisecond), s.Interval, took.Round(time.Millisecond), PaceFactor)
			told = p
		}
		t := time.NewTimer(p - took)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Every is how often the sampler samples now: the interval, or longer on a
// host where a round takes long.
func (s *Sampler) Every() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.every, s.Interval)
}

// SampleOnce takes one snapshot of every infrastructure.
func (s *Sampler) SampleOnce() {
	infras := s.Infras()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rings == nil {
		s.rings, s.errs = map[string]*Ring{}, map[string]error{}
	}
	seen := map[string]bool{}
	for _, sp := range infras {
		seen[sp.Name] = true
	}
	s.forgetUnseen(seen)
	if len(infras) == 0 { // an idle server opens nothing
		return
	}
	c, done, err := s.Open()
	for _, sp := range infras {
		if err != nil {
			s.errs[sp.Name] = err
			continue
		}
		snap, rerr := Read(c, sp)
		s.errs[sp.Name] = rerr
		if rerr != nil {
			continue
		}
		r, ok := s.rings[sp.Name]
		if !ok {
			r = NewRing(s.Keep)
			s.rings[sp.Name] = r
		}
		r.Add(snap)
	}
	if err == nil {
		done()
	}
}

// forgetUnseen drops the history of infrastructures no longer there.
func (s *Sampler) forgetUnseen(seen map[string]bool) {
	for name := range s.rings {
		if !seen[name] {
			delete(s.rings, name)
			delete(s.errs, name)
		}
	}
}

// Window returns an infrastructure's snapshots over the last d, and the
// error of its last reading, if that failed.
func (s *Sampler) Window(name string, d time.Duration) ([]*Snapshot, error) {
	s.mu.Lock()
	r, err := s.rings[name], s.errs[name]
	s.mu.Unlock()
	if r == nil {
		return nil, err
	}
	return r.Window(d), err
}
