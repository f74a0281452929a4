package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// A misspelled query parameter is refused before anything is done: a
// dry run asked for as ?dryrun=true applied for real.
func TestUnknownQueryParametersAreRefused(t *testing.T) {
	s, be := newTestServer(t, nil)
	yaml := "application/yaml"
	w, eb := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1?dryrun=true", body: smallSpec, ctype: yaml, token: testToken})
	if w.Code != 400 || eb.Field != "dryrun" || !strings.Contains(eb.Error, "takes dryRun") || !strings.Contains(eb.Error, "case-sensitive") {
		t.Errorf("?dryrun=true: %d %+v", w.Code, eb)
	}
	if _, err := be.Get(context.Background(), "t1"); err == nil {
		t.Fatal("?dryrun=true applied")
	}
	tests := []struct {
		path, field, says string
	}{
		{"/api/v1/infras/t1?dryRun=true&dryRun=false", "dryRun", "given 2 times"},
		{"/api/v1/infras/t1?dryRun=", "dryRun", "want true or false"},
		{"/api/v1/infras/t1?dryRun=yes", "dryRun", "want true or false"},
		{"/api/v1/infras/t1?dry_run=1", "dry_run", "takes dryRun"},
		{"/api/v1/infras/t1?force=true", "force", "takes dryRun"},
		{"/api/v1/infras/t1?dryRun=true;x=1", "", "not name=value pairs"},
		{"/api/v1/infras/t1?%zz=1", "", "not name=value pairs"},
		{"/api/v1/infras/t1?%1b%5b2J=1", `\x1b[2J`, "takes dryRun"},
	}
	for _, tc := range tests {
		w, eb := s.do(t, req{method: "PUT", path: tc.path, body: smallSpec, ctype: yaml, token: testToken})
		if w.Code != 400 || eb.Field != tc.field || !strings.Contains(eb.Error, tc.says) {
			t.Errorf("PUT %s: %d %+v, want 400 on %q saying %q", tc.path, w.Code, eb, tc.field, tc.says)
		}
		if strings.ContainsRune(eb.Error, 0x1b) {
			t.Errorf("PUT %s: the error holds a control character: %q", tc.path, eb.Error)
		}
	}
	if _, err := be.Get(context.Background(), "t1"); err == nil {
		t.Fatal("a refused query applied")
	}
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1?dryRun=true", body: smallSpec, ctype: yaml, token: testToken}); w.Code != 200 {
		t.Errorf("?dryRun=true: %d %s", w.Code, w.Body)
	}
}

// Every route refuses a parameter it does not declare, and takes each it
// declares with a good value.
func TestEveryRouteChecksItsQuery(t *testing.T) {
	s, _ := newTestServer(t, nil)
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	good := map[paramKind]string{boolParam: "true", durationParam: "2s", intParam: "5", infraParam: "t1", nameParam: "vm1"}
	for _, rt := range s.routes {
		path := strings.NewReplacer("{name}", "t1", "{file}", "app.js", "{id}", "1").Replace(rt.Path)
		w, eb := s.do(t, req{method: rt.Method, path: path + "?bogus=1", token: testToken})
		if w.Code != 400 || eb.Field != "bogus" || !strings.Contains(eb.Error, rt.Method+" "+rt.Path+" takes") {
			t.Errorf("%s %s?bogus=1: %d %+v", rt.Method, path, w.Code, eb)
		}
		for _, p := range rt.Query {
			v := good[p.Kind]
			if p.Kind == wordParam {
				v = p.Words[len(p.Words)-1]
			}
			q := path + "?" + p.Name + "=" + v
			if rt.Method != "GET" {
				continue // the PUT's is tried above
			}
			if w, eb := s.do(t, req{method: rt.Method, path: q, token: testToken}); w.Code == 400 {
				t.Errorf("%s %s: %d %+v", rt.Method, q, w.Code, eb)
			}
		}
	}
}

// A request whose Host is not one of the server's names is refused, so a
// page that rebinds its own name to 127.0.0.1 reads nothing, while
// --auth-reads is off; addresses, localhost, the machine's name and the
// names given are answered.
func TestHostMustNameTheServer(t *testing.T) {
	s, _ := newTestServer(t, func(c *Config) { c.Hosts = []string{"vnet.example.org"} })
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	hostname, _ := os.Hostname()
	reads := []string{"/", "/api/v1/infras", "/api/v1/infras/t1", "/api/v1/infras/t1/status", "/api/v1/events", "/metrics", "/openapi.json", "/ui/app.js", "/api/v2/none"}
	for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:8470", "127.0.0.1.nip.io:8470", "localhost.attacker.example", "vnet.example.org.attacker.example"} {
		for _, path := range reads {
			w, eb := s.doHost(t, host, req{method: "GET", path: path})
			if w.Code != http.StatusForbidden || !strings.Contains(eb.Error, "--allow-host") {
				t.Errorf("GET %s with Host %s: %d %.200s", path, host, w.Code, w.Body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:8470", "127.0.0.1", "[::1]:8470", "localhost:8470", "LOCALHOST", "app.localhost:8470", "192.0.2.1:8470",
		"vnet.example.org:8470", "VNET.example.org.", hostname, hostname + ":8470", ""} {
		if w, eb := s.doHost(t, host, req{method: "GET", path: "/api/v1/infras/t1/status"}); w.Code != 200 {
			t.Errorf("GET with Host %q: %d %+v", host, w.Code, eb)
		}
	}
}

// A change sent by another site's page is refused even with a token (a
// page cannot read one, but a browser could hold credentials some day);
// the server's own page and clients that are not browsers may change.
func TestChangesFromOtherSitesAreRefused(t *testing.T) {
	s, be := newTestServer(t, nil)
	for _, h := range []map[string]string{
		{"Origin": "http://rebind.attacker.example"},
		{"Origin": "http://127.0.0.1:9999"},
		{"Origin": "https://127.0.0.1:8470"},
		{"Origin": "null"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Origin": "http://127.0.0.1:8470", "Sec-Fetch-Site": "same-site"},
	} {
		w, eb := s.doHeaders(t, h, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken})
		if w.Code != http.StatusForbidden || !strings.Contains(eb.Error, "refused") {
			t.Errorf("PUT with %v: %d %+v", h, w.Code, eb)
		}
	}
	if _, err := be.Get(context.Background(), "t1"); err == nil {
		t.Fatal("a change from another site's page applied")
	}
	for _, h := range []map[string]string{nil, {"Origin": "http://127.0.0.1:8470"}, {"Origin": "http://127.0.0.1:8470", "Sec-Fetch-Site": "same-origin"}} {
		if w, eb := s.doHeaders(t, h, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken}); w.Code != 200 {
			t.Errorf("PUT with %v: %d %+v", h, w.Code, eb)
		}
	}
	// Reads from another origin are the browser's to keep from the page
	// (no CORS header is sent); the Host decides whether they are answered.
	if w, _ := s.doHeaders(t, map[string]string{"Origin": "http://elsewhere.example"}, req{method: "GET", path: "/api/v1/infras"}); w.Code != 200 || w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a read with another Origin: %d, CORS %q", w.Code, w.Header().Get("Access-Control-Allow-Origin"))
	}
}

// Every answer, errors included, carries the headers that keep a browser
// from framing, sniffing, caching or handing it to another site.
func TestEveryAnswerHasSecurityHeaders(t *testing.T) {
	s, _ := newTestServer(t, nil)
	for _, q := range []req{
		{method: "GET", path: "/"},
		{method: "GET", path: "/ui/app.js"},
		{method: "GET", path: "/api/v1/infras"},
		{method: "GET", path: "/api/v1/infras/nope"},
		{method: "GET", path: "/metrics"},
		{method: "GET", path: "/nowhere"},
		{method: "PUT", path: "/api/v1/infras/t1"},
		{method: "GET", path: "/api/v1/infras/../x"},
	} {
		w, _ := s.do(t, q)
		h := w.Header()
		for name, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
			"Cross-Origin-Resource-Policy": "same-origin", "Cache-Control": "no-store"} {
			if got := h.Get(name); got != want {
				t.Errorf("%s %s (%d): %s %q, want %q", q.method, q.path, w.Code, name, got, want)
			}
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s %s: Content-Security-Policy %q", q.method, q.path, csp)
		}
	}
	w, _ := s.do(t, req{method: "GET", path: "/api/v1/infras"})
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("JSON answered with Content-Security-Policy %q", csp)
	}
}

// A path a client sent is echoed quoted and escaped: no control or
// bidirectional character reaches a terminal or a log, and a long one is
// clipped.
func TestPathsAreEchoedQuoted(t *testing.T) {
	var log bytes.Buffer
	s, _ := newTestServer(t, func(c *Config) { c.Log = &log })
	for _, path := range []string{"/api/v1/%E2%80%AEevil", "/" + strings.Repeat("a", 500), "/ui/%E2%80%AEx.js"} {
		w, eb := s.do(t, req{method: "GET", path: path})
		if w.Code != 404 || strings.ContainsRune(eb.Error, '\u202e') || len(eb.Error) > 200 {
			t.Errorf("GET %s: %d %q", path, w.Code, eb.Error)
		}
		w, eb = s.do(t, req{method: "DELETE", path: path, remote: "192.0.2.7:5000"})
		if strings.ContainsRune(eb.Error, '\u202e') || len(eb.Error) > 300 {
			t.Errorf("DELETE %s: %d %q", path, w.Code, eb.Error)
		}
	}
	s.do(t, req{method: "DELETE", path: "/api/v1/infras/t1?%E2%80%AE=1", remote: "192.0.2.7:5000"})
	s.refused.flush()
	if strings.ContainsRune(log.String(), '\u202e') {
		t.Errorf("the log holds a bidirectional override:\n%s", log.String())
	}
}

// Thousands of refused requests write a bounded number of lines, and say
// how many were not logged one by one.
func TestRefusedRequestsAreLoggedBounded(t *testing.T) {
	var log syncBuffer
	s, _ := newTestServer(t, func(c *Config) { c.Log = &log })
	const n = 5000
	for i := range n {
		switch i % 3 {
		case 0:
			s.do(t, req{method: "DELETE", path: "/api/v1/infras/t1"})
		case 1:
			s.doHost(t, "rebind.attacker.example", req{method: "GET", path: "/api/v1/infras"})
		case 2:
			s.doHeaders(t, map[string]string{"Origin": "http://rebind.attacker.example"}, req{method: "DELETE", path: "/api/v1/infras/t1", token: testToken})
		}
	}
	s.refused.close()
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) > refusalBurst+1 {
		t.Errorf("%d refusals made %d lines", n, len(lines))
	}
	last := lines[len(lines)-1]
	want := fmt.Sprintf("and %d more", n-refusalBurst)
	if !strings.Contains(last, want) || !strings.Contains(last, "without a valid token") || !strings.Contains(last, "for a Host not the server's") ||
		!strings.Contains(last, "from another site's page") {
		t.Errorf("the summary is %q, want %q with each reason", last, want)
	}
}

// The window's summary comes when the window ends, without a request to
// bring it.
func TestRefusalSummaryComesAtTheWindowsEnd(t *testing.T) {
	var log syncBuffer
	f := newRefusals(newLogger(&log))
	f.window, f.burst = 50*time.Millisecond, 1
	for range 3 {
		f.note("tests", "one")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(log.String(), "and 2 more") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(log.String(), "and 2 more") {
		t.Errorf("no summary: %q", log.String())
	}
	f.close()
}

func (s *Server) doHost(t *testing.T, host string, q req) (*httptest.ResponseRecorder, ErrorBody) {
	t.Helper()
	return s.doWith(t, q, func(r *http.Request) { r.Host = host })
}

func (s *Server) doHeaders(t *testing.T, h map[string]string, q req) (*httptest.ResponseRecorder, ErrorBody) {
	t.Helper()
	return s.doWith(t, q, func(r *http.Request) {
		for k, v := range h {
			r.Header.Set(k, v)
		}
	})
}

// doWith is do with the request changed by mod before it is served.
func (s *Server) doWith(t *testing.T, q req, mod func(*http.Request)) (*httptest.ResponseRecorder, ErrorBody) {
	t.Helper()
	r := httptest.NewRequest(q.method, "http://127.0.0.1:8470"+q.path, strings.NewReader(q.body))
	r.RemoteAddr = "127.0.0.1:40000"
	if q.remote != "" {
		r.RemoteAddr = q.remote
	}
	if q.ctype != "" {
		r.Header.Set("Content-Type", q.ctype)
	}
	if q.token != "" {
		r.Header.Set("Authorization", "Bearer "+q.token)
	}
	if mod != nil {
		mod(r)
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	var eb ErrorBody
	if w.Code >= 300 {
		_ = json.Unmarshal(w.Body.Bytes(), &eb)
	}
	return w, eb
}

func newLogger(w io.Writer) *log.Logger { return log.New(w, "", log.LstdFlags) }

// syncBuffer is a buffer a logger and a timer may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
