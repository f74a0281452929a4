package metrics

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

func TestPeriod(t *testing.T) {
	for _, c := range []struct {
		name           string
		interval, took time.Duration
		want           time.Duration
	}{
		{"a quick round keeps the interval", time.Second, 5 * time.Millisecond, time.Second},
		{"at the bound exactly", time.Second, 20 * time.Millisecond, time.Second},
		{"a slow round stretches it", time.Second, 40 * time.Millisecond, 2 * time.Second},
		{"a round longer than the interval", time.Second, 3 * time.Second, 150 * time.Second},
		{"a short interval of the user's stretches too", 100 * time.Millisecond, 10 * time.Millisecond, 500 * time.Millisecond},
		{"a long interval of the user's is kept", time.Minute, 100 * time.Millisecond, time.Minute},
		{"nothing to read", time.Second, 0, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Period(c.interval, c.took)
			if got != c.want {
				t.Errorf("Period(%s, %s) = %s, want %s", c.interval, c.took, got, c.want)
			}
			if c.took > 0 && float64(c.took)/float64(got) > 1.0/PaceFactor+1e-9 {
				t.Errorf("sampling takes %.1f%% of a CPU", 100*float64(c.took)/float64(got))
			}
		})
	}
}

func TestWorthTelling(t *testing.T) {
	for _, c := range []struct {
		told, now time.Duration
		want      bool
	}{
		{time.Second, time.Second, false},
		{time.Second, 1900 * time.Millisecond, false}, // wavering near the interval
		{time.Second, 2 * time.Second, true},
		{4 * time.Second, 2 * time.Second, true}, // back towards the interval
		{4 * time.Second, 3 * time.Second, false},
	} {
		if got := worthTelling(c.told, c.now); got != c.want {
			t.Errorf("worthTelling(%s, %s) = %v, want %v", c.told, c.now, got, c.want)
		}
	}
}

// Each round opens its own dataplane and lets go of it: one kept would
// hold namespaces other processes delete.
func TestSamplerOpensAndReleasesEachRound(t *testing.T) {
	opens, releases := 0, 0
	s := &Sampler{
		Infras:   func() []*spec.Spec { return []*spec.Spec{load(t)} },
		Interval: time.Second, Keep: time.Minute,
		Open: func() (Counting, func(), error) {
			opens++
			return fakeKernel(1000, 1000), func() { releases++ }, nil
		},
	}
	for range 3 {
		s.SampleOnce()
	}
	if opens != 3 || releases != 3 {
		t.Errorf("opened %d and released %d times in 3 rounds", opens, releases)
	}
	if snaps, err := s.Window("m1", time.Hour); err != nil || len(snaps) != 3 {
		t.Errorf("window: %d snapshots, %v", len(snaps), err)
	}
}

func TestSamplerIdleOpensNothing(t *testing.T) {
	s := &Sampler{Infras: func() []*spec.Spec { return nil }, Interval: time.Second,
		Open: func() (Counting, func(), error) {
			t.Error("opened a dataplane with nothing to sample")
			return nil, nil, nil
		}}
	s.SampleOnce()
}

// slow is a kernel whose every read takes a while.
type slow struct{ *counting }

func (s slow) TCCounters(ns, link string) (map[uint32]plan.Counters, plan.Counters, error) {
	time.Sleep(4 * time.Millisecond)
	return s.counting.TCCounters(ns, link)
}

func TestRunStretchesTheIntervalAndSaysSo(t *testing.T) {
	var mu sync.Mutex
	var said []string
	told := make(chan struct{}, 1)
	s := &Sampler{
		Infras:   func() []*spec.Spec { return []*spec.Spec{load(t)} },
		Interval: 10 * time.Millisecond, Keep: time.Minute,
		Open: func() (Counting, func(), error) { return slow{fakeKernel(1000, 1000)}, func() {}, nil },
		Logf: func(format string, args ...any) {
			mu.Lock()
			said = append(said, fmt.Sprintf(format, args...))
			mu.Unlock()
			select {
			case told <- struct{}{}:
			default:
			}
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	select {
	case <-told:
	case <-time.After(10 * time.Second):
		t.Fatal("a slow round did not stretch the interval")
	}
	cancel()
	<-done
	if e := s.Every(); e < 200*time.Millisecond {
		t.Errorf("every %s after a round of over 4ms", e)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(said) != 1 || !strings.Contains(said[0], "not every 10ms") {
		t.Errorf("said %q", said)
	}
}
