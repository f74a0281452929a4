package lab

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"

	"github.com/wcharczuk/go-chart/v2"
)

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
	// with today's code, so a corrected verdict shows without re-measuring.
	for i := range outcomes {
		if e, ok := Find(outcomes[i].Experiment); ok && outcomes[i].Error == "" {
			outcomes[i].Verdict = e.Judge(outcomes[i].Samples)
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
	fmt.Fprintf(&b, "# vnet lab: %s run of %s\n\nMachine: %s  \nCommand: `%s`\n\n", mode, info.Started.Format("2006-01-02 15:04 UTC"), info.Machine, info.Command)
	b.WriteString("| experiment | study | verdict | expected shape | observed |\n|---|---|---|---|---|\n")
	for _, o := range outcomes {
		obs := o.Verdict.Observed
		if o.Error != "" {
			obs = "error: " + o.Error
		}
		study := ""
		if e, ok := Find(o.Experiment); ok {
			study = e.Study
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", o.Experiment, study, o.Verdict.Status, md(o.Verdict.Expected), md(obs))
	}
	counts := map[string]int{}
	for _, o := range outcomes {
		counts[o.Verdict.Status]++
	}
	fmt.Fprintf(&b, "\n%d reproduced, %d not reproduced, %d errors.\n", counts[Reproduced], counts[NotReproduced], counts[Failed])
	return b.String()
}

func md(s string) string { return strings.ReplaceAll(s, "|", "/") }

type htmlExperiment struct {
	E        *Experiment
	O        Outcome
	Chart    template.HTML
	Samples  Samples
	StatusCS string
}

func writeHTML(path string, info *RunInfo, outcomes []Outcome) error {
	var exps []htmlExperiment
	for _, o := range outcomes {
		e, ok := Find(o.Experiment)
		if !ok {
			continue
		}
		svg, err := barChart(e, o.Samples)
		if err != nil {
			return fmt.Errorf("chart %s: %w", e.Name, err)
		}
		exps = append(exps, htmlExperiment{E: e, O: o, Chart: template.HTML(svg), Samples: o.Samples,
			StatusCS: strings.ReplaceAll(o.Verdict.Status, " ", "-")})
	}
	var buf bytes.Buffer
	err := reportTemplate.Execute(&buf, map[string]any{"Info": info, "Exps": exps, "Summary": Summary(info, outcomes)})
	if err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// barChart draws an experiment's chart metric, one bar per series and label.
func barChart(e *Experiment, s Samples) (string, error) {
	var bars []chart.Value
	seen := map[string]bool{}
	for _, x := range s {
		key := x.Series + " / " + x.Label
		if x.Metric != e.Chart.Metric || seen[key] {
			continue
		}
		seen[key] = true
		bars = append(bars, chart.Value{Label: key, Value: s.Get(x.Series, x.Label, x.Metric)})
	}
	if len(bars) == 0 {
		return `<p class="nochart">no measurements to draw</p>`, nil
	}
	if len(bars) == 1 { // go-chart needs two values to scale an axis
		bars = append(bars, chart.Value{Label: " ", Value: 0})
	}
	top := 0.0
	for _, b := range bars {
		top = max(top, b.Value)
	}
	if top == 0 {
		top = 1
	}
	width := max(640, 90*len(bars))
	c := chart.BarChart{
		Width:      width,
		Height:     380,
		BarWidth:   max(20, min(60, width/len(bars)-20)),
		Background: chart.Style{Padding: chart.Box{Top: 40, Bottom: 80, Left: 20, Right: 20}},
		XAxis:      chart.Style{FontSize: 8, TextRotationDegrees: 30},
		// From zero: a bar chart whose axis starts elsewhere turns 3% into 300%.
		YAxis: chart.YAxis{Name: e.Chart.YLabel, Style: chart.Style{FontSize: 9},
			Range: &chart.ContinuousRange{Min: 0, Max: top * 1.1}},
		Bars: bars,
	}
	var buf bytes.Buffer
	if err := c.Render(chart.SVG, &buf); err != nil {
		return "", err
	}
	return buf.String(), nil
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"num": func(v float64) string {
		if v >= 100 {
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.2f", v)
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>vnet lab report</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
td, th { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
.reproduced { color: #176b2c; font-weight: bold; } .not-reproduced { color: #a15c00; font-weight: bold; } .error { color: #b00020; font-weight: bold; }
.side { display: flex; gap: 2em; flex-wrap: wrap; } .side > div { flex: 1; min-width: 300px; }
.chart svg { max-width: 100%; height: auto; }
</style></head><body>
<h1>vnet lab report</h1>
<p>Run {{.Info.Started.Format "2006-01-02 15:04 UTC"}}{{if .Info.Quick}} (quick){{end}}, repeat {{.Info.Repeat}}, on {{.Info.Machine}}.<br>
Command: <code>{{.Info.Command}}</code></p>
<p>Each published result (from the seed studies, 2005-2015 hardware) stands beside what this machine measured.
What must hold is the shape (which configuration wins, by roughly what ratio), not the absolute numbers.</p>
<table><tr><th>experiment</th><th>study</th><th>verdict</th><th>observed</th></tr>
{{range .Exps}}<tr><td><a href="#{{.E.Name}}">{{.E.Name}}</a></td><td>{{.E.Study}}</td><td class="{{.StatusCS}}">{{.O.Verdict.Status}}</td><td>{{if .O.Error}}{{.O.Error}}{{else}}{{.O.Verdict.Observed}}{{end}}</td></tr>
{{end}}</table>
{{range .Exps}}
<h2 id="{{.E.Name}}">{{.E.Name}} ({{.E.Study}}): {{.E.Title}}</h2>
<div class="side">
<div><h3>Published</h3><p>{{.E.Published}}</p><p><em>Scaling:</em> {{.E.Scaling}}</p></div>
<div><h3>Measured here</h3>
<p class="{{.StatusCS}}">{{.O.Verdict.Status}}</p>
<p><em>Expected shape:</em> {{.O.Verdict.Expected}}<br><em>Observed:</em> {{if .O.Error}}error: {{.O.Error}}{{else}}{{.O.Verdict.Observed}}{{end}}</p>
<p>{{printf "%.0f" .O.Seconds}} s</p></div>
</div>
<div class="chart">{{.Chart}}</div>
<details><summary>all samples</summary><table><tr><th>series</th><th>label</th><th>metric</th><th>value</th><th>unit</th></tr>
{{range .Samples}}<tr><td>{{.Series}}</td><td>{{.Label}}</td><td>{{.Metric}}</td><td>{{num .Value}}</td><td>{{.Unit}}</td></tr>{{end}}
</table></details>
{{end}}
</body></html>
`))
