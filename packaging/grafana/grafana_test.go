package grafana

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vnet-project/vnet/internal/metrics"
)

// panel is what the test reads of a Grafana panel.
type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type dashboard struct {
	Title, UID string
	Templating struct {
		List []struct {
			Name, Type string
			Query      json.RawMessage
		}
	}
	Panels []panel
}

func readDashboard(t *testing.T) *dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(Dashboard, &d); err != nil {
		t.Fatalf("vnet.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("vnet.json: no title, uid or panels")
	}
	return &d
}

// queries is every PromQL expression the dashboard runs: its panels' and
// its variables'.
func queries(t *testing.T, d *dashboard) []string {
	t.Helper()
	var out []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		// label_values(SELECTOR, LABEL) is Grafana's: its selector is PromQL.
		m := regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`).FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(selector, label)", v.Name, q.Query)
		}
		out = append(out, fmt.Sprintf("count by (%s) (%s)", m[2], m[1]))
	}
	return out
}

// exported is every metric vnet exports with its labels: what the
// collectors of package metrics describe, read from them, and the metrics
// other packages describe (the agents' state), found in their source.
func exported(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		(&metrics.Collector{}).Describe(ch)
		metrics.NewApplyHistogram().Describe(ch)
		close(ch)
	}()
	// A Desc says its name and labels only in its String.
	re := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	for d := range ch {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read a metric's name and labels from %s", d)
		}
		labels := strings.FieldsFunc(m[2], func(r rune) bool { return r == ',' || r == ' ' })
		out[m[1]] = labels
	}
	if _, ok := out["vnet_apply_duration_seconds"]; ok {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			out["vnet_apply_duration_seconds"+suffix] = append(slices.Clone(out["vnet_apply_duration_seconds"]), "le")
		}
	}
	for name, labels := range describedInSource(t) {
		if _, ok := out[name]; !ok {
			out[name] = labels
		}
	}
	return out
}

// describedInSource finds prometheus.NewDesc("vnet_...", help,
// []string{labels...}) in the module's Go files outside package metrics.
func describedInSource(t *testing.T) map[string][]string {
	t.Helper()
	root := filepath.Join("..", "..")
	re := regexp.MustCompile(`prometheus\.NewDesc\(\s*"(vnet_\w+)",(?s:.*?)\[\]string\{([^}]*)\}`)
	out := map[string][]string{}
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			var labels []string
			for _, l := range strings.Split(m[2], ",") {
				if l = strings.Trim(strings.TrimSpace(l), `"`); l != "" {
					labels = append(labels, l)
				}
			}
			out[m[1]] = labels
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every metric the dashboard queries is one vnet exports, and every label
// it matches or groups by is one of that metric's.
func TestQueriesUseExportedMetrics(t *testing.T) {
	d := readDashboard(t)
	known := exported(t)
	if len(known) < 20 {
		t.Fatalf("found only %d metrics exported", len(known))
	}
	used := map[string]bool{}
	for _, q := range queries(t, d) {
		sel, err := scanPromQL(q)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		var all []string
		for _, s := range sel.selectors {
			labels, ok := known[s.metric]
			if !ok {
				t.Errorf("%s: metric %s is not exported by vnet", q, s.metric)
				continue
			}
			used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s.metric, "_bucket"), "_sum"), "_count")] = true
			all = append(all, labels...)
			for _, l := range s.labels {
				if !slices.Contains(labels, l) {
					t.Errorf("%s: %s has no label %s (it has %v)", q, s.metric, l, labels)
				}
			}
		}
		for _, l := range sel.grouping {
			if !slices.Contains(all, l) {
				t.Errorf("%s: groups by %s, which none of its metrics has", q, l)
			}
		}
	}
	// The dashboard shows every family of what vnet exports.
	for _, want := range []string{"vnet_up", "vnet_agent_up", "vnet_port_transmit_bytes_total", "vnet_port_security_packets_total",
		"vnet_uplink_transmit_bytes_total", "vnet_pool_drops_total", "vnet_apply_duration_seconds"} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
}

// Panels are laid out on Grafana's 24 columns, with ids and refIds of
// their own, each on the dashboard's data source variable.
func TestPanels(t *testing.T) {
	d := readDashboard(t)
	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] || p.ID == 0 {
				t.Errorf("panel %q: id %d is zero or taken", p.Title, p.ID)
			}
			ids[p.ID] = true
			if p.GridPos.W < 1 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H < 1 {
				t.Errorf("panel %q: off the grid %+v", p.Title, p.GridPos)
			}
			if p.Type != "row" {
				if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q: not on the data source variable", p.Title)
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %q: no query", p.Title)
				}
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if refs[tg.RefID] || tg.RefID == "" {
					t.Errorf("panel %q: refId %q empty or taken", p.Title, tg.RefID)
				}
				refs[tg.RefID] = true
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	var rows []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows = append(rows, p.Title)
		}
	}
	want := []string{"Overview", "Uplinks and Network I/O Control pools", "VMs and vNICs", "Port security", "Cluster hosts"}
	if !slices.Equal(rows, want) {
		t.Errorf("rows %q, want %q", rows, want)
	}
}

// Prometheus's own tool parses every query, when it is installed (Debian
// package prometheus).
func TestQueriesParseWithPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("SKIP: promtool is not installed (Debian package prometheus): the queries are checked by this test's own scanner only")
	}
	d := readDashboard(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: vnet-dashboard\n    rules:\n")
	grafana := strings.NewReplacer("$__rate_interval", "1m", "$infra", ".*", "$host", ".*", "$vm", ".*")
	for i, q := range queries(t, d) {
		b, _ := json.Marshal(grafana.Replace(q)) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: vnet:dashboard_query_%d\n        expr: %s\n", i, b)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, rules.String())
	}
}

func TestScanPromQL(t *testing.T) {
	for _, tt := range []struct {
		q                string
		metrics, groupBy string
		labels           string
	}{
		{`vnet_up{infra=~"$infra"}`, "vnet_up", "", "vnet_up:infra"},
		{`sum by (infra, vm) (rate(vnet_port_transmit_bytes_total{vm!="", counter!~"acl\\[x\\]"}[$__rate_interval])) * 8`,
			"vnet_port_transmit_bytes_total", "infra vm", "vnet_port_transmit_bytes_total:counter vnet_port_transmit_bytes_total:vm"},
		{`histogram_quantile(0.9, sum without(le) (rate(a_b[5m]))) / on (x) group_left(y) c offset 5m`, "a_b c", "le x y", ""},
		{`count by (host) (count by (host, vm) (m{a="}{"} == 0))`, "m", "host host vm", "m:a"},
		{`sum(rate(x[1m])) by (h)`, "x", "h", ""},
		{`1e3 * y and z unless w`, "w y z", "", ""},
	} {
		got, err := scanPromQL(tt.q)
		if err != nil {
			t.Errorf("%s: %v", tt.q, err)
			continue
		}
		var ms, ls []string
		for _, s := range got.selectors {
			ms = append(ms, s.metric)
			for _, l := range s.labels {
				ls = append(ls, s.metric+":"+l)
			}
		}
		sort.Strings(ms)
		sort.Strings(ls)
		sort.Strings(got.grouping)
		if strings.Join(ms, " ") != tt.metrics || strings.Join(got.grouping, " ") != tt.groupBy || strings.Join(ls, " ") != tt.labels {
			t.Errorf("%s:\nmetrics %v, grouping %v, labels %v;\nwant %s / %s / %s", tt.q, ms, got.grouping, ls, tt.metrics, tt.groupBy, tt.labels)
		}
	}
	for _, bad := range []string{`x{a="b}`, `sum(x`, `x{a}`, `"open`} {
		if _, err := scanPromQL(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
