package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
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

// RunExperiments runs the experiments in order, each on its own testbeds,
// which are destroyed afterwards whatever happened. An experiment that
// fails is recorded as an error and the others still run. It returns the
// outcomes; the error is only for what stops the whole run.
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
	info := &RunInfo{Started: time.Now().UTC(), Machine: DescribeMachine(o.Exe), Quick: o.Quick, Repeat: max(1, o.Repeat), Command: o.Command}
	fmt.Fprintf(o.Log, "machine: %s\n", info.Machine)
	if err := db.startRun(info); err != nil {
		return nil, nil, err
	}
	var outcomes []Outcome
	for i, e := range exps {
		fmt.Fprintf(o.Log, "[%d/%d] %s: %s\n", i+1, len(exps), e.Name, e.Title)
		x := &Run{Exe: o.Exe, StateDir: state, Quick: o.Quick, Repeat: info.Repeat, Progress: o.Progress, exp: e}
		start := time.Now()
		runErr := e.Run(x)
		if err := x.Destroy(); err != nil && runErr == nil {
			runErr = fmt.Errorf("tear down: %w", err)
		}
		out := Outcome{Experiment: e.Name, Samples: x.samples, Seconds: time.Since(start).Seconds()}
		if runErr != nil {
			out.Error = runErr.Error()
			out.Verdict = Verdict{Status: Failed, Expected: e.Judge(nil).Expected, Observed: "-"}
		} else {
			out.Verdict = e.Judge(x.samples)
		}
		for _, s := range x.samples {
			if err := db.addSample(info.ID, e.Name, s); err != nil {
				return nil, nil, err
			}
		}
		if err := db.addVerdict(info.ID, e.Name, out.Verdict, out.Error, out.Seconds); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(o.Log, "      %s: %s (%.0f s)\n", out.Verdict.Status, firstNonEmpty(out.Error, out.Verdict.Observed), out.Seconds)
		outcomes = append(outcomes, out)
	}
	info.Finished = time.Now().UTC()
	if err := db.finishRun(info); err != nil {
		return nil, nil, err
	}
	return info, outcomes, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

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
