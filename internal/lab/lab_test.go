package lab

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeOutcomes is a run as the database would give it back.
func fakeOutcomes() (*RunInfo, []Outcome) {
	info := &RunInfo{ID: 1, Started: time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC), Machine: "test machine", Quick: true, Repeat: 1, Command: "vnet lab run --all --quick"}
	var out []Outcome
	for i, e := range Catalog {
		s := Samples{
			{Series: "a", Label: "x", Metric: e.Chart.Metric, Value: float64(100 + i), Unit: "u"},
			{Series: "b", Label: "x", Metric: e.Chart.Metric, Value: float64(50 + i), Unit: "u"},
		}
		out = append(out, Outcome{Experiment: e.Name, Samples: s, Verdict: e.Judge(s), Seconds: 1})
	}
	return info, out
}

func TestCatalogNamesAreTheContract(t *testing.T) {
	want := "s0-patterns s0-virtualization s0-vm-to-vm s0-smp s0-rx-buffers s1-lro s2-scale-out s3-multi-nic s3-relink s4-shares-example s4-scenario1 s4-scenario2 s4-scenario3"
	var got []string
	for _, e := range Catalog {
		got = append(got, e.Name)
		if e.Run == nil || e.Judge == nil || e.Published == "" || e.Scaling == "" || e.Chart.Metric == "" {
			t.Errorf("%s is incomplete", e.Name)
		}
	}
	if strings.Join(got, " ") != want {
		t.Errorf("catalogue %v", got)
	}
}

func TestJudgesOnEmptySamplesDoNotPanic(t *testing.T) {
	for _, e := range Catalog {
		if v := e.Judge(nil); v.Expected == "" || v.Status == Reproduced {
			t.Errorf("%s: empty samples judged %+v", e.Name, v)
		}
	}
}

func TestJudgeExamples(t *testing.T) {
	s := Samples{{Series: "send", Label: "bulk", Metric: "throughput", Value: 678}, {Series: "send", Label: "default", Metric: "throughput", Value: 242}}
	if v := s0Patterns.Judge(s); v.Status != Reproduced || !strings.Contains(v.Observed, "2.80") {
		t.Errorf("S0's own figures: %+v", v)
	}
	s = Samples{{Series: "VM (25 shares)", Label: "alone", Metric: "throughput", Value: 950},
		{Series: "VM (25 shares)", Label: "contended", Metric: "throughput", Value: 190},
		{Series: "vMotion (100 shares)", Label: "contended", Metric: "throughput", Value: 760}}
	if v := s4SharesExample.Judge(s); v.Status != Reproduced {
		t.Errorf("shares: %+v", v)
	}

	// S1's own efficiency gains and packet figures.
	s = nil
	for i, label := range []string{"native->VM 256B", "native->VM 16KiB", "native->VM 64KiB", "VM->VM 256B", "VM->VM 16KiB", "VM->VM 64KiB"} {
		gain := []float64{1.86, 1.25, 1.33, 1.15, 1.92, 1.90}[i]
		s = append(s, Sample{Series: "GRO off", Label: label, Metric: "efficiency", Value: 1},
			Sample{Series: "GRO on", Label: label, Metric: "efficiency", Value: gain})
	}
	s = append(s, Sample{Series: "GRO off", Label: "native->VM 64KiB", Metric: "stack_pps", Value: 815},
		Sample{Series: "GRO off", Label: "native->VM 64KiB", Metric: "stack_avg_packet", Value: 1500},
		Sample{Series: "GRO on", Label: "native->VM 64KiB", Metric: "stack_pps", Value: 113},
		Sample{Series: "GRO on", Label: "native->VM 64KiB", Metric: "stack_avg_packet", Value: 10500})
	v := s1LRO.Judge(s)
	if v.Status != Reproduced || !strings.Contains(v.Observed, "+86%") || !strings.Contains(v.Observed, "815 Kpps of 1500 B -> 113 Kpps of 10500 B") {
		t.Errorf("S1's own figures: %+v", v)
	}
}

func TestDatabaseRoundTripAndReport(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenDB(dir)
	if err != nil {
		t.Fatal(err)
	}
	info, outs := fakeOutcomes()
	if err := db.startRun(info); err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		for _, s := range o.Samples {
			db.addSample(info.ID, o.Experiment, s)
		}
		db.addVerdict(info.ID, o.Experiment, o.Verdict, o.Error, o.Seconds)
	}
	db.Close()
	gotInfo, got, err := Rebuild(dir)
	if err != nil {
		t.Fatal(err)
	}
	if gotInfo.Command != info.Command || len(got) != len(Catalog) || len(got[0].Samples) != 2 {
		t.Fatalf("round trip: %+v %d", gotInfo, len(got))
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if n := strings.Count(string(html), "<svg"); n != len(Catalog) {
		t.Errorf("report has %d charts, want %d", n, len(Catalog))
	}
	md, _ := os.ReadFile(filepath.Join(dir, "summary.md"))
	if !strings.Contains(string(md), "| s4-scenario3 | S4 |") {
		t.Errorf("summary:\n%s", md)
	}
}

// The report renders in a real browser: headless Chromium loads it, its
// DOM has every chart with drawn bars, and the screenshot is not blank.
func TestReportRendersInChromium(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("SKIPPED: chromium is not installed (apt-get install chromium; .ci/run installs it)")
	}
	dir := t.TempDir()
	info, outs := fakeOutcomes()
	if err := WriteReport(dir, info, outs); err != nil {
		t.Fatal(err)
	}
	page := "file://" + filepath.Join(dir, "report.html")
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + t.TempDir()}
	dom, err := exec.Command(browser, append(flags, "--dump-dom", page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	if n := strings.Count(string(dom), "<svg"); n != len(Catalog) {
		t.Errorf("rendered DOM has %d charts, want %d", n, len(Catalog))
	}
	if !strings.Contains(string(dom), "<path") {
		t.Error("charts have no drawn paths")
	}
	shot := filepath.Join(dir, "shot.png")
	if out, err := exec.Command(browser, append(flags, "--screenshot="+shot, "--window-size=1200,1600", page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if colors := distinctColors(img); colors < 10 {
		t.Errorf("screenshot has %d colours: blank page?", colors)
	}
}

func distinctColors(img image.Image) int {
	seen := map[uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 4 {
		for x := r.Min.X; x < r.Max.X; x += 4 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			seen[cr>>12<<8|cg>>12<<4|cb>>12] = true
		}
	}
	return len(seen)
}
