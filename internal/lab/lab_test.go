package lab

import (
	"database/sql"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/spec"
)

// fixture is a fabricated measurement per experiment, with the keys its
// judge reads: value is the first repeat's, the second repeat's is
// value*spread[1].
type fixture struct {
	series, label, metric string
	value                 float64
}

func fixtures() map[string][]fixture {
	thr := "throughput"
	s1 := []fixture{}
	for i, c := range s1Cells {
		s1 = append(s1, fixture{"GRO off", c, "efficiency", 1}, fixture{"GRO on", c, "efficiency", 1 + 0.3*float64(i%3)},
			fixture{"GRO off", c, thr, 3000}, fixture{"GRO on", c, thr, 3500})
	}
	s1 = append(s1, fixture{"GRO off", "native->VM 64KiB", "stack_pps", 600}, fixture{"GRO on", "native->VM 64KiB", "stack_pps", 30},
		fixture{"GRO off", "native->VM 64KiB", "stack_avg_packet", 1477}, fixture{"GRO on", "native->VM 64KiB", "stack_avg_packet", 32000})
	return map[string][]fixture{
		"s0-patterns": {{"send", "default", thr, 950}, {"send", "file", thr, 940}, {"send", "bulk", thr, 955}, {"receive", "default", thr, 930}, {"receive", "bulk", thr, 950},
			{"send", "bulk", "cpu", 40}, {"send", "default", "cpu", 38}},
		"s0-virtualization": {{"native", "send", thr, 950}, {"native", "receive", thr, 949}, {"VM", "send", thr, 940}, {"VM", "receive", thr, 930}},
		"s0-vm-to-vm":       {{"VM to VM", "default", thr, 2400}, {"VM to native", "default", thr, 950}, {"VM to VM", "bulk", thr, 4100}, {"VM to native", "bulk", thr, 955}},
		"s0-smp":            {{"1 vCPU", "bulk send", thr, 950}, {"2 vCPU", "bulk send", thr, 952}, {"1 vCPU", "bulk send", "cpu", 40}, {"2 vCPU", "bulk send", "cpu", 52}},
		"s0-rx-buffers":     {{"VM to VM", "small", thr, 1500}, {"VM to VM", "large", thr, 2100}},
		"s1-lro":            s1,
		"s2-scale-out": {{"send", "1 VMs", thr, 955}, {"send", "2 VMs", thr, 1900}, {"send", "3 VMs", thr, 2850}, {"send", "4 VMs", thr, 3700},
			{"receive", "1 VMs", thr, 950}, {"receive", "2 VMs", thr, 1880}, {"receive", "3 VMs", thr, 2800}, {"receive", "4 VMs", thr, 3650}},
		"s3-multi-nic": {{"VM send", "1 NICs", thr, 955}, {"VM send", "2 NICs", thr, 1910}, {"VM send", "3 NICs", thr, 2860}, {"VM send", "4 NICs", thr, 3000}},
		"s3-relink":    {{"eth1", "linked", thr, 955}, {"eth1", "relinked twice", thr, 950}, {"eth1", "cut for a third", thr, 480}, {"vm", "namespace kept", "kept", 1}},
		"s4-shares-example": {{"VM (25 shares)", "alone", thr, 957}, {"VM (25 shares)", "contended", thr, 205}, {"vMotion (100 shares)", "contended", thr, 750},
			{"25 vs 100 shares", "VM pool alone", "phase", 0}, {"25 vs 100 shares", "VM pool vs vMotion", "phase", 2}},
		"s4-scenario1": {{"without IOC", "VM alone", thr, 690}, {"without IOC", "VM beside vMotion", thr, 500}, {"without IOC", "vMotion", thr, 480},
			{"with IOC", "VM alone", thr, 690}, {"with IOC", "VM beside vMotion", thr, 660}, {"with IOC", "vMotion", thr, 320},
			{"without IOC", "VM alone", "phase", 0}, {"without IOC", "VM + vMotion", "phase", 2}, {"with IOC", "VM alone", "phase", 0}, {"with IOC", "VM + vMotion", "phase", 2}},
		"s4-scenario2": {{"without IOC", "critical flows", "p99", 60}, {"without IOC", "plus vMotion", "p99", 2400}, {"with IOC", "critical flows", "p99", 58}, {"with IOC", "plus vMotion", "p99", 89},
			{"without IOC", "critical flows", "critical_throughput", 470}, {"with IOC", "critical flows", "critical_throughput", 470}, {"with IOC", "plus vMotion", "critical_throughput", 465},
			{"without IOC", "critical flows", "phase", 0}, {"without IOC", "plus vMotion", "phase", 2}},
		"s4-scenario3": {{"no control", "from host2", thr, 880}, {"no control", "from host3", thr, 80}, {"no control", "sum", thr, 960},
			{"limit", "from host2", thr, 290}, {"limit", "from host3", thr, 95}, {"limit", "sum", thr, 385},
			{"limit + ingress shaping", "from host2", thr, 200}, {"limit + ingress shaping", "from host3", thr, 90}, {"limit + ingress shaping", "sum", thr, 290},
			{"migrations into host 1", "no control", "phase", 0}, {"migrations into host 1", "limit", "phase", 2}, {"migrations into host 1", "limit + ingress shaping", "phase", 4}},
	}
}

// fakeRun is a two-repeat run as the database would give it back, on a
// machine whose 1 Gbit line held; s0-smp's second repeat flips it.
func fakeRun(t *testing.T) (*RunInfo, []Outcome) {
	t.Helper()
	info := &RunInfo{ID: 1, Started: time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC), Finished: time.Date(2026, 11, 22, 4, 3, 0, 0, time.UTC),
		Machine: "test machine: 2 x test CPU", Quick: true, Repeat: 2, Command: "vnet lab run --all --quick --repeat 2",
		Calibration: &Calibration{Cores: 2, FreeCores: 1.9, Wake: &Wake{SameCPU: 20, CrossCPU: 23},
			Lines: []LineFidelity{{100, 96}, {1000, 957}}, Unshaped: 10000, Seconds: 12}}
	fx := fixtures()
	var out []Outcome
	for _, e := range Catalog {
		rows, ok := fx[e.Name]
		if !ok {
			t.Fatalf("no fixture for %s", e.Name)
		}
		var s Samples
		for rep := 0; rep < 2; rep++ {
			for i, f := range rows {
				v := f.value
				if rep == 1 && (f.metric == "throughput" || f.metric == "efficiency") {
					v *= 1 + 0.04*float64(i%3) - 0.03
				}
				if rep == 1 && e.Name == "s0-smp" && f.metric == "cpu" && f.series == "2 vCPU" {
					v = 41 // the CPU ratio falls under 1.1 in one repeat
				}
				s = append(s, Sample{Series: f.series, Label: f.label, Metric: f.metric, Value: v, Unit: "u", Rep: rep})
			}
		}
		if strings.HasPrefix(e.Name, "s4-") {
			for rep := 0; rep < 1; rep++ {
				for k := 0; k < 16; k++ {
					at := 0.25 * float64(k+1)
					s = append(s, Sample{Series: "flow a", Label: fmt.Sprintf("%s @ %.2f", timelinePanel(e.Name), at), Metric: TimelineMetric, Value: 500 + 20*float64(k%4), Unit: "Mbit/s"},
						Sample{Series: "flow b", Label: fmt.Sprintf("%s @ %.2f", timelinePanel(e.Name), at), Metric: TimelineMetric, Value: float64(30 * k), Unit: "Mbit/s"})
				}
			}
		}
		o := Outcome{Experiment: e.Name, Samples: s, Seconds: 10, Scale: 1}
		o.Verdict = assess(e, o, info.Calibration)
		out = append(out, o)
	}
	return info, out
}

func timelinePanel(exp string) string {
	switch exp {
	case "s4-shares-example":
		return "25 vs 100 shares"
	case "s4-scenario3":
		return "migrations into host 1"
	}
	return "without IOC"
}

func TestCatalogNamesAreTheContract(t *testing.T) {
	want := "s0-patterns s0-virtualization s0-vm-to-vm s0-smp s0-rx-buffers s1-lro s2-scale-out s3-multi-nic s3-relink s4-shares-example s4-scenario1 s4-scenario2 s4-scenario3"
	var got []string
	for _, e := range Catalog {
		got = append(got, e.Name)
		if e.Run == nil || e.Judge == nil || e.Published == "" || e.Scaling == "" || e.Chart.Metric == "" || Studies[e.Study] == "" {
			t.Errorf("%s is incomplete", e.Name)
		}
		if e.Needs.RateFree && len(e.Needs.Lines) == 0 {
			t.Errorf("%s: rate-free without lines to scale", e.Name)
		}
	}
	if strings.Join(got, " ") != want {
		t.Errorf("catalogue %v", got)
	}
}

func TestJudgesOnEmptySamplesDoNotPanic(t *testing.T) {
	for _, e := range Catalog {
		if v := e.Judge(nil, 1); v.Expected == "" || v.Status != NotReproduced || !strings.Contains(v.Decided, "not measured") {
			t.Errorf("%s: empty samples judged %+v", e.Name, v)
		}
	}
}

func TestClauseSaysWhatDecided(t *testing.T) {
	for _, c := range []struct {
		c     Clause
		holds bool
		want  string
	}{
		{Clause{What: "NFS p99 ratio", Value: 1.5371, Op: "<=", Limit: 1.5}, false, "NFS p99 ratio 1.537 > 1.5"},
		{Clause{What: "NFS p99 ratio", Value: 1.2, Op: "<=", Limit: 1.5}, true, "NFS p99 ratio 1.200 <= 1.5"},
		{Clause{What: "bulk / default", Value: 1.3, Op: ">", Limit: 1.3}, false, "bulk / default 1.300 <= 1.3"},
		{Clause{What: "sum", Value: 383.4, Op: ">=", Limit: 330}, true, "sum 383 >= 330"},
		{Clause{What: "share", Value: 0.251, Op: "<", Limit: 0.24}, false, "share 0.251 >= 0.24"},
		{Clause{What: "x", Value: math.NaN(), Op: ">=", Limit: 1}, false, "x not measured (needs >= 1)"},
	} {
		if c.c.Holds() != c.holds || c.c.String() != c.want {
			t.Errorf("%+v: holds %v, %q; want %v, %q", c.c, c.c.Holds(), c.c.String(), c.holds, c.want)
		}
	}
}

func TestJudgeNamesTheDecidingClause(t *testing.T) {
	s := Samples{{Series: "send", Label: "bulk", Metric: "throughput", Value: 678}, {Series: "send", Label: "default", Metric: "throughput", Value: 242}}
	if v := s0Patterns.Judge(s, 1); v.Status != Reproduced || !strings.Contains(v.Decided, "bulk / default send 2.802 > 1.3") {
		t.Errorf("S0's own figures: %+v", v)
	}
	s = Samples{{Series: "with IOC", Label: "critical flows", Metric: "p99", Value: 100}, {Series: "with IOC", Label: "plus vMotion", Metric: "p99", Value: 153.7},
		{Series: "without IOC", Label: "critical flows", Metric: "p99", Value: 100}, {Series: "without IOC", Label: "plus vMotion", Metric: "p99", Value: 4000},
		{Series: "with IOC", Label: "critical flows", Metric: "critical_throughput", Value: 400}, {Series: "with IOC", Label: "plus vMotion", Metric: "critical_throughput", Value: 400}}
	if v := s4Scenario2.Judge(s, 1); v.Status != NotReproduced || v.Decided != "NFS p99 ratio with IOC 1.537 > 1.5" {
		t.Errorf("scenario 2: %+v", v)
	}
	s = Samples{{Series: "VM (25 shares)", Label: "alone", Metric: "throughput", Value: 95},
		{Series: "VM (25 shares)", Label: "contended", Metric: "throughput", Value: 19},
		{Series: "vMotion (100 shares)", Label: "contended", Metric: "throughput", Value: 76}}
	if v := s4SharesExample.Judge(s, 0.1); v.Status != Reproduced {
		t.Errorf("shares at a tenth: %+v", v)
	}
	// S1's own efficiency gains and packet figures.
	s = nil
	for i, label := range s1Cells {
		s = append(s, Sample{Series: "GRO off", Label: label, Metric: "efficiency", Value: 1},
			Sample{Series: "GRO on", Label: label, Metric: "efficiency", Value: s1Published[i]})
	}
	s = append(s, Sample{Series: "GRO off", Label: "native->VM 64KiB", Metric: "stack_pps", Value: 815},
		Sample{Series: "GRO off", Label: "native->VM 64KiB", Metric: "stack_avg_packet", Value: 1500},
		Sample{Series: "GRO on", Label: "native->VM 64KiB", Metric: "stack_pps", Value: 113},
		Sample{Series: "GRO on", Label: "native->VM 64KiB", Metric: "stack_avg_packet", Value: 10500})
	v := s1LRO.Judge(s, 1)
	if v.Status != Reproduced || !strings.Contains(v.Decided, "cells where GRO gains >= 10% 6 >= 4") || !strings.Contains(v.Observed, "815 Kpps of 1500 B -> 113 Kpps of 10500 B") {
		t.Errorf("S1's own figures: %+v", v)
	}
}

func TestGetIsTheMedianOverRepeats(t *testing.T) {
	s := Samples{{Series: "a", Label: "x", Metric: "m", Value: 1, Rep: 0}, {Series: "a", Label: "x", Metric: "m", Value: 9, Rep: 1}, {Series: "a", Label: "x", Metric: "m", Value: 3, Rep: 2}}
	if got := s.Get("a", "x", "m"); got != 3 {
		t.Errorf("median %g", got)
	}
	if got := s.Get("a", "y", "m"); !math.IsNaN(got) {
		t.Errorf("missing figure %g, want NaN", got)
	}
	if s.Reps() != 3 || len(s.Rep(1)) != 1 {
		t.Errorf("reps %d", s.Reps())
	}
}

// A verdict whose testbed did not hold is inconclusive with the reason,
// whatever its clauses read; one that needs nothing the machine lacked is
// judged as before.
func TestAssessSaysWhenTheMachineDecided(t *testing.T) {
	slow := &Calibration{Cores: 2, FreeCores: 2, Wake: &Wake{SameCPU: 21, CrossCPU: 114}, Lines: []LineFidelity{{100, 97}, {1000, 270}}}
	fx := fixtures()
	samples := func(name string) Samples {
		var s Samples
		for _, f := range fx[name] {
			s = append(s, Sample{Series: f.series, Label: f.label, Metric: f.metric, Value: f.value})
		}
		return s
	}
	for _, c := range []struct {
		exp    *Experiment
		cal    *Calibration
		status string
		reason string
	}{
		{s0Patterns, slow, Inconclusive, "the machine carried the 1 Gbit line at 27%; a round trip across cores took 114 µs against 21 µs within one (5.4x)"},
		{s0RxBuffers, slow, Reproduced, ""},
		{s4Scenario2, slow, Inconclusive, "the machine carried the 1 Gbit line at 27%"},
		{s0SMP, &Calibration{Cores: 2, FreeCores: 0.6, Lines: []LineFidelity{{1000, 950}}}, Inconclusive, "it needs 2 idle cores and 0.6 were idle when the run began"},
		{s0VMToVM, &Calibration{Cores: 2, FreeCores: 2, Lines: []LineFidelity{{1000, 950}}}, NotReproduced, ""},
		{s0VMToVM, nil, NotReproduced, ""},
	} {
		v := assess(c.exp, Outcome{Experiment: c.exp.Name, Samples: samples(c.exp.Name), Scale: 1}, c.cal)
		if v.Status != c.status || !strings.Contains(v.Reason, c.reason) || (c.reason == "") != (v.Reason == "") {
			t.Errorf("%s: %s, %q; want %s, %q", c.exp.Name, v.Status, v.Reason, c.status, c.reason)
		}
	}
	// Its own baseline: the 1 NIC phase carried 400 of 1000.
	s := samples("s3-multi-nic")
	for i := range s {
		s[i].Value *= 400.0 / 955
	}
	v := assess(s3MultiNIC, Outcome{Samples: s, Scale: 1}, nil)
	if v.Status != Inconclusive || v.Reason != "its baseline (1 NIC) carried 400 of 1 Gbit (40%)" {
		t.Errorf("baseline: %+v", v)
	}
}

func TestScaleDownOnlyRateFreeShapesTheMachineCarries(t *testing.T) {
	slow1G := &Calibration{Lines: []LineFidelity{{10, 9.5}, {100, 96}, {1000, 270}}}
	slow100M := &Calibration{Lines: []LineFidelity{{10, 7}, {100, 96}, {1000, 270}}}
	fine := &Calibration{Lines: []LineFidelity{{100, 96}, {1000, 957}}}
	for _, c := range []struct {
		exp  *Experiment
		cal  *Calibration
		want Scale
	}{
		{s4SharesExample, slow1G, 0.1}, {s4SharesExample, fine, 1}, {s0Patterns, slow1G, 1},
		{s4Scenario3, slow1G, 0.1}, {s4Scenario3, slow100M, 1}, {s0RxBuffers, slow1G, 1}, {s2ScaleOut, nil, 1},
	} {
		if got := chooseScale(c.exp, c.cal); got != c.want {
			t.Errorf("%s: scale %g, want %g", c.exp.Name, got, c.want)
		}
	}
	v := assess(s4SharesExample, Outcome{Scale: 0.1, Samples: Samples{{Series: "VM (25 shares)", Label: "alone", Metric: "throughput", Value: 96}}}, slow1G)
	if v.Note != "ran at a tenth of its line rates (100 Mbit instead of 1 Gbit)" || v.Status == Inconclusive {
		t.Errorf("scaled: %+v", v)
	}
}

func TestRepeatsThatDisagreeAreMarked(t *testing.T) {
	_, outs := fakeRun(t)
	for _, o := range outs {
		flips := o.Verdict.Flips != ""
		if flips != (o.Experiment == "s0-smp") {
			t.Errorf("%s: flips %q", o.Experiment, o.Verdict.Flips)
		}
	}
}

// Every testbed the lab applies stays a valid spec with the longest run
// suffix, at either scale.
func TestSuffixedTestbedsAreValid(t *testing.T) {
	s2, err := exampleTestbed("s2-scale-out.yaml", "s2", "lab-s2", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []Scale{1, 0.1} {
		s3, _ := exampleTestbed("s3-multi-nic.yaml", "s3", "lab-s3r", sc)
		beds := map[string]string{
			"lab-s0": s0Testbed(2, sc), "lab-s1": s1Testbed(true), "lab-s2": s2, "lab-s3r": s3,
			"lab-s4":  s4Testbed(map[string]int{"ft": 100, "nfs": 75, "vm": 75, "iscsi": 75, "vmotion": 50, "management": 50}, map[string]float64{"pg-vm": 300, "pg-nfs": 85}, sc),
			"lab-s4c": s4cTestbed(true, true, sc), "lab-cal": calibrationSpec([]float64{10, 100, 1000, 10000}),
		}
		for name, yaml := range beds {
			real := (&Run{Suffix: strings.Repeat("z", len(RunSuffix())+1)}).Infra(name)
			doc, err := spec.Load(name, []byte(renameInfra(yaml, name, real)))
			if err != nil {
				t.Errorf("%s at %g: %v", name, sc, err)
				continue
			}
			if doc.Spec.Name != real {
				t.Errorf("%s: named %q, want %q", name, doc.Spec.Name, real)
			}
		}
	}
	if got := (&Run{Suffix: "ab12"}).Node("lab-s4/client"); got != "lab-s4-ab12/client" {
		t.Errorf("node %q", got)
	}
	if got := (&Run{Suffix: "ab12"}).realArgs([]string{"link", "--infra", "lab-s3r", "vm", "eth1", "net2"}); strings.Join(got, " ") != "link --infra lab-s3r-ab12 vm eth1 net2" {
		t.Errorf("args %q", got)
	}
}

func writeFakeDB(t *testing.T, dir string) (*RunInfo, []Outcome) {
	t.Helper()
	db, err := OpenDB(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	info, outs := fakeRun(t)
	if err := db.startRun(info); err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if err := db.addOutcome(info.ID, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.finishRun(info); err != nil {
		t.Fatal(err)
	}
	return info, outs
}

var figureRE = regexp.MustCompile(`<figure class="chart" data-marks="(\d+)">`)

// sections splits a report into its experiments' sections.
func sections(html string) map[string]string {
	out := map[string]string{}
	parts := strings.Split(html, `<section class="experiment" id="`)
	for _, p := range parts[1:] {
		name, rest, _ := strings.Cut(p, `"`)
		out[name] = rest
	}
	return out
}

func TestDatabaseRoundTripAndReport(t *testing.T) {
	dir := t.TempDir()
	info, outs := writeFakeDB(t, dir)
	gotInfo, got, err := Rebuild(dir)
	if err != nil {
		t.Fatal(err)
	}
	if gotInfo.Command != info.Command || gotInfo.Calibration == nil || gotInfo.Calibration.Lines[1].Achieved != 957 || len(got) != len(Catalog) {
		t.Fatalf("round trip: %+v %d", gotInfo, len(got))
	}
	for i := range got {
		if got[i].Verdict.Status != outs[i].Verdict.Status || got[i].Verdict.Decided != outs[i].Verdict.Decided || len(got[i].Samples) != len(outs[i].Samples) {
			t.Errorf("%s: stored %+v, want %+v", got[i].Experiment, got[i].Verdict, outs[i].Verdict)
		}
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	secs := sections(string(html))
	for _, e := range Catalog {
		figs := figureRE.FindAllStringSubmatch(secs[e.Name], -1)
		if len(figs) < 2 {
			t.Errorf("%s: %d charts, want the shape and the measurements", e.Name, len(figs))
		}
		for _, f := range figs {
			if f[1] == "0" {
				t.Errorf("%s: an empty chart", e.Name)
			}
		}
		if strings.HasPrefix(e.Name, "s4-") && !strings.Contains(secs[e.Name], "Over time:") {
			t.Errorf("%s: no timeline", e.Name)
		}
		if !strings.Contains(secs[e.Name], Studies[e.Study]) {
			t.Errorf("%s: the study is not cited by its title", e.Name)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "summary.md"))
	for _, want := range []string{"| s4-scenario3 | S4 |", "1 Gbit line 96%", "flips between repeats", "inconclusive"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary lacks %q:\n%s", want, md)
		}
	}
}

// A database written before calibrations and repeats opens, gains the new
// columns, and renders.
func TestOldDatabaseStillRenders(t *testing.T) {
	dir := t.TempDir()
	raw, err := sql.Open("sqlite", filepath.Join(dir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(schema); err != nil {
		t.Fatal(err)
	}
	raw.Exec(`INSERT INTO runs(started, machine, quick, repeat, command) VALUES('2026-11-22T04:00:00Z', 'old', 1, 1, 'vnet lab run s0-rx-buffers')`)
	raw.Exec(`INSERT INTO samples VALUES(1, 's0-rx-buffers', 'VM to VM', 'small', 'throughput', 1500, 'Mbit/s')`)
	raw.Exec(`INSERT INTO samples VALUES(1, 's0-rx-buffers', 'VM to VM', 'large', 'throughput', 2100, 'Mbit/s')`)
	raw.Exec(`INSERT INTO verdicts VALUES(1, 's0-rx-buffers', 'reproduced', 'x', 'y', '', 5)`)
	raw.Close()
	info, outs, err := Rebuild(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Calibration != nil || len(outs) != 1 || outs[0].Verdict.Status != Reproduced || outs[0].Scale != 1 {
		t.Errorf("old run: %+v %+v", info, outs)
	}
}
