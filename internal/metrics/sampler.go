package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/spec"
)

// OpenCounting gives a dataplane to read counters with and a function that
// releases it. Each round of reading opens its own, so that a namespace
// made again since the last round is read, not a stale handle to the old.
type OpenCounting func() (Counting, func(), error)

// Sampler reads every infrastructure's counters at an interval and keeps
// each one's snapshots for a while, so that rates over a window can be
// answered at once.
type Sampler struct {
	Infras   func() []*spec.Spec // what to sample, asked each round
	Open     OpenCounting
	Interval time.Duration
	Keep     time.Duration // how much history each infrastructure keeps

	mu    sync.Mutex
	rings map[string]*Ring
	errs  map[string]error
}

// Run samples until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		s.SampleOnce()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SampleOnce takes one snapshot of every infrastructure.
func (s *Sampler) SampleOnce() {
	infras := s.Infras()
	c, done, err := s.Open()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rings == nil {
		s.rings, s.errs = map[string]*Ring{}, map[string]error{}
	}
	seen := map[string]bool{}
	for _, sp := range infras {
		seen[sp.Name] = true
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
