package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// TestVMStatusCodes: the one-VM resource refuses as a PUT of the whole
// spec does, with the entry's own field paths and the body's lines.
func TestVMStatusCodes(t *testing.T) {
	s, _ := newTestServer(t, nil)
	yaml := "application/yaml"
	vm := "/api/v1/infras/t1/vms/"
	put := func(name, body, ctype, token string) req {
		return req{method: "PUT", path: vm + name, body: body, ctype: ctype, token: token}
	}
	entry := "host: esx1\nnics: [{portgroup: pg-vm, ip: 10.0.0.3/24}]\n"
	tests := []struct {
		name  string
		req   req
		want  int
		field string
		line  int
	}{
		{"put", put("vm3", entry, yaml, testToken), 200, "", 0},
		{"put as JSON", put("vm4", `{"host": "esx1", "nics": [{"portgroup": "pg-vm"}]}`, "application/json", testToken), 200, "", 0},
		{"put without a token", put("vm3", entry, yaml, ""), 401, "", 0},
		{"delete without a token", req{method: "DELETE", path: vm + "vm1"}, 401, "", 0},
		{"dry run without a token", req{method: "PUT", path: vm + "vm3?dryRun=true", body: entry, ctype: yaml}, 401, "", 0},
		{"no content type", put("vm3", entry, "", testToken), 415, "", 0},
		{"empty body", put("vm3", "", yaml, testToken), 400, "", 0},
		{"not JSON", put("vm3", "{host: esx1", "application/json", testToken), 400, "", 1},
		{"unknown field, at the body's line", put("vm3", "host: esx1\nnics:\n  - {portgroup: pg-vm, ipp: 10.0.0.3/24}\n", yaml, testToken), 400, "nics[0].ipp", 3},
		{"wrong type", put("vm3", "host: esx1\ncpus: lots\nnics: [{portgroup: pg-vm}]\n", yaml, testToken), 400, "cpus", 2},
		{"a zero for a default", put("vm3", "host: esx1\ncpus: 0\nnics: [{portgroup: pg-vm}]\n", yaml, testToken), 400, "cpus", 2},
		{"the entry names another VM", put("vm3", "name: vm9\n"+entry, yaml, testToken), 400, "name", 1},
		{"a second document", put("vm3", entry+"---\nhost: esx1\n", yaml, testToken), 400, "", 3},
		{"body too large", put("vm3", strings.Repeat("#", spec.MaxSpecBytes+1), yaml, testToken), 413, "", 0},
		{"bad VM name", put("VM3", entry, yaml, testToken), 400, "vm", 0},
		{"bad dryRun", req{method: "PUT", path: vm + "vm3?dryRun=maybe", body: entry, ctype: yaml, token: testToken}, 400, "dryRun", 0},
		{"put into an unknown infra", req{method: "PUT", path: "/api/v1/infras/nope/vms/vm3", body: entry, ctype: yaml, token: testToken}, 404, "", 0},
		{"delete an unknown VM", req{method: "DELETE", path: vm + "vm9", token: testToken}, 404, "", 0},
		{"get an unknown VM", req{method: "GET", path: vm + "vm9"}, 404, "", 0},
		{"get", req{method: "GET", path: vm + "vm1"}, 200, "", 0},
		{"delete", req{method: "DELETE", path: vm + "vm2", token: testToken}, 200, "", 0},
		{"wrong method", req{method: "POST", path: vm + "vm1"}, 405, "", 0},
	}
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: yaml, token: testToken}); w.Code != 200 {
		t.Fatalf("apply: %d %s", w.Code, w.Body)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, eb := s.do(t, tt.req)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if eb.Field != tt.field || eb.Line != tt.line {
				t.Errorf("field %q line %d, want %q line %d (%s)", eb.Field, eb.Line, tt.field, tt.line, eb.Error)
			}
		})
	}
}

// TestVMOverHTTP takes a VM's entry with GET and gives it back with PUT,
// changed, through net/http over a connection: the entry GET answers is
// one PUT takes, in YAML and in JSON.
func TestVMOverHTTP(t *testing.T) {
	s, be := newTestServer(t, nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	call := func(method, path, ctype, accept, body string) (int, string) {
		t.Helper()
		r, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+testToken)
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call("PUT", "/api/v1/infras/t1", "application/yaml", "", smallSpec); code != 200 {
		t.Fatalf("apply: %d %s", code, body)
	}
	code, entry := call("GET", "/api/v1/infras/t1/vms/vm1", "", "application/yaml", "")
	if code != 200 || !strings.Contains(entry, `"10.0.0.1/24"`) {
		t.Fatalf("get: %d %s", code, entry)
	}
	changed := strings.Replace(entry, "10.0.0.1/24", "10.0.0.11/24", 1)
	if code, body := call("PUT", "/api/v1/infras/t1/vms/vm1", "application/yaml", "", changed); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	code, asJSON := call("GET", "/api/v1/infras/t1/vms/vm1", "", "", "")
	var fields map[string]any
	if err := json.Unmarshal([]byte(asJSON), &fields); code != 200 || err != nil || fields["name"] != "vm1" {
		t.Fatalf("get as JSON: %d %v %s", code, err, asJSON)
	}
	moved := strings.Replace(asJSON, "10.0.0.11/24", "10.0.0.12/24", 1)
	if code, body := call("PUT", "/api/v1/infras/t1/vms/vm1", "application/json", "", moved); code != 200 {
		t.Fatalf("put JSON: %d %s", code, body)
	}
	doc, err := be.Spec(t.Context(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	if vm, _ := doc.Spec.VM("vm1"); vm.NICs[0].IP != "10.0.0.12/24" || len(doc.Spec.VMs) != 2 || doc.Spec.VMs[0].Name != "vm1" {
		t.Errorf("spec in force after the edits: %+v", doc.Spec.VMs)
	}
	if code, body := call("DELETE", "/api/v1/infras/t1/vms/vm1", "", "", ""); code != 200 {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, body := call("DELETE", "/api/v1/infras/t1/vms/vm1", "", "", ""); code != 404 {
		t.Fatalf("delete again: %d %s", code, body)
	}
}
