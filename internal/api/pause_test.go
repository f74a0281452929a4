package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// A pause and a resume through the API: a bad target is refused with 400
// and changes nothing; a VM's pause shows in its status, in /metrics
// (vnet_paused) and in the events with the token's name; a resume undoes
// it.
func TestPauseAndResumeThroughTheAPI(t *testing.T) {
	s, _ := newTestServer(t, nil)
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken}); w.Code != 200 {
		t.Fatalf("apply: %d %s", w.Code, w.Body)
	}
	for _, tt := range []struct {
		name string
		q    req
		code int
	}{
		{"no token", req{method: "POST", path: "/api/v1/infras/t1/pause", body: `{"vm": "vm1"}`}, 401},
		{"unknown field", req{method: "POST", path: "/api/v1/infras/t1/pause", body: `{"host": "esx1"}`, token: testToken}, 400},
		{"not JSON", req{method: "POST", path: "/api/v1/infras/t1/pause", body: `vm: vm1`, token: testToken}, 400},
		{"two documents", req{method: "POST", path: "/api/v1/infras/t1/pause", body: `{"vm": "vm1"} {}`, token: testToken}, 400},
		{"too large", req{method: "POST", path: "/api/v1/infras/t1/pause", body: `{"vm": "` + strings.Repeat("a", 5000) + `"}`, token: testToken}, 413},
		{"unknown infrastructure", req{method: "POST", path: "/api/v1/infras/t9/pause", body: `{"vm": "vm1"}`, token: testToken}, 404},
	} {
		if w, _ := s.do(t, tt.q); w.Code != tt.code {
			t.Errorf("%s: %d %s, want %d", tt.name, w.Code, w.Body, tt.code)
		}
	}
	if m := scrapeText(t, s); strings.Contains(m, "vnet_paused{") {
		t.Errorf("refused pauses paused something:\n%s", m)
	}

	w, _ := s.do(t, req{method: "POST", path: "/api/v1/infras/t1/pause", body: `{"vm": "vm1"}`, ctype: "application/json", token: testToken})
	var res PauseResult
	if err := json.Unmarshal(w.Body.Bytes(), &res); w.Code != 200 || err != nil || !res.Changed || len(res.Paused) != 1 || res.Paused[0] != "vm/vm1" {
		t.Fatalf("pause vm1: %d %s", w.Code, w.Body)
	}
	w, _ = s.do(t, req{method: "GET", path: "/api/v1/infras/t1/status"})
	if !strings.Contains(w.Body.String(), `"paused"`) {
		t.Errorf("the status of a paused VM says nothing of it: %s", w.Body)
	}
	w, _ = s.do(t, req{method: "GET", path: "/api/v1/infras"})
	if !strings.Contains(w.Body.String(), `"paused": [`) || !strings.Contains(w.Body.String(), `"vm/vm1"`) {
		t.Errorf("the list of infrastructures does not say vm1 is paused: %s", w.Body)
	}
	if m := scrapeText(t, s); !strings.Contains(m, `vnet_paused{infra="t1",target="vm/vm1"} 1`) {
		t.Errorf("/metrics has no vnet_paused of vm1:\n%s", m)
	}
	w, _ = s.do(t, req{method: "GET", path: "/api/v1/events?infra=t1"})
	if !strings.Contains(w.Body.String(), `"action": "pause"`) || !strings.Contains(w.Body.String(), `"who": "alice"`) {
		t.Errorf("the events do not have alice's pause: %s", w.Body)
	}

	w, _ = s.do(t, req{method: "POST", path: "/api/v1/infras/t1/resume", token: testToken})
	if err := json.Unmarshal(w.Body.Bytes(), &res); w.Code != 200 || err != nil || !res.Changed || len(res.Paused) != 0 {
		t.Fatalf("resume everything: %d %s", w.Code, w.Body)
	}
	if m := scrapeText(t, s); strings.Contains(m, "vnet_paused{") {
		t.Errorf("after the resume /metrics still has vnet_paused:\n%s", m)
	}
}

// With nothing applied /metrics still says who answers: the build, no
// infrastructures, the Go runtime's and the process's metrics.
func TestMetricsSayWhoAnswersWithNothingApplied(t *testing.T) {
	s, _ := newTestServer(t, func(c *Config) { c.Version = "v9.9.9" })
	m := scrapeText(t, s)
	for _, want := range []string{`vnet_build_info{goversion="go`, `version="v9.9.9"} 1`, "vnet_infrastructures 0", "go_goroutines ", "process_start_time_seconds "} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics with nothing applied lacks %q:\n%s", want, m)
		}
	}
}

func scrapeText(t *testing.T, s *Server) string {
	t.Helper()
	w, _ := s.do(t, req{method: "GET", path: "/metrics"})
	if w.Code != 200 {
		t.Fatalf("/metrics: %d %s", w.Code, w.Body)
	}
	return w.Body.String()
}

// The topology through the API: JSON by default, SVG and dot on asking,
// a format there is not refused.
func TestGraphThroughTheAPI(t *testing.T) {
	s, _ := newTestServer(t, nil)
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken}); w.Code != 200 {
		t.Fatalf("apply: %d %s", w.Code, w.Body)
	}
	for _, tt := range []struct {
		path, ctype, has string
		code             int
	}{
		{"/api/v1/infras/t1/graph", "application/json", `"id": "vm/vm1"`, 200},
		{"/api/v1/infras/t1/graph?format=svg", "image/svg+xml", `data-id="vm/vm1"`, 200},
		{"/api/v1/infras/t1/graph?format=dot", "text/vnd.graphviz; charset=utf-8", `"vm/vm1"`, 200},
		{"/api/v1/infras/t1/graph?format=png", "application/json", "format", 400},
		{"/api/v1/infras/t9/graph", "application/json", "t9", 404},
	} {
		w, _ := s.do(t, req{method: "GET", path: tt.path})
		if w.Code != tt.code || w.Header().Get("Content-Type") != tt.ctype || !strings.Contains(w.Body.String(), tt.has) {
			t.Errorf("GET %s: %d %s %.200s; want %d %s with %s", tt.path, w.Code, w.Header().Get("Content-Type"), w.Body, tt.code, tt.ctype, tt.has)
		}
	}
}
