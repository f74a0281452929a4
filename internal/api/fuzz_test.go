package api

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/service"
)

// FuzzPutInfra sends arbitrary bodies, content types and paths through the
// whole handler: every answer is a known status with a JSON error, never a
// panic.
func FuzzPutInfra(f *testing.F) {
	f.Add("/api/v1/infras/t1", "application/yaml", smallSpec)
	f.Add("/api/v1/infras/t1?dryRun=true", "application/json", `{"name": "t1", "hosts": [{"name": "h1"}]}`)
	f.Add("/api/v1/infras/t1", "application/json", `{"name": "t1", "hosts": [{"name": `)
	f.Add("/api/v1/infras/%2e%2e", "text/yaml", "name: x\n")
	f.Add("/api/v1/infras/t1", "application/yaml; charset=\"", "a: &a [*a]")
	f.Add("/api/v1/infras/t1", "application/x-yaml", "name: t1\nvms:\n  - {name: v, host: nope, nics: [{portgroup: p}]}\n")
	s, _ := newTestServer(f, nil)
	allowed := map[int]bool{200: true, 400: true, 404: true, 405: true, 413: true, 415: true}
	f.Fuzz(func(t *testing.T, path, ctype, body string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t#") {
			return // not something a client can put in a request line
		}
		r := httptest.NewRequest("PUT", "http://127.0.0.1:8470/", strings.NewReader(body))
		u, err := r.URL.Parse(path)
		if err != nil {
			return
		}
		r.URL = u
		r.RemoteAddr = "127.0.0.1:1"
		r.Header.Set("Content-Type", ctype)
		r.Header.Set("Authorization", "Bearer "+testToken)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		if !allowed[w.Code] {
			t.Fatalf("PUT %q (%q): status %d: %s", path, ctype, w.Code, w.Body)
		}
		if w.Code != 200 {
			var eb ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error == "" {
				t.Fatalf("PUT %q: %d with body %q", path, w.Code, w.Body)
			}
		}
	})
}

// FuzzNetperfRequest checks arbitrary run requests against a spec: each is
// a run with arguments vnet netperf accepts, or a 400 naming what is
// wrong, never a panic.
func FuzzNetperfRequest(f *testing.F) {
	f.Add(`{"to": "vm2"}`)
	f.Add(`{"to": "vm6", "vnic": "eth1", "from": "esx1", "test": "UDP_RR", "length": 60, "options": {"request_size": 1, "response_size": 65507}}`)
	f.Add(`{"to": "vm1", "options": {"send_size": "16M", "instances": 4}}`)
	f.Add(`{"to": "vm1", "length": 1e309}`)
	doc, err := DecodeSpec("six.yaml", []byte(sixVMs), false, "t6")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req, err := DecodeNetperf([]byte(body))
		if err == nil {
			var run *NetperfRun
			if run, err = service.PlanNetperf(doc.Spec, req); err == nil {
				if run.Length < 1 || run.Length > service.MaxNetperfLength.Seconds() || run.Address == "" || run.From == run.To {
					t.Fatalf("%s: admitted %+v", body, run)
				}
				return
			}
		}
		if he := classify(err); he.status != 400 {
			t.Fatalf("%s: %d %v", body, he.status, err)
		}
	})
}
