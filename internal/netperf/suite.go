package netperf

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Report is everything one vnet netperf command measured.
type Report struct {
	Command    []string    `json:"command"`
	Test       string      `json:"test"`
	Started    time.Time   `json:"started"`
	Config     *Config     `json:"config"`
	Results    []*Result   `json:"results"` // the last iteration, one per target and instance
	Aggregate  *Aggregate  `json:"aggregate,omitempty"`
	Confidence *Confidence `json:"confidence,omitempty"`
	Host       HostInfo    `json:"host"`
	UUID       string      `json:"uuid"` // the UUID selector's: -u, or a new one
}

// Aggregate sums concurrent instances.
type Aggregate struct {
	Instances  int     `json:"instances"`
	Throughput float64 `json:"throughput_bps,omitempty"`
	TransRate  float64 `json:"transactions_per_s,omitempty"`
}

// Execute runs the configured tests: every target and instance at once,
// repeated while a confidence target (-I/-i) is not yet met.
func Execute(ctx context.Context, c *Config, events func(Interim)) (*Report, error) {
	// Bound before anything is sent, so that a bad -T costs the server nothing.
	if c.LocalBind != nil {
		release, err := bindProcess(*c.LocalBind)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	rep := &Report{Test: c.Test, Started: time.Now().UTC(), Config: c, Host: hostInfo(), UUID: c.UUID}
	if rep.UUID == "" {
		rep.UUID = newUUID()
	}
	iters := 1
	if c.ConfLevel > 0 {
		iters = c.MaxIter
		rep.Confidence = &Confidence{Level: c.ConfLevel, Target: c.ConfWidth}
	}
	for i := 1; i <= iters; i++ {
		results, err := runConcurrent(ctx, c, events)
		if err != nil {
			return nil, err
		}
		rep.Results = results
		rep.Aggregate = aggregate(results)
		if rep.Confidence == nil {
			break
		}
		cf := rep.Confidence
		cf.Values = append(cf.Values, rep.metric())
		cf.Iterations = i
		cf.Width = IntervalWidth(cf.Values, c.ConfLevel)
		cf.Mean = mean(cf.Values)
		if i >= c.MinIter && cf.Width <= cf.Target {
			cf.Achieved = true
			break
		}
	}
	if rep.Confidence != nil && rep.Confidence.Iterations < 2 {
		rep.Confidence.Width = -1 // one value has no interval; JSON cannot carry +Inf
	}
	return rep, nil
}

func runConcurrent(ctx context.Context, c *Config, events func(Interim)) ([]*Result, error) {
	type job struct {
		tg   Target
		inst int
	}
	var jobs []job
	for _, tg := range c.Targets {
		for i := 0; i < c.Instances; i++ {
			jobs = append(jobs, job{tg, len(jobs)})
		}
	}
	results := make([]*Result, len(jobs))
	errs := make([]error, len(jobs))
	var mu sync.Mutex
	safeEvents := events
	if events != nil {
		safeEvents = func(e Interim) { mu.Lock(); defer mu.Unlock(); events(e) }
	}
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Run(ctx, c, j.tg, j.inst, safeEvents)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s instance %d: %w", j.tg.Host, j.inst, errs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return results, nil
}

func aggregate(rs []*Result) *Aggregate {
	if len(rs) < 2 {
		return nil
	}
	a := &Aggregate{Instances: len(rs)}
	for _, r := range rs {
		a.Throughput += r.Throughput
		a.TransRate += r.TransRate
	}
	return a
}

// metric is what confidence is computed on: throughput or transaction rate, summed.
func (r *Report) metric() float64 {
	var v float64
	for _, x := range r.Results {
		v += x.Throughput + x.TransRate
	}
	return v
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
