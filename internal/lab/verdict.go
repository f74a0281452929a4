package lab

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Verdict says whether a published result's shape holds here, and why.
type Verdict struct {
	Status   string // Reproduced, NotReproduced, Inconclusive or Failed
	Expected string // the shape, as a testable statement
	Observed string // what was measured, in the statement's terms
	Decided  string // the clause that decided it, with its numbers
	Reason   string // why the testbed did not hold (Inconclusive)
	Note     string // how it ran, when not as the catalogue says (scaled)
	Flips    string // how the repeats' own verdicts differ, if they do
	Clauses  []Clause
}

// Verdict statuses.
const (
	Reproduced    = "reproduced"
	NotReproduced = "not reproduced"
	Inconclusive  = "inconclusive"
	Failed        = "error"
)

// fidelity is the share of a line's nominal rate that a testbed must carry
// for a verdict to be about vnet rather than about the machine.
const fidelity = 0.9

// Clause is one testable part of a shape: Value Op Limit.
type Clause struct {
	What      string  // e.g. "NFS p99 ratio with IOC"
	Value     float64 // measured; NaN if a figure is missing
	Op        string  // ">", ">=", "<", "<="
	Limit     float64
	Published float64 // the study's figure in the same terms, 0 if it gave none
	// Info clauses are shown and drawn but decide nothing (S1's cells,
	// whose count is the clause that decides).
	Info bool
}

// Holds reports whether the clause is met; a missing figure never is.
func (c Clause) Holds() bool {
	v := c.Value
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	switch c.Op {
	case ">":
		return v > c.Limit
	case ">=":
		return v >= c.Limit
	case "<":
		return v < c.Limit
	case "<=":
		return v <= c.Limit
	}
	return false
}

var negated = map[string]string{">": "<=", ">=": "<", "<": ">=", "<=": ">"}

// String states the clause with the relation that actually holds, e.g.
// "NFS p99 ratio with IOC 1.537 > 1.5" for a clause "<= 1.5" that failed.
func (c Clause) String() string {
	if math.IsNaN(c.Value) || math.IsInf(c.Value, 0) {
		return fmt.Sprintf("%s not measured (needs %s %s)", c.What, c.Op, limitString(c.Limit))
	}
	op := c.Op
	if !c.Holds() {
		op = negated[op]
	}
	return fmt.Sprintf("%s %s %s %s", c.What, valueString(c.Value), op, limitString(c.Limit))
}

// valueString shows a measured figure with about four significant digits.
func valueString(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100 || (v == math.Trunc(v) && a >= 2):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func limitString(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// judge makes a verdict from clauses: reproduced when every deciding clause
// holds. The deciding clause is the first that fails or, when all hold,
// the one closest to failing. extra, if given, is appended to Observed.
func judge(expected string, clauses []Clause, extra ...string) Verdict {
	v := Verdict{Status: Reproduced, Expected: expected, Clauses: clauses}
	var parts []string
	closest, margin := -1, math.Inf(1)
	for i, c := range clauses {
		parts = append(parts, c.String())
		if c.Info {
			continue
		}
		if !c.Holds() {
			if v.Status == Reproduced {
				v.Status, v.Decided = NotReproduced, c.String()
			}
			continue
		}
		if m := math.Abs(c.Value-c.Limit) / max(math.Abs(c.Limit), 1e-9); m < margin {
			closest, margin = i, m
		}
	}
	if v.Status == Reproduced && closest >= 0 {
		v.Decided = "every clause holds; the closest: " + clauses[closest].String()
	}
	if v.Status == Reproduced && closest < 0 {
		v.Status, v.Decided = NotReproduced, "no clause to judge"
	}
	v.Observed = strings.Join(append(parts, extra...), "; ")
	return v
}

// ratio is a/b, NaN where either is missing or b is 0.
func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// assess is an experiment's verdict: the repeats' samples judged together
// (each figure the median over repeats), each repeat judged alone to see
// whether the verdict flips, and the testbed checked against the
// calibration and the experiment's own baselines. An inconclusive verdict
// keeps the clauses' reading in Observed and Decided; only its status says
// the machine, not vnet, decided it.
func assess(e *Experiment, o Outcome, cal *Calibration) Verdict {
	sc := o.Scale.norm()
	if o.Error != "" {
		v := e.Judge(nil, sc)
		return Verdict{Status: Failed, Expected: v.Expected, Observed: "-", Decided: "error: " + o.Error}
	}
	v := e.Judge(o.Samples, sc)
	if n := o.Samples.Reps(); n > 1 {
		count := map[string]int{}
		for r := 0; r < n; r++ {
			count[e.Judge(o.Samples.Rep(r), sc).Status]++
		}
		if len(count) > 1 {
			var parts []string
			for _, st := range []string{Reproduced, NotReproduced} {
				if count[st] > 0 {
					parts = append(parts, fmt.Sprintf("%s in %d", st, count[st]))
				}
			}
			v.Flips = fmt.Sprintf("flips between repeats: %s of %d", strings.Join(parts, ", "), n)
		}
	}
	if sc != 1 {
		v.Note = fmt.Sprintf("ran at %s of its line rates (%s instead of %s)", scaleWords(sc), rateWords(sc.Of(1000)), rateWords(1000))
		if len(e.Needs.Lines) > 0 {
			v.Note = fmt.Sprintf("ran at %s of its line rates (%s instead of %s)", scaleWords(sc), rateWords(sc.Of(e.Needs.Lines[0])), rateWords(e.Needs.Lines[0]))
		}
	}
	if reasons := testbedReasons(e, o.Samples, sc, cal); len(reasons) > 0 {
		v.Status, v.Reason = Inconclusive, strings.Join(reasons, "; ")
	}
	return v
}

// testbedReasons says why the testbed did not hold, if it did not.
func testbedReasons(e *Experiment, s Samples, sc Scale, cal *Calibration) []string {
	var out []string
	if cal != nil {
		for _, l := range e.Needs.Lines {
			if f, ok := cal.Fidelity(sc.Of(l)); ok && f < fidelity {
				out = append(out, fmt.Sprintf("the machine carried the %s line at %.0f%%", rateWords(sc.Of(l)), 100*f))
			}
		}
		if e.Needs.CrossCore && cal.Wake != nil && cal.Wake.Slow() {
			out = append(out, fmt.Sprintf("a round trip across cores took %.0f µs against %.0f µs within one (%.1fx)",
				cal.Wake.CrossCPU, cal.Wake.SameCPU, cal.Wake.CrossCPU/cal.Wake.SameCPU))
		}
		if need := e.Needs.Cores; need > 0 {
			switch {
			case cal.Cores > 0 && cal.Cores < need:
				out = append(out, fmt.Sprintf("it needs %d cores and the machine has %d", need, cal.Cores))
			case cal.Cores > 0 && cal.FreeCores < float64(need)-freeCoreSlack:
				out = append(out, fmt.Sprintf("it needs %d idle cores and %.1f were idle when the run began", need, cal.FreeCores))
			}
		}
	}
	if e.Baselines != nil && len(s) > 0 {
		for _, b := range e.Baselines(s, sc) {
			if math.IsNaN(b.Got) || b.Line <= 0 {
				continue
			}
			if b.Got < fidelity*b.Line {
				out = append(out, fmt.Sprintf("its baseline (%s) carried %.0f of %s (%.0f%%)", b.What, b.Got, rateWords(b.Line), 100*b.Got/b.Line))
			}
		}
	}
	return out
}

// freeCoreSlack: other work may take this much of the cores an experiment
// needs before its verdict stops counting.
const freeCoreSlack = 0.5

func scaleWords(sc Scale) string {
	if sc == 0.1 {
		return "a tenth"
	}
	return fmt.Sprintf("%g times", float64(sc))
}

// rateWords writes a rate in Mbit/s as people say it: "1 Gbit", "100 Mbit".
func rateWords(mbit float64) string {
	if mbit >= 1000 {
		return strconv.FormatFloat(mbit/1000, 'f', -1, 64) + " Gbit"
	}
	return strconv.FormatFloat(mbit, 'f', -1, 64) + " Mbit"
}
