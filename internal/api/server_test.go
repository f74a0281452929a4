package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/api/web"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

const testToken = "0123456789abcdef0123"

func newTestServer(t testing.TB, mod func(*Config)) (*Server, *fakeBackend) {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tf, []byte("# the test's\nalice:"+testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	be := newFake()
	cfg := Config{Backend: be, TokenFile: tf, SampleInterval: 10 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, be
}

type req struct {
	method, path, body, ctype, token, remote string
}

func (s *Server) do(t *testing.T, q req) (*httptest.ResponseRecorder, ErrorBody) {
	t.Helper()
	w, eb := s.doWith(t, q, nil)
	if w.Code >= 300 {
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: %d answered as %q, want JSON", q.method, q.path, w.Code, ct)
		}
		if eb.Error == "" {
			t.Errorf("%s %s: %d with body %q: want {\"error\": ...}", q.method, q.path, w.Code, w.Body.String())
		}
	}
	return w, eb
}

func TestStatusCodes(t *testing.T) {
	s, _ := newTestServer(t, nil)
	yaml := "application/yaml"
	put := func(body, ctype, token string) req {
		return req{method: "PUT", path: "/api/v1/infras/t1", body: body, ctype: ctype, token: token}
	}
	tests := []struct {
		name  string
		req   req
		want  int
		field string
	}{
		{"apply without a token", put(smallSpec, yaml, ""), 401, ""},
		{"apply with a wrong token", put(smallSpec, yaml, "0123456789abcdef0124"), 401, ""},
		{"destroy without a token", req{method: "DELETE", path: "/api/v1/infras/t1"}, 401, ""},
		{"dry run without a token", req{method: "PUT", path: "/api/v1/infras/t1?dryRun=true", body: smallSpec, ctype: yaml}, 401, ""},
		{"no content type", put(smallSpec, "", testToken), 415, ""},
		{"wrong content type", put(smallSpec, "text/html", testToken), 415, ""},
		{"empty body", put("", yaml, testToken), 400, ""},
		{"not JSON", put("{name: t1", "application/json", testToken), 400, ""},
		{"unknown field", put(strings.Replace(smallSpec, "vms:", "vmz:", 1), yaml, testToken), 400, "vmz"},
		{"bad reference", put(strings.Replace(smallSpec, "host: esx1\n    nics: [{portgroup: pg-vm, ip: 10.0.0.2/24}]", "host: esx9\n    nics: [{portgroup: pg-vm, ip: 10.0.0.2/24}]", 1), yaml, testToken), 400, "vms[1].host"},
		{"name differs from the URL", req{method: "PUT", path: "/api/v1/infras/t2", body: smallSpec, ctype: yaml, token: testToken}, 400, "name"},
		{"a second document", put(smallSpec+"---\nname: t1\n", yaml, testToken), 400, ""},
		{"a zero for a default", put(strings.Replace(smallSpec, "vms:", "vms:\n  - {name: vm9, host: esx1, cpus: 0, nics: [{portgroup: pg-vm}]}", 1), yaml, testToken), 400, "vms[0].cpus"},
		{"body too large", put(strings.Repeat("#", spec.MaxSpecBytes+1), yaml, testToken), 413, ""},
		{"bad dryRun", req{method: "PUT", path: "/api/v1/infras/t1?dryRun=maybe", body: smallSpec, ctype: yaml, token: testToken}, 400, "dryRun"},
		{"unknown infra", req{method: "GET", path: "/api/v1/infras/nope"}, 404, ""},
		{"unknown infra status", req{method: "GET", path: "/api/v1/infras/nope/status"}, 404, ""},
		{"destroy unknown", req{method: "DELETE", path: "/api/v1/infras/nope", token: testToken}, 404, ""},
		{"bad name", req{method: "GET", path: "/api/v1/infras/UPPER"}, 400, "name"},
		{"dot dot", req{method: "GET", path: "/api/v1/infras/../infras"}, 400, ""},
		{"encoded slash", req{method: "GET", path: "/api/v1/infras/a%2Fb"}, 400, ""},
		{"encoded dots", req{method: "GET", path: "/api/v1/infras/%2e%2e/status"}, 400, ""},
		{"empty segment", req{method: "GET", path: "/api/v1//infras"}, 400, ""},
		{"no such path", req{method: "GET", path: "/api/v2/infras"}, 404, ""},
		{"no such asset", req{method: "GET", path: "/ui/secret.go"}, 404, ""},
		{"wrong method", req{method: "POST", path: "/api/v1/infras/t1"}, 405, ""},
		{"read from afar without a token", req{method: "GET", path: "/api/v1/infras", remote: "192.0.2.7:5000"}, 401, ""},
		{"read from afar with a token", req{method: "GET", path: "/api/v1/infras", remote: "192.0.2.7:5000", token: testToken}, 200, ""},
		{"read nearby", req{method: "GET", path: "/api/v1/infras"}, 200, ""},
		{"bad window", req{method: "GET", path: "/api/v1/infras/t1/stats?window=forever"}, 400, "window"},
		{"events", req{method: "GET", path: "/api/v1/events"}, 200, ""},
		{"bad events limit", req{method: "GET", path: "/api/v1/events?limit=0"}, 400, "limit"},
	}
	// An applied t1 for the reads that need one.
	if w, _ := s.do(t, put(smallSpec, yaml, testToken)); w.Code != 200 {
		t.Fatalf("apply: %d %s", w.Code, w.Body)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, eb := s.do(t, tt.req)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if eb.Field != tt.field {
				t.Errorf("field %q, want %q (%s)", eb.Field, tt.field, eb.Error)
			}
			if tt.field != "" && tt.field != "dryRun" && tt.req.method == "PUT" && eb.Line == 0 {
				t.Errorf("no line in %+v", eb)
			}
			if tt.want == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

// The API takes every spec the spec loader takes: one of thousands of
// networks, above 1 MiB, is applied; past the loader's limit the answer is
// 413 and names the limit, whether the client announced the body's length
// or streamed it.
func TestLargeSpecs(t *testing.T) {
	s, be := newTestServer(t, nil)
	large := manyNetworks(7000)
	t.Logf("a spec of %d bytes", len(large))
	if len(large) <= 1<<20 || len(large) >= spec.MaxSpecBytes {
		t.Fatalf("the spec is %d bytes, want between 1 MiB and %d", len(large), spec.MaxSpecBytes)
	}
	w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/big", body: large, ctype: "application/yaml", token: testToken})
	if w.Code != http.StatusOK {
		t.Fatalf("a spec of %d bytes: %d %.500s", len(large), w.Code, w.Body)
	}
	if rec, err := be.Get(context.Background(), "big"); err != nil || len(rec.Spec) != len(large) {
		t.Fatalf("stored %v, %v", rec, err)
	}

	// Exactly at the limit is still a spec.
	exact := large + padding(spec.MaxSpecBytes-len(large))
	if len(exact) != spec.MaxSpecBytes {
		t.Fatalf("padded to %d bytes, want %d", len(exact), spec.MaxSpecBytes)
	}
	w, _ = s.do(t, req{method: "PUT", path: "/api/v1/infras/big", body: exact, ctype: "application/yaml", token: testToken})
	if w.Code != http.StatusOK {
		t.Fatalf("a spec of %d bytes: %d %.500s", len(exact), w.Code, w.Body)
	}

	tooLarge := exact + "\n"
	for _, announced := range []bool{true, false} {
		r := httptest.NewRequest("PUT", "http://127.0.0.1:8470/api/v1/infras/big", strings.NewReader(tooLarge))
		if !announced {
			r.ContentLength = -1 // as a chunked body arrives
		}
		r.RemoteAddr = "127.0.0.1:40000"
		r.Header.Set("Content-Type", "application/yaml")
		r.Header.Set("Authorization", "Bearer "+testToken)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		var eb ErrorBody
		if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil {
			t.Fatalf("length announced %v: %d %q: %v", announced, w.Code, w.Body, err)
		}
		want := fmt.Sprintf("larger than 4MiB (%d bytes)", spec.MaxSpecBytes)
		if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(eb.Error, want) {
			t.Errorf("length announced %v: %d %q, want 413 saying %q", announced, w.Code, eb.Error, want)
		}
	}
}

// While every turn to decode a spec is taken, a PUT waits, and a client
// that gives up meanwhile is answered 503 without its spec decoded; a turn
// given back lets the next PUT through.
func TestSpecDecodesWaitTheirTurn(t *testing.T) {
	s, _ := newTestServer(t, nil)
	if !s.budgets.decoding.TryAcquire(decodeBudget * s.cfg.MaxBody) {
		t.Fatal("the decoding budget is taken")
	}
	put := func(ctx context.Context) *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(ctx, "PUT", "http://127.0.0.1:8470/api/v1/infras/t1", strings.NewReader(smallSpec))
		r.RemoteAddr = "127.0.0.1:40000"
		r.Header.Set("Content-Type", "application/yaml")
		r.Header.Set("Authorization", "Bearer "+testToken)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if w := put(ctx); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("with every turn taken: %d %s, want 503", w.Code, w.Body)
	}
	s.budgets.decoding.Release(decodeBudget * s.cfg.MaxBody)
	if w := put(context.Background()); w.Code != http.StatusOK {
		t.Fatalf("with a turn free: %d %s", w.Code, w.Body)
	}
}

// padding is n bytes of YAML comments.
func padding(n int) string {
	line := "#" + strings.Repeat("-", 98) + "\n"
	pad := strings.Repeat(line, n/len(line))
	switch rest := n % len(line); {
	case rest == 1:
		pad += "\n"
	case rest > 1:
		pad += "#" + strings.Repeat("-", rest-2) + "\n"
	}
	return pad
}

// manyNetworks is a valid spec of n networks, each with a VM on either of
// two hosts: the shape of a cluster's large spec.
func manyNetworks(n int) string {
	var b strings.Builder
	b.WriteString("name: big\nhosts:\n  - {name: hv1, underlay: 192.0.2.11}\n  - {name: hv2, underlay: 192.0.2.12}\nnetworks:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: net%d, vni: %d, subnet: 10.%d.%d.0/24}\n", i, 10000+i, i/256, i%256)
	}
	b.WriteString("vms:\n")
	for i := range n {
		for h := 1; h <= 2; h++ {
			fmt.Fprintf(&b, "  - {name: vm%d-%d, host: hv%d, nics: [{network: net%d, ip: 10.%d.%d.%d/24}]}\n", i, h, h, i, i/256, i%256, 10+h)
		}
	}
	return b.String()
}

func TestAuthReads(t *testing.T) {
	s, _ := newTestServer(t, func(c *Config) { c.AuthReads = true })
	if w, _ := s.do(t, req{method: "GET", path: "/api/v1/infras"}); w.Code != 401 {
		t.Errorf("read without a token under --auth-reads: %d", w.Code)
	}
	if w, _ := s.do(t, req{method: "GET", path: "/api/v1/infras", token: testToken}); w.Code != 200 {
		t.Errorf("read with a token: %d", w.Code)
	}
}

func TestNoTokenFileTakesNoChanges(t *testing.T) {
	s, _ := newTestServer(t, func(c *Config) { c.TokenFile = "" })
	w, eb := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken})
	if w.Code != 401 || !strings.Contains(eb.Error, "without a token file") {
		t.Errorf("%d %+v", w.Code, eb)
	}
}

func TestApplyDryRunDestroyAndEvents(t *testing.T) {
	var log bytes.Buffer
	s, be := newTestServer(t, func(c *Config) { c.Log = &log })
	w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1?dryRun=true", body: smallSpec, ctype: "application/yaml", token: testToken})
	var res ApplyResult
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || w.Code != 200 {
		t.Fatalf("dry run: %d %s", w.Code, w.Body)
	}
	if !res.DryRun || res.Changes != 1 || res.Executed != 0 || res.Plan[0].Op != "create" || res.Plan[0].Kind != "netns" {
		t.Errorf("dry run: %+v", res)
	}
	if _, err := be.Get(context.Background(), "t1"); err == nil {
		t.Error("a dry run applied")
	}
	// JSON is a spec too.
	body, _ := json.Marshal(map[string]any{"name": "t1", "hosts": []any{map[string]any{"name": "h1"}}})
	w, _ = s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: string(body), ctype: "application/json; charset=utf-8", token: testToken})
	if w.Code != 200 {
		t.Fatalf("apply JSON: %d %s", w.Code, w.Body)
	}
	w, _ = s.do(t, req{method: "GET", path: "/api/v1/infras/t1"})
	var inf Infra
	if err := json.Unmarshal(w.Body.Bytes(), &inf); err != nil || inf.Name != "t1" || inf.Spec != string(body) || inf.SpecFile != "api:t1" {
		t.Errorf("get: %s", w.Body)
	}
	w, _ = s.do(t, req{method: "DELETE", path: "/api/v1/infras/t1", token: testToken})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"removed": 1`) {
		t.Errorf("destroy: %d %s", w.Code, w.Body)
	}
	w, _ = s.do(t, req{method: "GET", path: "/api/v1/events"})
	var evs []Event
	if err := json.Unmarshal(w.Body.Bytes(), &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Action != "destroy" || evs[1].Action != "apply" || evs[0].Who != "alice" || !evs[1].OK || evs[1].Changes != 1 {
		t.Errorf("events: %+v", evs)
	}
	if !strings.Contains(log.String(), "PUT /api/v1/infras/t1 by alice from 127.0.0.1:40000: 200") ||
		!strings.Contains(log.String(), "DELETE /api/v1/infras/t1 by alice") {
		t.Errorf("log lacks who changed what:\n%s", log.String())
	}
}

// TestOpenAPIMatchesRoutes: every route is in the document with its method
// and every operation of the document is a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	s, _ := newTestServer(t, nil)
	var routes, documented []string
	for _, rt := range s.routes {
		routes = append(routes, rt.Method+" "+rt.Path)
		var op struct {
			Security   []any          `json:"security"`
			Parameters []openAPIParam `json:"parameters"`
		}
		if raw, ok := doc.Paths[rt.Path][strings.ToLower(rt.Method)]; ok {
			_ = json.Unmarshal(raw, &op)
			if rt.Mutates != (len(op.Security) > 0) {
				t.Errorf("%s %s: needs a token %v, the document says %v", rt.Method, rt.Path, rt.Mutates, len(op.Security) > 0)
			}
			checkQueryDocumented(t, rt, op.Parameters)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(routes)
	sort.Strings(documented)
	if !slices.Equal(routes, documented) {
		t.Errorf("routes and openapi.json differ:\nroutes:     %v\ndocumented: %v", routes, documented)
	}
	w, _ := s.do(t, req{method: "GET", path: "/openapi.json"})
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), OpenAPI()) {
		t.Errorf("GET /openapi.json: %d", w.Code)
	}
}

// openAPIParam is a parameter as openapi.json describes it.
type openAPIParam struct {
	Name   string `json:"name"`
	In     string `json:"in"`
	Schema struct {
		Type    string `json:"type"`
		Default any    `json:"default"`
		Minimum *int64 `json:"minimum"`
		Maximum *int64 `json:"maximum"`
	} `json:"schema"`
}

// checkQueryDocumented holds an operation's documented query parameters to
// the route's: the same names, types, defaults and bounds.
func checkQueryDocumented(t *testing.T, rt route, documented []openAPIParam) {
	t.Helper()
	docs := map[string]openAPIParam{}
	for _, p := range documented {
		if p.In == "query" {
			docs[p.Name] = p
		}
	}
	for _, p := range rt.Query {
		d, ok := docs[p.Name]
		delete(docs, p.Name)
		where := rt.Method + " " + rt.Path + " ?" + p.Name
		switch {
		case !ok:
			t.Errorf("%s: not in openapi.json", where)
			continue
		case d.Schema.Type != p.Kind.openAPIType():
			t.Errorf("%s: type %q in openapi.json, want %q", where, d.Schema.Type, p.Kind.openAPIType())
		}
		switch p.Kind {
		case intParam:
			var def any = float64(p.Default)
			if p.Optional {
				def = nil // left out, the handler chooses: no default to document
			}
			if d.Schema.Minimum == nil || *d.Schema.Minimum != p.Min || d.Schema.Maximum == nil || *d.Schema.Maximum != p.Max || d.Schema.Default != def {
				t.Errorf("%s: openapi.json says %v..%v default %v, the route %d..%d default %d", where, ptrText(d.Schema.Minimum), ptrText(d.Schema.Maximum), d.Schema.Default, p.Min, p.Max, p.Default)
			}
		case durationParam:
			def, _ := d.Schema.Default.(string)
			if got, err := time.ParseDuration(def); err != nil || got != time.Duration(p.Default) {
				t.Errorf("%s: default %q in openapi.json, the route's is %s", where, def, time.Duration(p.Default))
			}
		case boolParam:
			if d.Schema.Default != (p.Default != 0) {
				t.Errorf("%s: default %v in openapi.json", where, d.Schema.Default)
			}
		}
	}
	for name := range docs {
		t.Errorf("%s %s: openapi.json lists ?%s, which the route does not take", rt.Method, rt.Path, name)
	}
}

func ptrText(p *int64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatInt(*p, 10)
}

// TestSeriesPoints: a series thinned to a few points has that many steps at
// most, ending where the whole series ends, and says how far back the
// server keeps; a number of points out of bounds is refused by name.
func TestSeriesPoints(t *testing.T) {
	s, _ := newTestServer(t, func(c *Config) { c.History = time.Hour })
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	for range 12 {
		s.Sampler().SampleOnce()
		time.Sleep(5 * time.Millisecond)
	}
	var all, thin struct {
		Time    []float64 `json:"time"`
		History float64   `json:"history_seconds"`
	}
	getJSON(t, s, "/api/v1/infras/t1/series?window=1m", &all)
	getJSON(t, s, "/api/v1/infras/t1/series?window=1m&points=3", &thin)
	if len(all.Time) != 11 || len(thin.Time) < 2 || len(thin.Time) > 3 || thin.Time[len(thin.Time)-1] != all.Time[len(all.Time)-1] || all.History != 3600 {
		t.Errorf("series: %d steps, history %v s; thinned to 3: %d steps ending at %v (all end at %v)", len(all.Time), all.History, len(thin.Time), thin.Time, all.Time)
	}
	for _, q := range []string{"points=-1", "points=10001", "points=x"} {
		if w, eb := s.do(t, req{method: "GET", path: "/api/v1/infras/t1/series?" + q}); w.Code != 400 || eb.Field != "points" {
			t.Errorf("%s: %d %s", q, w.Code, w.Body)
		}
	}
}

func TestStatsAndSeriesFromSamples(t *testing.T) {
	s, _ := newTestServer(t, nil)
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: "application/yaml", token: testToken}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	if w, _ := s.do(t, req{method: "GET", path: "/api/v1/infras/t1/stats"}); w.Code != 503 {
		t.Errorf("stats before any sample: %d", w.Code)
	}
	for range 3 {
		s.Sampler().SampleOnce()
		time.Sleep(20 * time.Millisecond)
	}
	w, _ := s.do(t, req{method: "GET", path: "/api/v1/infras/t1/stats?window=1m"})
	var st StatsResult
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || w.Code != 200 {
		t.Fatalf("stats: %d %s", w.Code, w.Body)
	}
	if st.Samples != 3 || len(st.Ports) != 2 || len(st.Pools) == 0 || st.Ports[0].Tx <= 0 || st.Ports[0].Rx >= st.Ports[0].Tx {
		t.Errorf("stats: %s", w.Body)
	}
	w, _ = s.do(t, req{method: "GET", path: "/api/v1/infras/t1/series"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"tx_bps"`) {
		t.Errorf("series: %d %s", w.Code, w.Body)
	}
}

// TestConcurrentRequests fires 200 requests at once, reads and changes
// mixed, at a real listener; every one gets an answer and the server
// still answers after.
func TestConcurrentRequests(t *testing.T) {
	s, _ := newTestServer(t, nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	c, err := NewClient(srv.URL, testToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			switch i % 5 {
			case 0:
				_, err = c.Apply(ctx, "t1", "", []byte(smallSpec), i%2 == 0)
			case 1:
				_, err = c.List(ctx)
			case 2:
				_, err = c.Status(ctx, "t1")
				if errors.Is(err, service.ErrNotFound) {
					err = nil
				}
			case 3:
				var resp *http.Response
				resp, err = http.Get(srv.URL + "/metrics")
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			case 4:
				_, err = c.Destroy(ctx, "t1")
				if errors.Is(err, service.ErrNotFound) {
					err = nil
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after 200 requests: %v", err)
	}
	resp.Body.Close()
}

func TestClientErrors(t *testing.T) {
	s, _ := newTestServer(t, nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	c, _ := NewClient(srv.URL, testToken)
	_, err := c.Apply(context.Background(), "t1", "f.yaml", []byte("name: t1\nhosts: 3\n"), false)
	var ae *Error
	if !errors.As(err, &ae) || ae.Body.Field != "hosts" || ae.Body.Line != 2 || !errors.Is(err, spec.ErrInvalid) {
		t.Errorf("bad spec: %v %+v", err, ae)
	}
	if _, err := c.Status(context.Background(), "nope"); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("unknown infra: %v", err)
	}
	anon, _ := NewClient(srv.URL, "")
	if _, err := anon.Destroy(context.Background(), "t1"); !errors.As(err, &ae) || ae.Status != 401 {
		t.Errorf("destroy without a token: %v", err)
	}
	if _, err := NewClient("ftp://x", ""); err == nil {
		t.Error("ftp URL accepted")
	}
}

func TestDashboardAssets(t *testing.T) {
	s, _ := newTestServer(t, nil)
	for path, ctype := range map[string]string{"/": "text/html", "/ui/app.js": "text/javascript", "/ui/uPlot.iife.min.js": "text/javascript",
		"/ui/uPlot.min.css": "text/css", "/ui/LICENSE.uPlot": "text/plain"} {
		w, _ := s.do(t, req{method: "GET", path: path})
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), ctype) {
			t.Errorf("%s: %d %s", path, w.Code, w.Header().Get("Content-Type"))
		}
	}
}

// The dashboard's address takes each time range its page offers, and the
// page offers each the route takes, the default selected.
func TestDashboardRanges(t *testing.T) {
	page, err := fs.ReadFile(web.FS, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	var offered []string
	selected := ""
	for _, m := range regexp.MustCompile(`<option value="([^"]+)"( selected)?>`).FindAllStringSubmatch(string(page), -1) {
		offered = append(offered, m[1])
		if m[2] != "" {
			selected = m[1]
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(offered)), slices.Sorted(slices.Values(dashboardRanges))) || selected != dashboardRanges[0] {
		t.Errorf("the page offers %v (%s selected), the route takes %v (%s the default)", offered, selected, dashboardRanges, dashboardRanges[0])
	}
	s, _ := newTestServer(t, nil)
	for path, code := range map[string]int{"/?infra=t1&range=15m&vm=vm1": 200, "/?range=2h": 400, "/?vm=Not_A_VM": 400, "/?infra=t1&gen=3": 200, "/?gen=0": 400, "/?gen=two": 400} {
		if w, _ := s.do(t, req{method: "GET", path: path}); w.Code != code {
			t.Errorf("GET %s: %d, want %d", path, w.Code, code)
		}
	}
}

func TestTokenFiles(t *testing.T) {
	for _, bad := range []string{"", "# only a comment\n", "short\n", "a:short\n"} {
		if _, err := ParseTokens([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	tok, err := ParseTokens([]byte("0123456789abcdef\nbob:fedcba9876543210\n"))
	if err != nil || !slices.Equal(tok.names, []string{"token1", "bob"}) {
		t.Errorf("%v %v", tok, err)
	}
	path := filepath.Join(t.TempDir(), "sub", "api.token")
	if made, err := EnsureTokenFile(path); !made || err != nil {
		t.Fatal(made, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", fi.Mode())
	}
	first, err := FirstToken(path)
	if err != nil || len(first) < minTokenLen {
		t.Errorf("%q %v", first, err)
	}
	if made, _ := EnsureTokenFile(path); made {
		t.Error("made the token file twice")
	}
	if again, _ := FirstToken(path); again != first {
		t.Error("the token changed")
	}
}

// A diff of specs reads no kernel, so it waits for no turn to: with every
// turn taken it is answered at once, and only a diff with a plan waits
// (and, its client gone, is told the server is busy).
func TestDiffWaitsForTheKernelOnlyForAPlan(t *testing.T) {
	s, _ := newTestServer(t, nil)
	for range cap(s.kernel) {
		s.kernel <- struct{}{}
	}
	defer func() {
		for range cap(s.kernel) {
			<-s.kernel
		}
	}()
	diff := func(query string) int {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		w, _ := s.doWith(t, req{method: "POST", path: "/api/v1/infras/t1/diff" + query}, func(r *http.Request) { *r = *r.WithContext(ctx) })
		return w.Code
	}
	start := time.Now()
	if code := diff(""); code == http.StatusServiceUnavailable || time.Since(start) > time.Second {
		t.Errorf("a diff of specs with the kernel's turns taken: %d after %s, want an answer at once", code, time.Since(start))
	}
	if code := diff("?plan=true"); code != http.StatusServiceUnavailable {
		t.Errorf("a diff with a plan with the kernel's turns taken: %d, want %d", code, http.StatusServiceUnavailable)
	}
}
