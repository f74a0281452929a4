package lab

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"
)

// Studies are the seed studies, cited by their titles.
var Studies = map[string]string{
	"S0": "Network Throughput in a Virtual Infrastructure (VMware white paper, ESX Server 2.1, 2005)",
	"S1": "Large Receive Offload (LRO) Support for VMXNET3 Adapters with Windows VMs on vSphere 6 (VMware VROOM! blog, June 2015)",
	"S2": "Network Performance Comparison of Multiple Virtual Machines (Bogdanov, Ko Ko and Zaya)",
	"S3": "Multi-NIC Networking Performance in ESX 3.0.1 and XenEnterprise 3.2.0 (VMware)",
	"S4": "VMware Network I/O Control: Architecture, Performance and Best Practices (VMware white paper, vSphere 4.1)",
}

// WriteReport renders report.html and summary.md into dir.
func WriteReport(dir string, info *RunInfo, outcomes []Outcome) error {
	if err := writeHTML(filepath.Join(dir, "report.html"), info, outcomes); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.md"), []byte(Summary(info, outcomes)), 0o644)
}

// Rebuild renders the report of the newest run stored in dir.
func Rebuild(dir string) (*RunInfo, []Outcome, error) {
	db, err := OpenDB(dir)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	info, err := db.LatestRun()
	if err != nil {
		return nil, nil, err
	}
	outcomes, err := db.Outcomes(info.ID)
	if err != nil {
		return nil, nil, err
	}
	// Verdicts are code beside each experiment: judge the stored samples
	// and calibration with today's code, so a corrected verdict shows
	// without re-measuring.
	for i := range outcomes {
		if e, ok := Find(outcomes[i].Experiment); ok {
			outcomes[i].Verdict = assess(e, outcomes[i], info.Calibration)
		}
	}
	return info, outcomes, WriteReport(dir, info, outcomes)
}

// Summary is the verdict table as Markdown.
func Summary(info *RunInfo, outcomes []Outcome) string {
	var b strings.Builder
	mode := "full"
	if info.Quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "# vnet lab: %s run of %s\n\nMachine: %s  \nCalibration: %s  \nCommand: `%s`", mode,
		info.Started.Format("2006-01-02 15:04 UTC"), info.Machine, info.Calibration, info.Command)
	if !info.Finished.IsZero() {
		fmt.Fprintf(&b, " (%s)", info.Finished.Sub(info.Started).Round(1e9))
	}
	b.WriteString("\n\n| experiment | study | verdict | decided by | testbed |\n|---|---|---|---|---|\n")
	for _, o := range outcomes {
		study := ""
		if e, ok := Find(o.Experiment); ok {
			study = e.Study
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", o.Experiment, study, o.Verdict.Status, md(o.Verdict.Decided), md(testbedNote(o.Verdict)))
	}
	b.WriteString("\n" + counts(outcomes) + "\n")
	return b.String()
}

// testbedNote is what the report says about how an experiment's testbed
// held: why it was inconclusive, how it was scaled, whether repeats flipped.
func testbedNote(v Verdict) string {
	var parts []string
	for _, s := range []string{v.Reason, v.Note, v.Flips} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "held"
	}
	return strings.Join(parts, "; ")
}

func counts(outcomes []Outcome) string {
	n := map[string]int{}
	for _, o := range outcomes {
		n[o.Verdict.Status]++
	}
	return fmt.Sprintf("%d reproduced, %d not reproduced, %d inconclusive (the machine, not vnet, decided them), %d errors.",
		n[Reproduced], n[NotReproduced], n[Inconclusive], n[Failed])
}

func md(s string) string { return strings.ReplaceAll(s, "|", "/") }

type htmlExperiment struct {
	E        *Experiment
	O        Outcome
	Study    string
	Figures  []figure
	StatusCS string
}

func writeHTML(path string, info *RunInfo, outcomes []Outcome) error {
	var exps []htmlExperiment
	for _, o := range outcomes {
		e, ok := Find(o.Experiment)
		if !ok {
			continue
		}
		exps = append(exps, htmlExperiment{E: e, O: o, Study: Studies[e.Study], Figures: figures(e, o),
			StatusCS: strings.ReplaceAll(o.Verdict.Status, " ", "-")})
	}
	var buf bytes.Buffer
	err := reportTemplate.Execute(&buf, map[string]any{"Info": info, "Exps": exps, "Counts": counts(outcomes),
		"Cal": info.Calibration, "Studies": studyList()})
	if err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// figures are an experiment's charts: the shape against the published
// result, what was measured, and its phases over time where it has them.
func figures(e *Experiment, o Outcome) []figure {
	if len(o.Samples) == 0 {
		return nil
	}
	sc := o.Scale.norm()
	v := o.Verdict
	if v.Clauses == nil {
		v.Clauses = e.Judge(o.Samples, sc).Clauses
	}
	var perRep []Verdict
	for r := 0; r < o.Samples.Reps(); r++ {
		perRep = append(perRep, e.Judge(o.Samples.Rep(r), sc))
	}
	out := []figure{shapeFigure(e, v, perRep), measuredFigure(e, o.Samples)}
	return append(out, timelineFigures(o.Samples)...)
}

func studyList() []string {
	var out []string
	for _, k := range sortedKeys(Studies) {
		out = append(out, k+": "+Studies[k])
	}
	return out
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"num": func(v float64) string {
		if v >= 100 {
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.2f", v)
	},
	"pct":   func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) },
	"rate":  rateWords,
	"low":   func(v float64) bool { return v < fidelity },
	"svg":   func(s string) template.HTML { return template.HTML(s) }, // go-chart's own output
	"note":  testbedNote,
	"whole": func(v float64) string { return fmt.Sprintf("%.0f", v) },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>vnet lab report</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2.5em; border-bottom: 1px solid #ccc; } h3 { font-size: 1em; margin: .8em 0 .3em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
td, th { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
.reproduced { color: #176b2c; font-weight: bold; } .not-reproduced { color: #a15c00; font-weight: bold; }
.inconclusive { color: #5a5a9a; font-weight: bold; } .error { color: #b00020; font-weight: bold; }
.below { color: #b00020; font-weight: bold; }
.side { display: flex; gap: 2em; flex-wrap: wrap; } .side > div { flex: 1; min-width: 300px; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; }
figure.chart { margin: .5em 0; flex: 0 0 auto; max-width: 100%; } figure.chart svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: .85em; color: #555; max-width: 60em; }
.cite { font-style: italic; } .calib { background: #f6f6fa; padding: .6em 1em; border-left: 4px solid #5a5a9a; }
</style></head><body>
<h1>vnet lab report</h1>
<p>Run {{.Info.Started.Format "2006-01-02 15:04 UTC"}}{{if .Info.Quick}} (quick: 2 s measurements){{end}}, {{.Info.Repeat}} repeat{{if gt .Info.Repeat 1}}s{{end}}, on {{.Info.Machine}}.<br>
Command: <code>{{.Info.Command}}</code></p>
<div class="calib"><h3>What this machine could emulate (calibration at the start of the run)</h3>
{{if .Cal}}<table><tr><th>line</th><th>carried</th><th>of nominal</th></tr>
{{range .Cal.Lines}}<tr><td>{{rate .Nominal}}</td><td>{{printf "%.1f" .Achieved}} Mbit/s</td><td{{if low .Ratio}} class="below"{{end}}>{{pct .Ratio}}{{if low .Ratio}} (below 90%: verdicts resting on this line are inconclusive){{end}}</td></tr>
{{end}}</table>
{{if .Cal.Error}}<p class="below">Lines not measured: {{.Cal.Error}}</p>{{end}}
<p>{{if .Cal.Unshaped}}Unshaped veth (VM to VM, no shaper): {{whole .Cal.Unshaped}} Mbit/s. {{end}}
{{if .Cal.Wake}}Wake: {{.Cal.Wake}}.{{else}}No wake probe: {{.Cal.WakeError}}.{{end}}
{{.Cal.Cores}} cores, {{printf "%.1f" .Cal.FreeCores}} idle when the run began.
{{if .Cal.Ceiling}}<strong>The wires were capped at {{rate .Cal.Ceiling}} (VNET_WIRE_CEILING), to simulate a slower machine.</strong>{{end}}
Calibrated in {{printf "%.0f" .Cal.Seconds}} s.</p>
{{else}}<p>This run has no calibration.</p>{{end}}
</div>
<p>Each published result stands beside what this machine measured. What must hold is the shape (which
configuration wins, by roughly what ratio), not the absolute numbers of 2005-2015 hardware. A verdict is
<em>inconclusive</em> when the testbed did not hold: a line the machine carried below 90% of its rate, a
baseline phase below its line, a machine slow to wake a core for a latency shape, or too few idle cores.</p>
<table><tr><th>experiment</th><th>study</th><th>verdict</th><th>decided by</th><th>testbed</th></tr>
{{range .Exps}}<tr><td><a href="#{{.E.Name}}">{{.E.Name}}</a></td><td>{{.E.Study}}</td><td class="{{.StatusCS}}">{{.O.Verdict.Status}}</td><td>{{.O.Verdict.Decided}}</td><td>{{note .O.Verdict}}</td></tr>
{{end}}</table>
<p>{{.Counts}}</p>
<p>Studies: {{range .Studies}}<br><span class="cite">{{.}}</span>{{end}}</p>
{{range .Exps}}
<section class="experiment" id="{{.E.Name}}">
<h2>{{.E.Name}} ({{.E.Study}}): {{.E.Title}}</h2>
<div class="side">
<div><h3>Published</h3><p>In <span class="cite">{{.Study}}</span>: {{.E.Published}}</p><p><em>Scaling:</em> {{.E.Scaling}}</p></div>
<div><h3>Measured here</h3>
<p class="{{.StatusCS}}">{{.O.Verdict.Status}}</p>
{{if .O.Verdict.Reason}}<p><em>Why inconclusive:</em> {{.O.Verdict.Reason}}</p>{{end}}
{{if .O.Verdict.Note}}<p><em>Scaled:</em> {{.O.Verdict.Note}}</p>{{end}}
{{if .O.Verdict.Flips}}<p><em>Repeats:</em> {{.O.Verdict.Flips}}</p>{{end}}
<p><em>Expected shape:</em> {{.O.Verdict.Expected}}<br><em>Decided by:</em> {{.O.Verdict.Decided}}<br><em>All clauses:</em> {{.O.Verdict.Observed}}</p>
{{if .O.Error}}<p class="error">error: {{.O.Error}}</p>{{end}}
<p>{{printf "%.0f" .O.Seconds}} s</p></div>
</div>
<div class="figures">
{{range .Figures}}<figure class="chart" data-marks="{{.Marks}}"><h3>{{.Title}}</h3>{{if .SVG}}{{svg .SVG}}{{else}}<p>nothing to draw</p>{{end}}<figcaption>{{.Caption}}</figcaption></figure>
{{else}}<p>No measurements to draw{{if .O.Error}}: the experiment stopped with an error{{end}}.</p>{{end}}
</div>
<details><summary>all samples</summary><table><tr><th>repeat</th><th>series</th><th>label</th><th>metric</th><th>value</th><th>unit</th></tr>
{{range .O.Samples}}<tr><td>{{.Rep}}</td><td>{{.Series}}</td><td>{{.Label}}</td><td>{{.Metric}}</td><td>{{num .Value}}</td><td>{{.Unit}}</td></tr>{{end}}
</table></details>
</section>
{{end}}
</body></html>
`))
