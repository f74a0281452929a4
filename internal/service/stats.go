package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// specMemo keeps each infrastructure's spec decoded, once per version of
// its YAML: a server reads the same stored specs for every scrape and
// sample, and a large spec costs a few hundred milliseconds to decode.
type specMemo struct {
	mu     sync.Mutex
	byName map[string]memoSpec
}

type memoSpec struct {
	source string
	spec   *spec.Spec
}

// specs are the records' specs; those that do not decode are left out.
func (m *specMemo) specs(recs []*store.Record, decode func(*store.Record) (*spec.Document, error)) []*spec.Spec {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byName == nil {
		m.byName = map[string]memoSpec{}
	}
	seen := map[string]bool{}
	var out []*spec.Spec
	for _, r := range recs {
		seen[r.Name] = true
		c, ok := m.byName[r.Name]
		if !ok || c.source != string(r.Spec) {
			doc, err := decode(r)
			if err != nil {
				continue
			}
			c = memoSpec{source: string(r.Spec), spec: doc.Spec}
			m.byName[r.Name] = c
		}
		out = append(out, c.spec)
	}
	for name := range m.byName {
		if !seen[name] {
			delete(m.byName, name)
		}
	}
	return out
}

// sampling is a back end's sampler, once a server has made one: windowed
// stats are then answered from its samples.
type sampling struct {
	mu      sync.Mutex
	sampler *metrics.Sampler
}

func (s *sampling) made() *metrics.Sampler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sampler
}

func (s *sampling) makeSampler(b Backend, interval, keep time.Duration) *metrics.Sampler {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sampler = &metrics.Sampler{Infras: b.Specs, Open: b.Counting, Interval: interval, Keep: keep}
	return s.sampler
}

// windowed answers stats from the sampler's samples of the last window.
func windowed(sm *metrics.Sampler, name string, window time.Duration) (*Averages, error) {
	snaps, err := Samples(sm, name, window)
	if err != nil {
		return nil, err
	}
	return metrics.Average(snaps), nil
}

// Samples are the sampler's snapshots of an infrastructure over the last
// window; fewer than two are ErrNoSamples, which says why.
func Samples(sm *metrics.Sampler, name string, window time.Duration) ([]*metrics.Snapshot, error) {
	snaps, err := sm.Window(name, window)
	if len(snaps) >= 2 {
		return snaps, nil
	}
	if err != nil {
		return nil, tagged{ErrNoSamples, fmt.Sprintf("no samples of %s: %v", name, err)}
	}
	return nil, tagged{ErrNoSamples, fmt.Sprintf("no samples of %s yet: the server samples every %s; try again shortly", name, sm.Every())}
}

// Sample makes the sampler of this machine's counters; Stats answers from
// it from then on.
func (l *Local) Sample(interval, keep time.Duration) *metrics.Sampler {
	return l.makeSampler(l, interval, keep)
}

// Stats are the rates averaged over the window: from the samples of a
// server's sampler, or else sampled now every Interval, for at most
// LiveWindow.
func (l *Local) Stats(ctx context.Context, name string, o StatsOptions) (*Averages, error) {
	doc, err := l.doc(name)
	if err != nil {
		return nil, err
	}
	if sm := l.made(); sm != nil {
		return windowed(sm, name, o.Window)
	}
	c, done, err := l.Counting()
	if err != nil {
		return nil, err
	}
	defer done()
	return sampleFor(ctx, c, doc.Spec, min(o.Window, LiveWindow), o.Interval)
}

// sampleFor reads the counters every interval for window, and averages.
func sampleFor(ctx context.Context, c metrics.Counting, s *spec.Spec, window, interval time.Duration) (*Averages, error) {
	ring := metrics.NewRing(window + interval)
	start := time.Now()
	for {
		snap, err := metrics.Read(c, s)
		if err != nil {
			return nil, err
		}
		ring.Add(snap)
		if time.Since(start) >= window || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(interval, window-time.Since(start))):
		}
	}
	return metrics.Average(ring.Window(window + interval)), nil
}

// Counting opens this machine's dataplane for reading counters.
func (l *Local) Counting() (metrics.Counting, func(), error) {
	dp, err := dataplane.New()
	if err != nil {
		return nil, nil, err
	}
	return dp, dp.Close, nil
}
