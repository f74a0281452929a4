package api

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func hasChromium() bool {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if _, err := exec.LookPath(name); err == nil {
			return true
		}
	}
	return false
}

// chromium finds a headless browser, or skips.
func chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("SKIPPED: no chromium to drive the dashboard with (apt-get install chromium)")
	return ""
}

// browse loads a page in headless Chromium, lets its scripts run for a few
// seconds, and returns the DOM; with shot set it also saves a screenshot.
func browse(t testing.TB, url, shot string) string {
	t.Helper()
	bin := chromium(t)
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(),
		"--virtual-time-budget=8000", "--window-size=1400,1800"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(args, "--dump-dom", url)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	if shot != "" {
		if err := exec.CommandContext(ctx, bin, append(args, "--screenshot="+shot, url)...).Run(); err != nil {
			t.Errorf("chromium --screenshot: %v", err)
		}
	}
	return string(out)
}

// TestDashboardShowsEveryVM loads the dashboard of a test infrastructure in
// headless Chromium: the page's script fetches the status and draws every
// VM and the charts.
func TestDashboardShowsEveryVM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	chromium(t)
	s, _ := newTestServer(t, nil)
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	for range 5 {
		s.Sampler().SampleOnce()
		time.Sleep(10 * time.Millisecond)
	}
	srv := startServer(t, s)
	dom := browse(t, srv+"/?infra=t1", os.Getenv("VNET_DASHBOARD_SCREENSHOT"))
	for _, want := range []string{`id="vm-vm1"`, `id="vm-vm2"`, `id="host-esx1"`, "pool vm on esx1 up1", "esx1 up1 (vmnic0 on dvs0)", "alice", "uplot"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the dashboard lacks %q", want)
		}
	}
	if strings.Contains(dom, "loading…") {
		t.Error("the dashboard never finished loading")
	}
}
