package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Options configure a lab run.
type Options struct {
	Exe      string // the vnet binary to drive
	OutDir   string
	Quick    bool
	Repeat   int
	Command  string // as typed, for the report
	Progress *Progress
	Log      io.Writer // one line per experiment
}

// RunExperiments calibrates the machine for the selected experiments'
// line rates, then runs each experiment Repeat times, each time on its own
// testbeds, which are destroyed afterwards whatever happened. An
// experiment that fails is recorded as an error and the others still run.
// It returns the outcomes; the error is only for what stops the whole run.
func RunExperiments(exps []*Experiment, o Options) (*RunInfo, []Outcome, error) {
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, nil, err
	}
	db, err := OpenDB(o.OutDir)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	state, err := os.MkdirTemp("", "vnet-lab-state")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(state)
	suffix := RunSuffix()
	info := &RunInfo{Started: time.Now().UTC(), Machine: machineInfo(), Quick: o.Quick, Repeat: max(1, o.Repeat), Command: o.Command}
	fmt.Fprintf(o.Log, "machine: %s\n", info.Machine)
	cal, scales, err := calibrateFor(exps, o, state, suffix)
	if err != nil {
		return nil, nil, err
	}
	info.Calibration = cal
	fmt.Fprintf(o.Log, "calibration: %s\n", cal)
	if err := db.startRun(info); err != nil {
		return nil, nil, err
	}
	var outcomes []Outcome
	for i, e := range exps {
		fmt.Fprintf(o.Log, "[%d/%d] %s: %s\n", i+1, len(exps), e.Name, e.Title)
		out := Outcome{Experiment: e.Name, Scale: scales[e.Name]}
		if out.Scale != 1 {
			fmt.Fprintf(o.Log, "      at a tenth of its line rates: the machine does not carry them, and its shape is rate-free\n")
		}
		start := time.Now()
		for rep := 0; rep < info.Repeat && out.Error == ""; rep++ {
			x := &Run{Exe: o.Exe, StateDir: state, Quick: o.Quick, Scale: out.Scale, Suffix: suffix, Rep: rep, Progress: o.Progress, name: e.Name}
			if info.Repeat > 1 {
				x.name = fmt.Sprintf("%s #%d", e.Name, rep+1)
			}
			runErr := e.Run(x)
			if err := x.Destroy(); err != nil && runErr == nil {
				runErr = fmt.Errorf("tear down: %w", err)
			}
			out.Samples = append(out.Samples, x.samples...)
			if runErr != nil {
				out.Error = runErr.Error()
			}
		}
		out.Seconds = time.Since(start).Seconds()
		out.Verdict = assess(e, out, cal)
		if err := db.addOutcome(info.ID, out); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(o.Log, "      %s: %s (%.0f s)\n", out.Verdict.Status, oneLine(out.Verdict), out.Seconds)
		outcomes = append(outcomes, out)
	}
	info.Finished = time.Now().UTC()
	if err := db.finishRun(info); err != nil {
		return nil, nil, err
	}
	return info, outcomes, nil
}

// oneLine is a verdict's reason in a line: why it was inconclusive, or
// the clause that decided it.
func oneLine(v Verdict) string {
	s := v.Decided
	if v.Status == Inconclusive {
		s = v.Reason + " (the clauses read: " + v.Decided + ")"
	}
	if v.Flips != "" {
		s += "; " + v.Flips
	}
	return s
}

// calibrateFor measures the line rates the experiments use, and a tenth of
// them for rate-free experiments whose rates the machine cannot carry, and
// decides the scale each experiment runs at.
func calibrateFor(exps []*Experiment, o Options, state, suffix string) (*Calibration, map[string]Scale, error) {
	k, err := NewCalibrator(o.Exe, state, suffix, o.Progress)
	if err != nil {
		return nil, nil, err
	}
	var rates []float64
	for _, e := range exps {
		for _, l := range e.Needs.Lines {
			rates = appendNew(rates, l)
		}
	}
	k.Measure(rates)
	var tenths []float64
	for _, e := range exps {
		if e.Needs.RateFree && !k.c.Holds(e.Needs.Lines) {
			for _, l := range e.Needs.Lines {
				tenths = appendNew(tenths, l/10)
			}
		}
	}
	if len(tenths) > 0 && k.c.Error == "" {
		k.Measure(tenths)
	}
	closeErr := k.Close()
	cal := k.Calibration()
	if closeErr != nil {
		return nil, nil, fmt.Errorf("calibration tear down: %w", closeErr)
	}
	scales := map[string]Scale{}
	for _, e := range exps {
		scales[e.Name] = chooseScale(e, cal)
	}
	return cal, scales, nil
}

// chooseScale runs an experiment at its catalogue rates unless the machine
// cannot carry them, its shape is rate-free, and a tenth of them it can.
func chooseScale(e *Experiment, cal *Calibration) Scale {
	if len(e.Needs.Lines) == 0 || !e.Needs.RateFree || cal.Holds(e.Needs.Lines) {
		return 1
	}
	var tenth []float64
	for _, l := range e.Needs.Lines {
		tenth = append(tenth, l/10)
	}
	if cal.Holds(tenth) {
		return 0.1
	}
	return 1
}

// RunSuffix names this run's infras apart from any other run's on the
// machine: the process ID is unique among running processes, in base 36
// it is at most 5 characters, so "lab-s4c-" plus it stays a valid infra
// name (20 characters at most) and namespace name.
func RunSuffix() string { return strconv.FormatInt(int64(os.Getpid()), 36) }

// DescribeMachine is the machine line of a report: hardware, kernel and
// how fast it wakes an idle CPU (exe: the vnet binary, for the probe).
func DescribeMachine(exe string) string { return machineInfo() + "; " + wakeInfo(exe) }

// wakeInfo is the wake probe's finding, or why there is none: a run does
// not stop for it.
func wakeInfo(exe string) string {
	w, err := ProbeWake(context.Background(), exe, 1)
	if err != nil {
		return "no wake probe: " + err.Error()
	}
	return w.String()
}

// machineInfo describes this machine for the report.
func machineInfo() string {
	host, _ := os.Hostname()
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if _, v, ok := strings.Cut(line, ":"); ok {
					model = strings.TrimSpace(v)
				}
				break
			}
		}
	}
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%s: %d x %s, Linux %s", host, runtime.NumCPU(), model, strings.TrimSpace(string(rel)))
}
