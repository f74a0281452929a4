// Package lab rebuilds the testbeds of the five seed studies with vnet,
// runs their workloads with vnet netperf, and judges whether each published
// result's shape holds on this machine. Results go to a SQLite database;
// the report (report.html, summary.md) is rendered from it.
//
// The lab drives the vnet binary as a user would (apply, exec, netperf,
// ioc stats, destroy), so what it measures is what users get.
package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/netperf"
)

// Sample is one measured number.
type Sample struct {
	Series string  // e.g. "send", "GRO on"
	Label  string  // e.g. "bulk", "4 VMs"
	Metric string  // e.g. "throughput"
	Value  float64 // in Unit
	Unit   string
}

// Samples are an experiment's measurements.
type Samples []Sample

// Get returns the best (largest) value of a series/label/metric over
// repetitions, as S0 took the max of several runs; 0 if absent.
func (s Samples) Get(series, label, metric string) float64 {
	best := 0.0
	for _, x := range s {
		if x.Series == series && x.Label == label && x.Metric == metric && x.Value > best {
			best = x.Value
		}
	}
	return best
}

// Verdict says whether a published result's shape holds here.
type Verdict struct {
	Status   string // Reproduced, NotReproduced or Failed
	Expected string // the shape, as a testable statement
	Observed string // what was measured, in the statement's terms
}

// Verdict statuses.
const (
	Reproduced    = "reproduced"
	NotReproduced = "not reproduced"
	Failed        = "error"
)

func verdict(ok bool, expected, observed string, args ...any) Verdict {
	st := NotReproduced
	if ok {
		st = Reproduced
	}
	return Verdict{Status: st, Expected: expected, Observed: fmt.Sprintf(observed, args...)}
}

// Experiment is one experiment of the catalogue.
type Experiment struct {
	Name      string
	Study     string // S0..S4
	Title     string
	Published string // the published result, with its figures
	Scaling   string // how this machine stands in for the study's hardware
	Run       func(x *Run) error
	Judge     func(s Samples) Verdict
	Chart     Chart
}

// Chart says how the report draws an experiment's samples.
type Chart struct {
	Metric string // which metric's samples to draw
	YLabel string
}

// Run is one experiment's execution context.
type Run struct {
	Exe      string // the vnet binary
	StateDir string
	Quick    bool
	Repeat   int
	Progress *Progress

	exp     *Experiment
	infras  []string
	samples Samples
}

// Seconds is the length of one measurement.
func (x *Run) Seconds() int {
	if x.Quick {
		return 2
	}
	return 10
}

func (x *Run) vnet(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, x.Exe, append([]string{"--state-dir", x.StateDir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(string(out))
		}
		return out, fmt.Errorf("vnet %s: %v: %s", strings.Join(args, " "), err, msg)
	}
	return out, nil
}

// Apply builds (or converges) a testbed from a spec.
func (x *Run) Apply(name, yaml string) error {
	f := filepath.Join(x.StateDir, name+".yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		return err
	}
	if _, err := x.vnet(context.Background(), "apply", f); err != nil {
		return err
	}
	for _, n := range x.infras {
		if n == name {
			return nil
		}
	}
	x.infras = append(x.infras, name)
	return nil
}

// Destroy removes every testbed this run applied.
func (x *Run) Destroy() error {
	var errs []string
	for _, n := range x.infras {
		if _, err := x.vnet(context.Background(), "destroy", n); err != nil {
			errs = append(errs, err.Error())
		}
	}
	x.infras = nil
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Netserver starts a netserver in a node of an applied testbed; it dies
// with the testbed.
func (x *Run) Netserver(node string) error {
	_, err := x.vnet(context.Background(), "exec", node, "--", x.Exe, "netserver")
	return err
}

// Flow is one netperf run from a node.
type Flow struct {
	From string   // INFRA/NODE
	Args []string // netperf's arguments (without --json, -l)
	Secs int      // 0: the run's default
}

// Measure runs flows at once, Repeat times, and returns each flow's result
// from the repetition with the best total (streams) or the last (RR).
func (x *Run) Measure(phase string, flows ...Flow) ([]*netperf.Result, error) {
	var best []*netperf.Result
	bestTotal := -1.0
	for rep := 0; rep < max(1, x.Repeat); rep++ {
		res, err := x.measureOnce(phase, flows)
		if err != nil {
			return nil, err
		}
		total := 0.0
		for _, r := range res {
			total += r.Throughput + r.TransRate
		}
		if total > bestTotal {
			best, bestTotal = res, total
		}
	}
	return best, nil
}

func (x *Run) measureOnce(phase string, flows []Flow) ([]*netperf.Result, error) {
	longest := 0
	for _, f := range flows {
		longest = max(longest, x.secs(f))
	}
	done := x.Progress.Phase(x.exp.Name, phase, time.Duration(longest)*time.Second)
	defer done()
	out := make([]*netperf.Result, len(flows))
	errs := make([]error, len(flows))
	var wg sync.WaitGroup
	for i, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append([]string{"exec", f.From, "--", x.Exe, "netperf", "-P", "0", "--json", "-l", fmt.Sprint(x.secs(f))}, f.Args...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(x.secs(f)+60)*time.Second)
			defer cancel()
			b, err := x.vnet(ctx, args...)
			if err != nil {
				errs[i] = err
				return
			}
			var rep netperf.Report
			if err := json.Unmarshal(b, &rep); err != nil || len(rep.Results) == 0 {
				errs[i] = fmt.Errorf("netperf from %s: unreadable output: %v", f.From, err)
				return
			}
			out[i] = rep.Results[0]
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (x *Run) secs(f Flow) int {
	if f.Secs > 0 {
		return f.Secs
	}
	return x.Seconds()
}

// Record keeps a sample.
func (x *Run) Record(series, label, metric string, value float64, unit string) {
	x.samples = append(x.samples, Sample{Series: series, Label: label, Metric: metric, Value: value, Unit: unit})
}

// Mbit is a result's throughput in Mbit/s.
func Mbit(r *netperf.Result) float64 { return r.Throughput / 1e6 }

// Progress shows what the lab is doing: a bar per phase on a terminal,
// a line per phase otherwise.
type Progress struct {
	Out      io.Writer
	Terminal bool
	mu       sync.Mutex
}

// Phase announces a phase of expected length and returns its end.
func (p *Progress) Phase(exp, phase string, d time.Duration) func() {
	if p == nil || p.Out == nil {
		return func() {}
	}
	return p.phase(exp, phase, d)
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Action is a vnet command run at an offset into a measurement.
type Action struct {
	At   time.Duration
	Args []string // vnet's arguments, e.g. link vm eth1 net2
}

// MeasureWhile runs one flow once and, while it runs, the actions at their
// offsets: what a user does to a running VM, measured from inside it.
func (x *Run) MeasureWhile(phase string, f Flow, actions ...Action) (*netperf.Result, error) {
	type outcome struct {
		res []*netperf.Result
		err error
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		res, err := x.measureOnce(phase, []Flow{f})
		done <- outcome{res, err}
	}()
	var errs []error
	for _, a := range actions {
		time.Sleep(time.Until(start.Add(a.At)))
		if _, err := x.vnet(context.Background(), a.Args...); err != nil {
			errs = append(errs, err)
		}
	}
	o := <-done
	if o.err != nil {
		errs = append(errs, o.err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return o.res[0], nil
}

// NetnsOf is the identity of a node's network namespace ("net:[4026532...]"):
// it changes only if the namespace is made again.
func (x *Run) NetnsOf(node string) (string, error) {
	out, err := x.vnet(context.Background(), "exec", node, "--", "readlink", "/proc/self/ns/net")
	return strings.TrimSpace(string(out)), err
}
