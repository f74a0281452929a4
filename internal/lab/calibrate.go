package lab

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/cpustat"
	"github.com/vnet-project/vnet/internal/plan"
)

// Calibration is what this machine can emulate, measured before a run:
// how much of each line rate a shaped vnet wire carries, what an unshaped
// veth carries, how fast a round trip crosses cores, and how many cores
// are there and idle. Verdicts that rest on something it shows missing
// are inconclusive rather than "not reproduced".
type Calibration struct {
	Cores     int            `json:"cores"`
	FreeCores float64        `json:"free_cores"` // idle cores, averaged over a second before anything ran
	Wake      *Wake          `json:"wake,omitempty"`
	WakeError string         `json:"wake_error,omitempty"`
	Lines     []LineFidelity `json:"lines,omitempty"`
	Unshaped  float64        `json:"unshaped_mbit,omitempty"` // VM to VM through a bridge, no shaper
	Ceiling   float64        `json:"wire_ceiling_mbit,omitempty"`
	Seconds   float64        `json:"seconds"`
	Error     string         `json:"error,omitempty"` // why the line measurements are missing
}

// LineFidelity is one line rate as this machine carried it, in Mbit/s.
type LineFidelity struct {
	Nominal  float64 `json:"nominal_mbit"`
	Achieved float64 `json:"achieved_mbit"`
}

// Ratio is achieved / nominal.
func (l LineFidelity) Ratio() float64 { return l.Achieved / l.Nominal }

// Fidelity returns how much of a nominal rate (Mbit/s) the machine
// carried, and whether that rate was measured.
func (c *Calibration) Fidelity(mbit float64) (float64, bool) {
	if c == nil {
		return 0, false
	}
	for _, l := range c.Lines {
		if math.Abs(l.Nominal-mbit) < 1e-6 {
			return l.Ratio(), true
		}
	}
	return 0, false
}

// Holds reports whether every rate is measured and carried faithfully.
func (c *Calibration) Holds(rates []float64) bool {
	for _, r := range rates {
		if f, ok := c.Fidelity(r); !ok || f < fidelity {
			return false
		}
	}
	return true
}

// String is the calibration as the report's header line gives it.
func (c *Calibration) String() string {
	if c == nil {
		return "no calibration"
	}
	var parts []string
	for _, l := range c.Lines {
		s := fmt.Sprintf("%s line %.0f%% (%.0f Mbit/s)", rateWords(l.Nominal), 100*l.Ratio(), l.Achieved)
		if l.Ratio() < fidelity {
			s += " BELOW 90%"
		}
		parts = append(parts, s)
	}
	if c.Error != "" {
		parts = append(parts, "lines not measured: "+c.Error)
	}
	if c.Unshaped > 0 {
		parts = append(parts, fmt.Sprintf("unshaped veth %s/s", rateWords(math.Round(c.Unshaped))))
	}
	switch {
	case c.Wake != nil:
		parts = append(parts, c.Wake.String())
	case c.WakeError != "":
		parts = append(parts, "no wake probe: "+c.WakeError)
	}
	parts = append(parts, fmt.Sprintf("%d cores, %.1f idle", c.Cores, c.FreeCores))
	if c.Ceiling > 0 {
		parts = append(parts, fmt.Sprintf("wires capped at %s by %s", rateWords(c.Ceiling), plan.WireCeilingEnv))
	}
	return strings.Join(parts, "; ") + fmt.Sprintf(" (calibrated in %.0f s)", c.Seconds)
}

// calibrationSecs is the length of each line's measurement: long enough
// for TCP to fill a 10 Mbit line's bucket and settle, short enough that a
// whole calibration stays a small part of a quick run.
const calibrationSecs = 2

// Calibrator measures lines on one vnet testbed: a pair of native hosts
// per line rate on one emulated physical switch, and two VMs on a private
// switch for the unshaped veth. Measure may be called again for more
// rates; Close destroys the testbed.
type Calibrator struct {
	x     *Run
	c     *Calibration
	start time.Time
	rates []float64 // pairs in the testbed
}

// NewCalibrator takes the machine's cores, idle cores and wake latency
// (3 s) and returns a calibrator for the line rates.
func NewCalibrator(exe, stateDir, suffix string, progress *Progress) (*Calibrator, error) {
	k := &Calibrator{start: time.Now(), c: &Calibration{Cores: runtime.NumCPU()},
		x: &Run{Exe: exe, StateDir: stateDir, Suffix: suffix, Scale: 1, Progress: progress, name: "calibration"}}
	ceiling, err := plan.WireCeiling()
	if err != nil {
		return nil, err
	}
	k.c.Ceiling = float64(ceiling) / 1e6
	k.c.FreeCores = idleCores(time.Second)
	done := progress.Phase("calibration", "wake probe", 2*time.Second)
	w, err := ProbeWake(context.Background(), exe, 1)
	done()
	if err != nil {
		k.c.WakeError = err.Error()
	} else {
		k.c.Wake = &w
	}
	return k, nil
}

// idleCores is how many cores sat idle over d.
func idleCores(d time.Duration) float64 {
	a, err := cpustat.Take()
	if err != nil {
		return math.NaN()
	}
	time.Sleep(d)
	b, err := cpustat.Take()
	if err != nil {
		return math.NaN()
	}
	u := cpustat.Between(a, b)
	return float64(u.NumCPU) * (1 - u.Util/100)
}

// Calibration returns what has been measured so far.
func (k *Calibrator) Calibration() *Calibration {
	k.c.Seconds = time.Since(k.start).Seconds()
	return k.c
}

// Measure adds the line rates (Mbit/s) not measured yet, and the unshaped
// veth the first time. A failure is kept in the calibration, not returned:
// a run goes on without it, and its verdicts then rest on their baselines.
func (k *Calibrator) Measure(rates []float64) {
	var todo []float64
	for _, r := range rates {
		if _, ok := k.c.Fidelity(r); !ok && !slices.Contains(todo, r) {
			todo = append(todo, r)
		}
	}
	first := len(k.rates) == 0
	if len(todo) == 0 && !first {
		return
	}
	if err := k.measure(todo, first); err != nil {
		if k.c.Error == "" {
			k.c.Error = err.Error()
		}
	}
	slices.SortFunc(k.c.Lines, func(a, b LineFidelity) int { return cmp.Compare(a.Nominal, b.Nominal) })
}

func (k *Calibrator) measure(todo []float64, first bool) error {
	k.rates = append(k.rates, todo...)
	if err := k.x.Apply("lab-cal", calibrationSpec(k.rates)); err != nil {
		return err
	}
	if first {
		if err := k.x.Netserver("lab-cal/u2"); err != nil {
			return err
		}
	}
	for _, r := range todo {
		if err := k.x.Netserver("lab-cal/" + pairHost("b", r)); err != nil {
			return err
		}
	}
	for _, r := range todo {
		i := slices.Index(k.rates, r)
		flow := Flow{From: "lab-cal/" + pairHost("a", r), Secs: calibrationSecs,
			Args: append([]string{"-H", fmt.Sprintf("10.79.%d.2", i)}, patternArgs("256K", "64K")...)}
		best := 0.0
		// A line that falls short gets a second try: one moment of
		// another process's load should not make a whole run's verdicts
		// inconclusive, a machine that cannot carry the rate fails twice.
		for try := 0; try < 2 && best < fidelity*r; try++ {
			res, err := k.x.Measure(rateWords(r)+" line", flow)
			if err != nil {
				return err
			}
			best = max(best, Mbit(res[0]))
		}
		k.c.Lines = append(k.c.Lines, LineFidelity{Nominal: r, Achieved: best})
	}
	if first {
		res, err := k.x.Measure("unshaped veth", Flow{From: "lab-cal/u1", Secs: calibrationSecs,
			Args: append([]string{"-H", "10.79.255.2"}, patternArgs("256K", "64K")...)})
		if err != nil {
			return err
		}
		k.c.Unshaped = Mbit(res[0])
	}
	return nil
}

// Close destroys the calibration testbed.
func (k *Calibrator) Close() error { return k.x.Destroy() }

func pairHost(side string, mbit float64) string { return fmt.Sprintf("%s%g", side, mbit) }

// calibrationSpec is one pair of native hosts per line rate (host aN sends
// through its NIC's shaper and the switch port's shaper to bN, as every
// testbed's traffic crosses a line) and two unlimited VMs on a private
// switch, whose veths no shaper touches.
func calibrationSpec(rates []float64) string {
	var b strings.Builder
	b.WriteString("name: lab-cal\nhosts:\n  - {name: hv}\n")
	for i, r := range rates {
		for j, side := range []string{"a", "b"} {
			fmt.Fprintf(&b, "  - {name: %s, native: true, nics: [{name: eth0, speed: %gMbit, ip: 10.79.%d.%d/24}]}\n", pairHost(side, r), r, i, j+1)
		}
	}
	b.WriteString(`switches:
  - {name: priv, hosts: [hv], portgroups: [{name: pg-cal}]}
vms:
  - {name: u1, host: hv, nics: [{portgroup: pg-cal, ip: 10.79.255.1/24}]}
  - {name: u2, host: hv, nics: [{portgroup: pg-cal, ip: 10.79.255.2/24}]}
`)
	return b.String()
}

// Calibrate measures the machine for the given line rates (Mbit/s) on a
// testbed of its own, which it destroys.
func Calibrate(exe, stateDir, suffix string, rates []float64, progress *Progress) (*Calibration, error) {
	k, err := NewCalibrator(exe, stateDir, suffix, progress)
	if err != nil {
		return nil, err
	}
	k.Measure(rates)
	if err := k.Close(); err != nil {
		return k.Calibration(), fmt.Errorf("calibration tear down: %w", err)
	}
	return k.Calibration(), nil
}

// CatalogRates is every line rate the catalogue uses, and a tenth of those
// of rate-free experiments: what `vnet lab machine` measures.
func CatalogRates() []float64 {
	out := slices.Clone(informativeRates)
	for _, e := range Catalog {
		for _, l := range e.Needs.Lines {
			out = appendNew(out, l)
			if e.Needs.RateFree {
				out = appendNew(out, l/10)
			}
		}
	}
	slices.Sort(out)
	return out
}

// informativeRates are lines the catalogue builds that no verdict rests
// on: S1's 10 Gbit NICs, where CPU efficiency, not the line, is measured.
// `vnet lab machine` measures them; a run does not.
var informativeRates = []float64{10000}

func appendNew(s []float64, v float64) []float64 {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// Table is the calibration as `vnet lab machine` prints it, a line each.
func (c *Calibration) Table() string {
	var b strings.Builder
	for _, l := range c.Lines {
		verdict := "holds"
		if l.Ratio() < fidelity {
			verdict = "does NOT hold: verdicts resting on it are inconclusive"
		}
		fmt.Fprintf(&b, "line %-9s carried %8.1f Mbit/s  %4.0f%%  %s\n", rateWords(l.Nominal), l.Achieved, 100*l.Ratio(), verdict)
	}
	if c.Error != "" {
		fmt.Fprintf(&b, "lines not measured: %s\n", c.Error)
	}
	if c.Unshaped > 0 {
		fmt.Fprintf(&b, "unshaped veth      carried %8.1f Mbit/s\n", c.Unshaped)
	}
	switch {
	case c.Wake != nil:
		fmt.Fprintf(&b, "wake: %s\n", c.Wake)
	case c.WakeError != "":
		fmt.Fprintf(&b, "wake: not probed: %s\n", c.WakeError)
	}
	fmt.Fprintf(&b, "cores: %d, %.1f idle\n", c.Cores, c.FreeCores)
	if c.Ceiling > 0 {
		fmt.Fprintf(&b, "wire ceiling: %s (%s)\n", rateWords(c.Ceiling), plan.WireCeilingEnv)
	}
	fmt.Fprintf(&b, "took %.1f s\n", c.Seconds)
	return b.String()
}

// MachineLine is the machine's hardware and kernel, as reports head them.
func MachineLine() string { return machineInfo() }
