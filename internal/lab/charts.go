package lab

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"
)

// A figure is one chart of the report: an SVG and how many data marks
// (bars, points) it drew, so a reader (and the report's test) can tell an
// empty chart from a drawn one.
type figure struct {
	Title   string
	Caption string
	SVG     string
	Marks   int
}

var palette = []drawing.Color{
	drawing.ColorFromHex("1f77b4"), drawing.ColorFromHex("ff7f0e"), drawing.ColorFromHex("2ca02c"),
	drawing.ColorFromHex("9467bd"), drawing.ColorFromHex("8c564b"), drawing.ColorFromHex("e377c2"),
	drawing.ColorFromHex("17becf"), drawing.ColorFromHex("bcbd22"),
}

var (
	publishedColor = drawing.ColorFromHex("b0b0b0")
	thresholdColor = drawing.ColorFromHex("d62728")
	textColor      = drawing.ColorFromHex("333333")
)

// bars is one series of a grouped bar chart: a value per group (NaN for
// none), with an optional spread (lo..hi) drawn as an error bar.
type bars struct {
	Name   string
	Color  drawing.Color
	Values []float64
	Lo, Hi []float64 // nil: no error bars
}

// marker is a threshold drawn across a group as a dashed line.
type marker struct {
	Group int
	Value float64
	Label string // e.g. ">= 1.3"
}

// groupedBars is a bar chart of groups (x categories), each with one bar
// per series side by side, and threshold markers.
type groupedBars struct {
	Groups  []string
	Series  []bars
	Markers []marker
	YLabel  string
}

func (g groupedBars) values() []float64 {
	var out []float64
	add := func(v float64) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	for _, s := range g.Series {
		for i, v := range s.Values {
			add(v)
			if s.Hi != nil {
				add(s.Hi[i])
				add(s.Lo[i])
			}
		}
	}
	for _, m := range g.Markers {
		add(m.Value)
	}
	return out
}

// render draws the chart; it returns the SVG and the number of bars drawn.
func (g groupedBars) render() (string, int) {
	vals := g.values()
	marks := 0
	for _, s := range g.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				marks++
			}
		}
	}
	if marks == 0 {
		return "", 0
	}
	yr, yticks := valueAxis(vals)
	n := len(g.Groups)
	xticks := []chart.Tick{{Value: -0.5, Label: ""}}
	long := false
	for i, name := range g.Groups {
		xticks = append(xticks, chart.Tick{Value: float64(i), Label: name})
		long = long || len(name) > 90/max(n, 1)
	}
	xticks = append(xticks, chart.Tick{Value: float64(n) - 0.5, Label: ""})
	xstyle := chart.Style{FontSize: 9, FontColor: textColor}
	bottom := 20
	if long {
		xstyle.TextRotationDegrees = 25
		bottom = 90
	}
	var series []chart.Series
	for i := range g.Series {
		series = append(series, barSeries{g: &g, index: i})
	}
	if len(g.Markers) > 0 {
		series = append(series, markerSeries{g: &g})
	}
	c := chart.Chart{
		Width:      max(560, min(1060, 110*n+200)),
		Height:     360,
		Background: chart.Style{Padding: chart.Box{Top: 40, Left: 10, Right: 20, Bottom: bottom}},
		XAxis:      chart.XAxis{Style: xstyle, Ticks: xticks, TickPosition: chart.TickPositionUnderTick},
		YAxis: chart.YAxis{Name: g.YLabel, NameStyle: chart.Style{FontSize: 10, FontColor: textColor},
			Style: chart.Style{FontSize: 9, FontColor: textColor}, Range: yr, Ticks: yticks,
			GridMajorStyle: chart.Style{StrokeColor: drawing.ColorFromHex("e4e4e4"), StrokeWidth: 1}, GridLines: gridLines(yticks)},
		Series: series,
	}
	c.Elements = []chart.Renderable{legend(g.legendEntries())}
	var buf bytes.Buffer
	if err := c.Render(chart.SVG, &buf); err != nil {
		return fmt.Sprintf("<p>chart not drawn: %s</p>", err), 0
	}
	return sized(buf.String(), c.Width, c.Height), marks
}

// sized gives go-chart's SVG, which has only a viewBox, its natural size:
// without one, a browser draws it as wide as whatever room is left.
func sized(svg string, w, h int) string {
	box := fmt.Sprintf(`viewBox="0 0 %d %d"`, w, h)
	return strings.Replace(svg, box, fmt.Sprintf(`%s width="%d" height="%d"`, box, w, h), 1)
}

func gridLines(ticks []chart.Tick) []chart.GridLine {
	var out []chart.GridLine
	for _, t := range ticks {
		out = append(out, chart.GridLine{Value: t.Value})
	}
	return out
}

type legendEntry struct {
	Name   string
	Color  drawing.Color
	Dashed bool
}

func (g groupedBars) legendEntries() []legendEntry {
	var out []legendEntry
	for _, s := range g.Series {
		out = append(out, legendEntry{Name: s.Name, Color: s.Color})
	}
	if len(g.Markers) > 0 {
		out = append(out, legendEntry{Name: "threshold of the verdict", Color: thresholdColor, Dashed: true})
	}
	return out
}

// legend draws the entries in a row above the plot.
func legend(entries []legendEntry) chart.Renderable {
	return func(r chart.Renderer, cb chart.Box, defaults chart.Style) {
		x, y := cb.Left+4, 16
		r.SetFont(defaults.Font)
		r.SetFontSize(9)
		r.SetFontColor(textColor)
		for _, e := range entries {
			if e.Dashed {
				r.SetStrokeColor(e.Color)
				r.SetStrokeWidth(2)
				r.SetStrokeDashArray([]float64{4, 3})
				r.MoveTo(x, y-4)
				r.LineTo(x+18, y-4)
				r.Stroke()
				r.SetStrokeDashArray(nil)
			} else {
				r.SetFillColor(e.Color)
				r.SetStrokeColor(e.Color)
				r.SetStrokeWidth(1)
				rect(r, x, y-10, x+18, y)
				r.FillStroke()
			}
			r.SetFontColor(textColor)
			r.Text(e.Name, x+23, y)
			x += 23 + r.MeasureText(e.Name).Width() + 18
		}
	}
}

func rect(r chart.Renderer, x0, y0, x1, y1 int) {
	r.MoveTo(x0, y0)
	r.LineTo(x1, y0)
	r.LineTo(x1, y1)
	r.LineTo(x0, y1)
	r.LineTo(x0, y0)
	r.Close()
}

// barSeries draws one series of a groupedBars chart.
type barSeries struct {
	g     *groupedBars
	index int
}

func (s barSeries) GetName() string           { return s.g.Series[s.index].Name }
func (s barSeries) GetStyle() chart.Style     { return chart.Style{StrokeColor: s.g.Series[s.index].Color} }
func (s barSeries) GetYAxis() chart.YAxisType { return chart.YAxisPrimary }
func (s barSeries) Validate() error           { return nil }

// slot is the horizontal extent of series i's bar in group k.
func (g *groupedBars) slot(cb chart.Box, xr chart.Range, k, i int) (int, int) {
	unit := float64(xr.Translate(1) - xr.Translate(0))
	left := float64(cb.Left+xr.Translate(float64(k))) - 0.4*unit
	w := 0.8 * unit / float64(len(g.Series))
	return int(left + float64(i)*w + 1), int(left + float64(i+1)*w - 1)
}

func (s barSeries) Render(r chart.Renderer, cb chart.Box, xr, yr chart.Range, _ chart.Style) {
	b := s.g.Series[s.index]
	base := yr.GetMin()
	for k, v := range b.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		x0, x1 := s.g.slot(cb, xr, k, s.index)
		y := cb.Bottom - yr.Translate(clampTo(v, yr))
		y0 := cb.Bottom - yr.Translate(base)
		r.SetFillColor(b.Color)
		r.SetStrokeColor(b.Color.WithAlpha(255))
		r.SetStrokeWidth(1)
		rect(r, x0, min(y, y0-1), x1, y0)
		r.FillStroke()
		if b.Hi != nil && !math.IsNaN(b.Hi[k]) && b.Hi[k] > b.Lo[k] {
			xm := (x0 + x1) / 2
			ylo, yhi := cb.Bottom-yr.Translate(clampTo(b.Lo[k], yr)), cb.Bottom-yr.Translate(clampTo(b.Hi[k], yr))
			r.SetStrokeColor(textColor)
			r.SetStrokeWidth(1.5)
			r.MoveTo(xm, ylo)
			r.LineTo(xm, yhi)
			r.MoveTo(xm-4, ylo)
			r.LineTo(xm+4, ylo)
			r.MoveTo(xm-4, yhi)
			r.LineTo(xm+4, yhi)
			r.Stroke()
		}
	}
}

func clampTo(v float64, yr chart.Range) float64 {
	return math.Max(yr.GetMin(), math.Min(v, yr.GetMax()))
}

// markerSeries draws the thresholds as dashed lines across their groups.
type markerSeries struct{ g *groupedBars }

func (s markerSeries) GetName() string { return "threshold" }
func (s markerSeries) GetStyle() chart.Style {
	return chart.Style{StrokeColor: thresholdColor, StrokeDashArray: []float64{4, 3}}
}
func (s markerSeries) GetYAxis() chart.YAxisType { return chart.YAxisPrimary }
func (s markerSeries) Validate() error           { return nil }

func (s markerSeries) Render(r chart.Renderer, cb chart.Box, xr, yr chart.Range, defaults chart.Style) {
	for _, m := range s.g.Markers {
		x0, _ := s.g.slot(cb, xr, m.Group, 0)
		_, x1 := s.g.slot(cb, xr, m.Group, len(s.g.Series)-1)
		y := cb.Bottom - yr.Translate(clampTo(m.Value, yr))
		r.SetStrokeColor(thresholdColor)
		r.SetStrokeWidth(2)
		r.SetStrokeDashArray([]float64{5, 3})
		r.MoveTo(x0-4, y)
		r.LineTo(x1+4, y)
		r.Stroke()
		r.SetStrokeDashArray(nil)
		// The label sits above the line at its left end, inside the
		// group, where neither the next group nor the axis is.
		r.SetFont(defaults.Font)
		r.SetFontSize(8)
		r.SetFontColor(thresholdColor)
		r.Text(m.Label, x0-2, y-3)
	}
}

// logRange is a base-10 logarithmic axis. go-chart's own puts every
// value under 1 at the bottom, and ratios live there.
type logRange struct {
	Min, Max float64
	Domain   int
}

func (r *logRange) IsZero() bool       { return r.Min == 0 && r.Max == 0 }
func (r *logRange) GetMin() float64    { return r.Min }
func (r *logRange) SetMin(v float64)   { r.Min = v }
func (r *logRange) GetMax() float64    { return r.Max }
func (r *logRange) SetMax(v float64)   { r.Max = v }
func (r *logRange) GetDelta() float64  { return r.Max - r.Min }
func (r *logRange) GetDomain() int     { return r.Domain }
func (r *logRange) SetDomain(d int)    { r.Domain = d }
func (r *logRange) IsDescending() bool { return false }
func (r *logRange) String() string     { return fmt.Sprintf("log [%g, %g] => %d", r.Min, r.Max, r.Domain) }
func (r *logRange) Translate(v float64) int {
	if v <= 0 {
		return 0
	}
	lo, hi := math.Log10(r.Min), math.Log10(r.Max)
	return int(math.Round((math.Log10(v) - lo) / (hi - lo) * float64(r.Domain)))
}

// logWorthy: values spanning more than this factor get a log axis.
const logWorthy = 30

// valueAxis chooses a linear axis from zero, or a log axis when the
// values span decades, with readable ticks.
func valueAxis(vals []float64) (chart.Range, []chart.Tick) {
	lo, hi := math.Inf(1), 0.0
	for _, v := range vals {
		if v > 0 {
			lo = math.Min(lo, v)
		}
		hi = math.Max(hi, v)
	}
	if hi <= 0 {
		hi = 1
	}
	if !math.IsInf(lo, 1) && hi/lo > logWorthy {
		min := math.Pow(10, math.Floor(math.Log10(lo)))
		max := math.Pow(10, math.Ceil(math.Log10(hi*1.05)))
		var ticks []chart.Tick
		for d := min; d <= max*1.0001; d *= 10 {
			for _, m := range []float64{1, 2, 5} {
				if v := d * m; v <= max*1.0001 && (m == 1 || max/min <= 1000) {
					ticks = append(ticks, chart.Tick{Value: v, Label: tickLabel(v)})
				}
			}
		}
		return &logRange{Min: min, Max: max}, ticks
	}
	// From zero: a bar chart whose axis starts elsewhere turns 3% into 300%.
	step := niceStep(hi * 1.1 / 5)
	top := math.Ceil(hi*1.1/step) * step
	var ticks []chart.Tick
	for v := 0.0; v <= top+step/2; v += step {
		ticks = append(ticks, chart.Tick{Value: v, Label: tickLabel(v)})
	}
	return &chart.ContinuousRange{Min: 0, Max: top}, ticks
}

func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func tickLabel(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 10000:
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	case v >= 1:
		return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// shapeFigure draws the verdict's clauses: each clause's measured value
// (with its spread over repeats) beside the published figure, and the
// threshold the verdict holds it to.
func shapeFigure(e *Experiment, v Verdict, perRep []Verdict) figure {
	clauses := v.Clauses
	var info []Clause
	for _, c := range clauses {
		if c.Info {
			info = append(info, c)
		}
	}
	if len(info) > 0 { // S1: draw the cells; their count is in the text
		clauses = info
	}
	g := groupedBars{YLabel: e.Chart.shapeUnit()}
	measured := bars{Name: "measured here", Color: palette[0]}
	published := bars{Name: "published", Color: publishedColor}
	hasPublished := false
	index := map[string]int{}
	var spreads [][]float64
	for ci, c := range clauses {
		k, seen := index[c.What]
		if !seen {
			k = len(g.Groups)
			index[c.What] = k
			g.Groups = append(g.Groups, c.What)
			measured.Values = append(measured.Values, c.Value)
			p := math.NaN()
			if c.Published != 0 {
				p, hasPublished = c.Published, true
			}
			published.Values = append(published.Values, p)
			var reps []float64
			for _, pv := range perRep {
				if vc := clauseAt(pv, c, ci, info != nil); !math.IsNaN(vc) {
					reps = append(reps, vc)
				}
			}
			spreads = append(spreads, reps)
		}
		g.Markers = append(g.Markers, marker{Group: k, Value: c.Limit, Label: c.Op + " " + limitString(c.Limit)})
	}
	if prefix := commonPrefix(g.Groups); prefix != "" {
		for i := range g.Groups {
			g.Groups[i] = strings.TrimPrefix(g.Groups[i], prefix)
		}
		g.YLabel = strings.TrimSuffix(prefix, ", ")
	}
	if len(perRep) > 1 {
		measured.Lo, measured.Hi = make([]float64, len(spreads)), make([]float64, len(spreads))
		for i, r := range spreads {
			measured.Lo[i], measured.Hi[i] = spread(r)
		}
	}
	g.Series = []bars{measured}
	if hasPublished {
		g.Series = append(g.Series, published)
	}
	svg, marks := g.render()
	caption := "Each clause of the verdict: the value measured here"
	if hasPublished {
		caption += " beside the study's own figure in the same terms (grey; none where the study gave no number)"
	}
	caption += ", and the threshold the verdict holds it to (dashed)."
	if len(perRep) > 1 {
		caption += fmt.Sprintf(" Bars are medians of %d repeats; whiskers span the repeats.", len(perRep))
	}
	return figure{Title: "The shape: measured against published", Caption: caption, SVG: svg, Marks: marks}
}

// clauseAt is the value of clause c (the ci-th, or the ci-th info clause)
// in another judgment of the same experiment.
func clauseAt(v Verdict, c Clause, ci int, infoOnly bool) float64 {
	var list []Clause
	for _, x := range v.Clauses {
		if !infoOnly || x.Info {
			list = append(list, x)
		}
	}
	if ci < len(list) && list[ci].What == c.What {
		return list[ci].Value
	}
	return math.NaN()
}

// commonPrefix is the part up to ", " that every group's name starts
// with, when there are several: it goes to the axis, not under each group.
func commonPrefix(names []string) string {
	if len(names) < 2 {
		return ""
	}
	p, _, ok := strings.Cut(names[0], ", ")
	if !ok {
		return ""
	}
	p += ", "
	for _, n := range names[1:] {
		if !strings.HasPrefix(n, p) {
			return ""
		}
	}
	return p
}

func spread(v []float64) (float64, float64) {
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

func (c Chart) shapeUnit() string {
	if c.ShapeUnit != "" {
		return c.ShapeUnit
	}
	return "ratio"
}

// measuredFigure draws the experiment's chart metric: a group per label,
// a bar per series (off/on, without/with IOC side by side), with the
// spread over repeats.
func measuredFigure(e *Experiment, s Samples) figure {
	var labels, series []string
	unit := ""
	for _, x := range s {
		if x.Metric != e.Chart.Metric {
			continue
		}
		if !contains(labels, x.Label) {
			labels = append(labels, x.Label)
		}
		if !contains(series, x.Series) {
			series = append(series, x.Series)
		}
		unit = x.Unit
	}
	g := groupedBars{Groups: labels, YLabel: e.Chart.YLabel}
	reps := s.Reps()
	for i, name := range series {
		b := bars{Name: name, Color: palette[i%len(palette)]}
		for _, l := range labels {
			b.Values = append(b.Values, s.Get(name, l, e.Chart.Metric))
			if reps > 1 {
				var vals []float64
				for r := 0; r < reps; r++ {
					if v := s.Rep(r).Get(name, l, e.Chart.Metric); !math.IsNaN(v) {
						vals = append(vals, v)
					}
				}
				lo, hi := spread(vals)
				b.Lo, b.Hi = append(b.Lo, lo), append(b.Hi, hi)
			}
		}
		g.Series = append(g.Series, b)
	}
	svg, marks := g.render()
	caption := fmt.Sprintf("What was measured (%s, %s).", e.Chart.Metric, unit)
	if reps > 1 {
		caption += fmt.Sprintf(" Bars are medians of %d repeats; whiskers span the repeats.", reps)
	}
	return figure{Title: "The measurements", Caption: caption, SVG: svg, Marks: marks}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// timelineFigures draws, per panel, each flow's rate over the phases of
// the first repeat, with the phases marked.
func timelineFigures(s Samples) []figure {
	type pt struct{ t, v float64 }
	panels := []string{}
	flows := map[string][]string{}
	points := map[string]map[string][]pt{}
	phases := map[string][]Sample{}
	for _, x := range s {
		if x.Rep != 0 {
			continue
		}
		switch x.Metric {
		case "phase":
			phases[x.Series] = append(phases[x.Series], x)
		case TimelineMetric:
			panel, at, ok := strings.Cut(x.Label, " @ ")
			t, err := strconv.ParseFloat(at, 64)
			if !ok || err != nil {
				continue
			}
			if points[panel] == nil {
				panels = append(panels, panel)
				points[panel] = map[string][]pt{}
			}
			if !contains(flows[panel], x.Series) {
				flows[panel] = append(flows[panel], x.Series)
			}
			points[panel][x.Series] = append(points[panel][x.Series], pt{t, x.Value})
		}
	}
	var out []figure
	for _, panel := range panels {
		var series []chart.Series
		var entries []legendEntry
		marks, tmax, vmax := 0, 0.0, 0.0
		for i, f := range flows[panel] {
			ps := points[panel][f]
			sort.Slice(ps, func(a, b int) bool { return ps[a].t < ps[b].t })
			cs := chart.ContinuousSeries{Name: f, Style: chart.Style{StrokeColor: palette[i%len(palette)], StrokeWidth: 2, DotWidth: 2.5, DotColor: palette[i%len(palette)]}}
			for _, p := range ps {
				cs.XValues, cs.YValues = append(cs.XValues, p.t), append(cs.YValues, p.v)
				tmax, vmax = math.Max(tmax, p.t), math.Max(vmax, p.v)
				marks++
			}
			series = append(series, cs)
			entries = append(entries, legendEntry{Name: f, Color: palette[i%len(palette)]})
		}
		if marks == 0 {
			continue
		}
		yr, yticks := valueAxis([]float64{vmax})
		marksPh := phases[panel]
		sort.Slice(marksPh, func(a, b int) bool { return marksPh[a].Value < marksPh[b].Value })
		var xticks []chart.Tick
		step := niceStep(tmax / 8)
		for t := 0.0; t <= math.Ceil(tmax/step)*step+step/2; t += step {
			xticks = append(xticks, chart.Tick{Value: t, Label: tickLabel(t)})
		}
		c := chart.Chart{
			Width: 520, Height: 300,
			Background: chart.Style{Padding: chart.Box{Top: 40, Left: 10, Right: 20, Bottom: 10}},
			XAxis:      chart.XAxis{Name: "seconds into the phases", NameStyle: chart.Style{FontSize: 9, FontColor: textColor}, Style: chart.Style{FontSize: 9, FontColor: textColor}, Ticks: xticks},
			YAxis: chart.YAxis{Name: "Mbit/s", NameStyle: chart.Style{FontSize: 9, FontColor: textColor}, Style: chart.Style{FontSize: 9, FontColor: textColor},
				Range: yr, Ticks: yticks, GridMajorStyle: chart.Style{StrokeColor: drawing.ColorFromHex("e4e4e4"), StrokeWidth: 1}, GridLines: gridLines(yticks)},
			Series:   series,
			Elements: []chart.Renderable{legend(entries), phaseLines(marksPh, xticks)},
		}
		var buf bytes.Buffer
		if err := c.Render(chart.SVG, &buf); err != nil {
			continue
		}
		var names []string
		for _, p := range marksPh {
			names = append(names, fmt.Sprintf("%s from %.0f s", p.Label, p.Value))
		}
		out = append(out, figure{Title: "Over time: " + panel, SVG: sized(buf.String(), c.Width, c.Height), Marks: marks,
			Caption: fmt.Sprintf("Each flow's rate every %g s of the first repeat; phases (dotted): %s.", timelineStep, strings.Join(names, ", "))})
	}
	return out
}

// phaseLines marks where each phase starts.
func phaseLines(phases []Sample, xticks []chart.Tick) chart.Renderable {
	return func(r chart.Renderer, cb chart.Box, defaults chart.Style) {
		if len(xticks) < 2 {
			return
		}
		xr := &chart.ContinuousRange{Min: xticks[0].Value, Max: xticks[len(xticks)-1].Value, Domain: cb.Width()}
		for _, p := range phases {
			x := cb.Left + xr.Translate(p.Value)
			r.SetStrokeColor(drawing.ColorFromHex("777777"))
			r.SetStrokeWidth(1)
			r.SetStrokeDashArray([]float64{2, 3})
			r.MoveTo(x, cb.Top)
			r.LineTo(x, cb.Bottom)
			r.Stroke()
			r.SetStrokeDashArray(nil)
			r.SetFont(defaults.Font)
			r.SetFontSize(8)
			r.SetFontColor(drawing.ColorFromHex("555555"))
			r.Text(p.Label, x+3, cb.Top+10)
		}
	}
}
