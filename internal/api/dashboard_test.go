package api

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"regexp"
	"strconv"
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
	if os.Getenv("CI") != "" {
		// CI installs it (scripts/deps.sh): there its absence is a fault.
		t.Fatal("no chromium to drive the dashboard with, in CI (apt-get install chromium)")
	}
	t.Skip("SKIPPED: no chromium to drive the dashboard with (apt-get install chromium)")
	return ""
}

// browse loads a page in headless Chromium, lets its scripts run for a few
// seconds, and returns the DOM; with shot set it also saves a screenshot.
// Anything the page wrote to its console fails the test: the dashboard
// writes nothing there, so a line is a script error or a failed load.
func browse(t testing.TB, url, shot string) string {
	t.Helper()
	bin := chromium(t)
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(),
		"--virtual-time-budget=8000", "--window-size=1400,1800", "--enable-logging=stderr", "--v=0"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(args, "--dump-dom", url)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr.String())
	}
	for line := range strings.Lines(stderr.String()) {
		if strings.Contains(line, ":CONSOLE") || strings.Contains(line, "Uncaught") {
			t.Errorf("the page logged: %s", strings.TrimSpace(line))
		}
	}
	if shot != "" {
		if err := exec.CommandContext(ctx, bin, append(args, "--screenshot="+shot, url)...).Run(); err != nil {
			t.Errorf("chromium --screenshot: %v", err)
		}
	}
	return string(out)
}

// chartLatest is what a dumped dashboard says each chart showed last: its
// newest values in Mbit/s by series name, and the sample's Unix time.
type chartLatest struct {
	values map[string]float64
	time   string
}

var chartBox = regexp.MustCompile(`<div class="chart" data-key="([^"]*)" data-latest="([^"]*)" data-time="([^"]*)"`)

func chartsIn(t *testing.T, dom string) map[string]chartLatest {
	t.Helper()
	out := map[string]chartLatest{}
	for _, m := range chartBox.FindAllStringSubmatch(dom, -1) {
		var values map[string]float64
		if err := json.Unmarshal([]byte(html.UnescapeString(m[2])), &values); err != nil {
			t.Errorf("chart %s: data-latest %q: %v", m[1], m[2], err)
			continue
		}
		out[html.UnescapeString(m[1])] = chartLatest{values: values, time: m[3]}
	}
	return out
}

// errorsShown is the text of the page's list of script errors.
var errorsShown = regexp.MustCompile(`(?s)<ul id="errors"[^>]*>(.*?)</ul>`)

// TestDashboardChartsMove loads the dashboard twice, seconds apart, while
// the counters grow: each chart shows its newest values in the page, they
// are not zero, and the second load shows later and different ones.
func TestDashboardChartsMove(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	chromium(t)
	s, _ := newTestServer(t, func(c *Config) { c.SampleInterval = 200 * time.Millisecond })
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	srv := startServer(t, s)
	time.Sleep(time.Second) // a few samples, so there are rates to draw
	const uplink, pool, drops = "uplink esx1/dvs0/up1", "pool esx1/dvs0/up1/vm", "drops vm1/eth0"
	var loads []map[string]chartLatest
	for i := range 2 {
		if i > 0 {
			time.Sleep(2 * time.Second)
		}
		dom := browse(t, srv+"/?infra=t1", "")
		if m := errorsShown.FindStringSubmatch(dom); m == nil || strings.TrimSpace(m[1]) != "" {
			t.Errorf("load %d: the page shows script errors (or lacks their list): %v", i+1, m)
		}
		if !strings.Contains(dom, `class="latest muted">now: transmit `) {
			t.Errorf("load %d: no chart says its latest rate in text", i+1)
		}
		charts := chartsIn(t, dom)
		for _, key := range []string{uplink, pool, drops} {
			if _, ok := charts[key]; !ok {
				t.Fatalf("load %d: no chart %q with its latest values; charts: %v", i+1, key, charts)
			}
		}
		if _, ok := charts[drops].values["port security"]; ok {
			t.Errorf("load %d: vm1/eth0 has no firewall, yet its drops chart has a line for one: %v", i+1, charts[drops].values)
		}
		for key, name := range map[string]string{uplink: "transmit", pool: "sent", drops: "dropped sending"} {
			if v := charts[key].values[name]; !(v > 0) {
				t.Errorf("load %d: %s %s is %v, want more than 0", i+1, key, name, v)
			}
		}
		loads = append(loads, charts)
	}
	for key, name := range map[string]string{uplink: "transmit", pool: "sent"} {
		a, b := loads[0][key], loads[1][key]
		if a.time == b.time || a.values[name] == b.values[name] {
			t.Errorf("%s did not move between loads: %s %v at %s, then %v at %s", key, name, a.values[name], a.time, b.values[name], b.time)
		}
		t1, _ := strconv.ParseFloat(a.time, 64)
		t2, _ := strconv.ParseFloat(b.time, 64)
		if !(t2 > t1) {
			t.Errorf("%s: the second load's newest sample (%s) is not later than the first's (%s)", key, b.time, a.time)
		}
	}
}

// TestDashboardShowsEveryVM loads the dashboard of a test infrastructure in
// headless Chromium: the page's script fetches the status and draws every
// VM and the charts.
func TestDashboardShowsEveryVM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	chromium(t)
	srv := sampledServer(t, nil)
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

// TestDashboardVMsPictureAndTimeRange loads the dashboard of an
// infrastructure with a paused VM in headless Chromium: a chart per vNIC,
// the picked VM's alone when one is picked, the topology picture loaded,
// the pause said, the time ranges longer than the server keeps disabled,
// and the pause in the events with the face it came through.
func TestDashboardVMsPictureAndTimeRange(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	chromium(t)
	srv := sampledServer(t, func(s *Server) {
		if w, _ := s.do(t, req{method: "POST", path: "/api/v1/infras/t1/pause", body: `{"vm": "vm1"}`, token: testToken}); w.Code != 200 {
			t.Fatal(w.Body)
		}
	})
	dom := browse(t, srv+"/?infra=t1&range=5m", "")
	for _, want := range []string{`data-key="vnic vm1/eth0"`, `data-key="vnic vm2/eth0"`, `data-loaded="yes"`,
		"Paused: VM vm1", `<option value="30m" disabled="">`, `<option value="1h" disabled="">`, `<option value="15m">`,
		`<td>api 127.0.0.1`, `data-action="pause"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the dashboard lacks %q", want)
		}
	}
	if m := errorsShown.FindStringSubmatch(dom); m == nil || strings.TrimSpace(m[1]) != "" {
		t.Errorf("the page shows script errors (or lacks their list): %v", m)
	}
	dom = browse(t, srv+"/?infra=t1&vm=vm2", "")
	if !strings.Contains(dom, `data-key="vnic vm2/eth0"`) || strings.Contains(dom, `data-key="vnic vm1/eth0"`) {
		t.Errorf("with vm2 picked the dashboard does not chart vm2's vNICs alone")
	}
}

// sampledServer serves t1 (smallSpec), after then (when given), with a few
// samples taken, and returns its URL.
func sampledServer(t *testing.T, then func(*Server)) string {
	t.Helper()
	s, _ := newTestServer(t, nil)
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	if then != nil {
		then(s)
	}
	for range 5 {
		s.Sampler().SampleOnce()
		time.Sleep(10 * time.Millisecond)
	}
	return startServer(t, s)
}

// TestDashboardShowsLoadBalancers loads the dashboard of an infrastructure
// with a load balancer on a port group: a row per backend, under its VIP.
func TestDashboardShowsLoadBalancers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	chromium(t)
	s, _ := newTestServer(t, nil)
	lb := strings.Replace(smallSpec, "portgroups: [{name: pg-vm, pool: vm}]",
		"portgroups: [{name: pg-vm, pool: vm, loadBalancers: [{name: web, vip: 10.0.0.100, listeners: [{protocol: tcp, port: 80}], backends: [{vm: vm1}, {vm: vm2}]}]}]", 1)
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: lb, ctype: "application/yaml", token: testToken}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	srv := startServer(t, s)
	dom := browse(t, srv+"/?infra=t1", "")
	for _, want := range []string{`data-lb="portgroup pg-vm/web"`, "10.0.0.100", "tcp 80 -&gt; 80", "vm2 eth0"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the dashboard lacks %q", want)
		}
	}
	if strings.Contains(dom, `id="lb-section" hidden`) {
		t.Error("the load balancers' section is hidden")
	}
}

// historyServer serves, over etcd, infrastructure c1 with a history made
// through the API: two applies, a pause, a resume and a rollback to 1,
// generation 2 giving vm2's eth0 another address.
func historyServer(t *testing.T) string {
	t.Helper()
	s, _, _ := clusterServer(t)
	changed := strings.Replace(clusterSpec, "10.20.0.2/24", "10.20.0.3/24", 1)
	for _, q := range []req{
		{method: "PUT", path: "/api/v1/infras/c1", body: clusterSpec, ctype: "application/yaml"},
		{method: "PUT", path: "/api/v1/infras/c1", body: changed, ctype: "application/yaml"},
		{method: "POST", path: "/api/v1/infras/c1/pause", body: `{"vm": "vm1"}`},
		{method: "POST", path: "/api/v1/infras/c1/resume", body: `{"vm": "vm1"}`},
		{method: "POST", path: "/api/v1/infras/c1/rollback?to=1"},
	} {
		q.token = testToken
		if w, _ := s.do(t, q); w.Code != 200 {
			t.Fatalf("%s %s: %d %s", q.method, q.path, w.Code, w.Body)
		}
	}
	return startServer(t, s)
}

// historyRow is one row of the dashboard's history as dumped: its
// generation, verb, whether it is marked in force and whether it is the
// generation picked.
var historyRow = regexp.MustCompile(`<tr( class="selected")? data-seq="(\d+)" data-generation="(\d+)" data-verb="([a-z]+)"( data-in-force="yes")?>`)

// TestDashboardHistoryAndDiff makes a history through the API over etcd
// (two applies, a pause, a resume, a rollback) and loads the dashboard in
// headless Chromium with the second generation picked: the history lists
// the entries in order with their verbs and who made them, marks the
// generation in force, and the diff shows the vNIC whose address the
// rollback changed, field by field.
func TestDashboardHistoryAndDiff(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	chromium(t)
	srv := historyServer(t)
	dom := browse(t, srv+"/?infra=c1&gen=2", os.Getenv("VNET_DASHBOARD_SCREENSHOT"))
	if m := errorsShown.FindStringSubmatch(dom); m == nil || strings.TrimSpace(m[1]) != "" {
		t.Errorf("the page shows script errors (or lacks their list): %v", m)
	}
	var rows []string
	for _, m := range historyRow.FindAllStringSubmatch(dom, -1) {
		row := m[3] + " " + m[4]
		if m[1] != "" {
			row += " picked"
		}
		if m[5] != "" {
			row += " in-force"
		}
		rows = append(rows, row)
	}
	want := []string{"1 apply", "2 apply picked", "2 pause", "2 resume", "3 rollback in-force"}
	if strings.Join(rows, ", ") != strings.Join(want, ", ") {
		t.Errorf("the history shows %q, want %q", rows, want)
	}
	for _, want := range []string{"<td>alice</td>", "<td>rollback to 1</td>", "<td>~1 vNIC (ip)</td>",
		`<div id="diff" data-from="2">`, "From generation 2 to generation 3",
		`data-op="change" data-ref="vnic eth0 of vm vm2"`, `<td class="was">10.20.0.3/24</td><td class="now">10.20.0.2/24</td>`,
		"Paused and resumed between them"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the dashboard lacks %q", want)
		}
	}
	if t.Failed() {
		i := strings.Index(dom, `id="history-section"`)
		t.Logf("the history as shown: %s", dom[max(i, 0):])
	}
}
