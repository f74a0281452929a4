package lab

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// measureScript, appended to a copy of the report for the test only,
// records each chart's drawn size and its count of filled shapes once the
// browser has laid the page out.
const measureScript = `<script>
for (const f of document.querySelectorAll('figure.chart')) {
  const s = f.querySelector('svg');
  if (!s) { f.dataset.drawn = 'none'; continue; }
  const b = s.getBoundingClientRect();
  const filled = [...s.querySelectorAll('path')].filter(p => { const st = p.getAttribute('style') || ''; return /fill:rgba?\((?!255,255,255)/.test(st) && !/fill:rgba\([^)]*,0(\.0+)?\)/.test(st); }).length;
  f.dataset.drawn = Math.round(b.width) + 'x' + Math.round(b.height) + ':' + filled;
}
</script></body>`

// The report renders in a real browser: headless Chromium loads a report
// of a fabricated results.db; every experiment has charts, each laid out
// at a real size with filled marks, and the screenshot is not blank.
func TestReportRendersInChromium(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("SKIPPED: chromium is not installed (apt-get install -y chromium; .ci/run installs it)")
	}
	dir := t.TempDir()
	writeFakeDB(t, dir)
	if _, _, err := Rebuild(dir); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(dir, "probe.html")
	if err := os.WriteFile(probe, []byte(strings.Replace(string(html), "</body>", measureScript, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + t.TempDir()}
	dom, err := exec.Command(browser, append(flags, "--dump-dom", "file://"+probe)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	drawn := regexp.MustCompile(`<figure class="chart" data-marks="(\d+)" data-drawn="(\d+)x(\d+):(\d+)">`)
	secs := sections(string(dom))
	if len(secs) != len(Catalog) {
		t.Fatalf("rendered page has %d experiments, want %d", len(secs), len(Catalog))
	}
	for _, e := range Catalog {
		figs := drawn.FindAllStringSubmatch(secs[e.Name], -1)
		if len(figs) < 2 {
			t.Errorf("%s: %d charts laid out, want at least 2", e.Name, len(figs))
		}
		for _, f := range figs {
			w, _ := strconv.Atoi(f[2])
			h, _ := strconv.Atoi(f[3])
			filled, _ := strconv.Atoi(f[4])
			if w < 200 || h < 150 || filled == 0 || f[1] == "0" {
				t.Errorf("%s: a chart %dx%d px with %d filled shapes (%s marks)", e.Name, w, h, filled, f[1])
			}
		}
	}
	shot := filepath.Join(dir, "shot.png")
	if out, err := exec.Command(browser, append(flags, "--screenshot="+shot, "--window-size=1200,2400", "file://"+filepath.Join(dir, "report.html"))...).CombinedOutput(); err != nil {
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
	if keep := os.Getenv("VNET_LAB_KEEP_SCREENSHOT"); keep != "" {
		os.WriteFile(keep, b, 0o644)
		os.WriteFile(strings.TrimSuffix(keep, ".png")+".html", html, 0o644)
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
