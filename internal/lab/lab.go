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
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	Rep    int // which repeat of the experiment measured it, from 0
}

// Samples are an experiment's measurements.
type Samples []Sample

// Get returns a figure: the median over the repeats that measured it (the
// largest, should one repeat have measured it twice); NaN if absent, so
// that a ratio of missing figures cannot pass a clause.
func (s Samples) Get(series, label, metric string) float64 {
	per := map[int]float64{}
	for _, x := range s {
		if x.Series == series && x.Label == label && x.Metric == metric {
			if v, ok := per[x.Rep]; !ok || x.Value > v {
				per[x.Rep] = x.Value
			}
		}
	}
	if len(per) == 0 {
		return math.NaN()
	}
	vals := make([]float64, 0, len(per))
	for _, v := range per {
		vals = append(vals, v)
	}
	return median(vals)
}

// Reps returns how many repeats the samples come from.
func (s Samples) Reps() int {
	n := 0
	for _, x := range s {
		n = max(n, x.Rep+1)
	}
	return n
}

// Rep returns one repeat's samples.
func (s Samples) Rep(r int) Samples {
	var out Samples
	for _, x := range s {
		if x.Rep == r {
			out = append(out, x)
		}
	}
	return out
}

func median(v []float64) float64 {
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// Experiment is one experiment of the catalogue.
type Experiment struct {
	Name      string
	Study     string // S0..S4
	Title     string
	Published string // the published result, with its figures
	Scaling   string // how this machine stands in for the study's hardware
	Needs     Needs  // what the verdict rests on besides vnet
	Run       func(x *Run) error
	// Judge states the shape as clauses over the samples; sc is the
	// scale the experiment ran at (its rates in Mbit/s are sc times the
	// catalogue's).
	Judge func(s Samples, sc Scale) Verdict
	// Baselines are the phases in which no vnet feature is in play, so
	// their rate is the line's: below 90% of it, the testbed did not hold.
	Baselines func(s Samples, sc Scale) []Baseline
	Chart     Chart
}

// Needs are what a verdict rests on besides vnet itself.
type Needs struct {
	Lines     []float64 // the line rates (Mbit/s, at scale 1) whose fidelity the shape rests on
	RateFree  bool      // the shape holds at any line rate, so a tenth of them will do
	CrossCore bool      // it rests on round trips between cores
	Cores     int       // cores it keeps busy at once
}

// Baseline is a phase that should run at its line rate.
type Baseline struct {
	What      string  // e.g. "native send"
	Got, Line float64 // Mbit/s
}

// Scale is the factor an experiment's line rates ran at: 1, or a tenth
// when the machine could not carry them and the shape is rate-free.
type Scale float64

// Of scales a rate in Mbit/s.
func (sc Scale) Of(mbit float64) float64 { return mbit * float64(sc.norm()) }

// Rate is a scaled rate as a spec writes it.
func (sc Scale) Rate(mbit float64) string { return fmt.Sprintf("%gMbit", sc.Of(mbit)) }

func (sc Scale) norm() Scale {
	if sc <= 0 {
		return 1
	}
	return sc
}

// Chart says how the report draws an experiment's samples.
type Chart struct {
	Metric    string // which metric's samples to draw
	YLabel    string
	ShapeUnit string // the unit of the verdict's clauses; "ratio" if empty
}

// Run is one execution of an experiment.
type Run struct {
	Exe      string // the vnet binary
	StateDir string
	Quick    bool
	Scale    Scale  // the line rates' scale: testbeds write x.Scale.Rate(1000)
	Suffix   string // appended to every infra name, so that concurrent runs do not meet
	Rep      int    // which repeat this is, from 0
	Progress *Progress

	name    string // the experiment's, for progress
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

// Infra is the real name of one of the lab's infras: the catalogue says
// "lab-s0", the kernel sees "lab-s0-<suffix>".
func (x *Run) Infra(name string) string {
	if x.Suffix == "" {
		return name
	}
	return name + "-" + x.Suffix
}

// Node is the real INFRA/NODE of a catalogue's "lab-s0/vm1".
func (x *Run) Node(ref string) string {
	infra, node, ok := strings.Cut(ref, "/")
	if !ok {
		return ref
	}
	return x.Infra(infra) + "/" + node
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

// Apply builds (or converges) a testbed from a spec whose first line is
// "name: <catalogue name>".
func (x *Run) Apply(name, yaml string) error {
	real := x.Infra(name)
	yaml = renameInfra(yaml, name, real)
	f := filepath.Join(x.StateDir, real+".yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		return err
	}
	if _, err := x.vnet(context.Background(), "apply", f); err != nil {
		return err
	}
	if !slices.Contains(x.infras, real) {
		x.infras = append(x.infras, real)
	}
	return nil
}

// renameInfra gives a testbed's spec its real infra name.
func renameInfra(yaml, from, to string) string {
	return strings.Replace(yaml, "name: "+from+"\n", "name: "+to+"\n", 1)
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
	_, err := x.vnet(context.Background(), "exec", x.Node(node), "--", x.Exe, "netserver")
	return err
}

// Flow is one netperf run from a node.
type Flow struct {
	From string   // INFRA/NODE, as the catalogue names it
	Args []string // netperf's arguments (without --json, -l)
	Secs int      // 0: the run's default
	// Timeline names the flow in the experiment's timeline chart; a flow
	// with a name reports its rate every timelineStep.
	Timeline string
}

const timelineStep = 0.25 // seconds

// Measure runs flows at once and returns each one's result.
func (x *Run) Measure(phase string, flows ...Flow) ([]*netperf.Result, error) {
	return x.measureOnce(phase, flows)
}

// Point is one interim rate of a flow: at seconds into it, Mbit/s.
type Point struct{ At, Mbit float64 }

func (x *Run) measureOnce(phase string, flows []Flow) ([]*netperf.Result, error) {
	res, _, err := x.measure(phase, flows)
	return res, err
}

// measure runs the flows at once; for those with a Timeline name it also
// returns their interim rates.
func (x *Run) measure(phase string, flows []Flow) ([]*netperf.Result, [][]Point, error) {
	longest := 0
	for _, f := range flows {
		longest = max(longest, x.secs(f))
	}
	done := x.Progress.Phase(x.name, phase, time.Duration(longest)*time.Second)
	defer done()
	out := make([]*netperf.Result, len(flows))
	points := make([][]Point, len(flows))
	errs := make([]error, len(flows))
	var wg sync.WaitGroup
	for i, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], points[i], errs[i] = x.netperf(f)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return out, points, nil
}

func (x *Run) netperf(f Flow) (*netperf.Result, []Point, error) {
	args := []string{"exec", x.Node(f.From), "--", x.Exe, "netperf", "-P", "0", "-l", fmt.Sprint(x.secs(f))}
	if f.Timeline != "" {
		args = append(args, "--json-stream", "-D", fmt.Sprint(timelineStep))
	} else {
		args = append(args, "--json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(x.secs(f)+60)*time.Second)
	defer cancel()
	b, err := x.vnet(ctx, append(args, f.Args...)...)
	if err != nil {
		return nil, nil, err
	}
	if f.Timeline == "" {
		var rep netperf.Report
		if err := json.Unmarshal(b, &rep); err != nil || len(rep.Results) == 0 {
			return nil, nil, fmt.Errorf("netperf from %s: unreadable output: %v", f.From, err)
		}
		return rep.Results[0], nil, nil
	}
	var pts []Point
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var ev netperf.StreamEvent
		if err := dec.Decode(&ev); err != nil {
			return nil, nil, fmt.Errorf("netperf from %s: unreadable stream: %v", f.From, err)
		}
		switch {
		case ev.Interim != nil:
			pts = append(pts, Point{At: ev.Interim.At, Mbit: ev.Interim.Rate / 1e6})
		case ev.Report != nil && len(ev.Report.Results) > 0:
			return ev.Report.Results[0], pts, nil
		}
	}
}

func (x *Run) secs(f Flow) int {
	if f.Secs > 0 {
		return f.Secs
	}
	return x.Seconds()
}

// Record keeps a sample.
func (x *Run) Record(series, label, metric string, value float64, unit string) {
	x.samples = append(x.samples, Sample{Series: series, Label: label, Metric: metric, Value: value, Unit: unit, Rep: x.Rep})
}

// TimelineMetric is the metric of timeline samples, whose labels are
// "<panel> @ <seconds>".
const TimelineMetric = "timeline"

// MeasurePhase is Measure for an experiment told as a story: its flows'
// rates over time are kept as phase k of the timeline panel, so the
// report can draw the phases one after another.
func (x *Run) MeasurePhase(panel string, k int, phase string, flows ...Flow) ([]*netperf.Result, error) {
	res, pts, err := x.measure(phase, flows)
	if err != nil {
		return nil, err
	}
	for i, f := range flows {
		if f.Timeline == "" {
			continue
		}
		off := float64(k * x.secs(f))
		for _, p := range pts[i] {
			x.Record(f.Timeline, fmt.Sprintf("%s @ %.2f", panel, off+p.At), TimelineMetric, p.Mbit, "Mbit/s")
		}
	}
	return res, nil
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
	Args []string // vnet's arguments, e.g. link --infra lab-s3r vm eth1 net2
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
		if _, err := x.vnet(context.Background(), x.realArgs(a.Args)...); err != nil {
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

// realArgs gives a command's --infra its real name.
func (x *Run) realArgs(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "--infra" {
			out[i+1] = x.Infra(out[i+1])
		}
	}
	return out
}

// NetnsOf is the identity of a node's network namespace ("net:[4026532...]"):
// it changes only if the namespace is made again.
func (x *Run) NetnsOf(node string) (string, error) {
	out, err := x.vnet(context.Background(), "exec", x.Node(node), "--", "readlink", "/proc/self/ns/net")
	return strings.TrimSpace(string(out)), err
}
