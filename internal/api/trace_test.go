package api

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// A server that traces changes writes each change's laps in the handler,
// in their order, and nothing of a read.
func TestTraceLaps(t *testing.T) {
	var trace bytes.Buffer
	s, _ := newTestServer(t, func(c *Config) { c.Trace = &trace })
	yaml := "application/yaml"
	entry := "host: esx1\nnics: [{portgroup: pg-vm, ip: 10.0.0.3/24}]\n"
	lap := regexp.MustCompile(`^ +[0-9]+\.[0-9] ms  api: `)
	tests := []struct {
		name string
		req  req
		want []string
	}{
		{"put a spec", req{method: "PUT", path: "/api/v1/infras/t1", body: smallSpec, ctype: yaml, token: testToken},
			[]string{"body read and decoded", "before the service", "the service", "the answer encoded", "answered"}},
		{"put a VM", req{method: "PUT", path: "/api/v1/infras/t1/vms/vm3", body: entry, ctype: yaml, token: testToken},
			[]string{"body read and decoded", "before the service", "the service", "the answer encoded", "answered"}},
		{"delete a VM", req{method: "DELETE", path: "/api/v1/infras/t1/vms/vm3", token: testToken},
			[]string{"before the service", "the service", "the answer encoded", "answered"}},
		{"a refused change", req{method: "PUT", path: "/api/v1/infras/t1/vms/vm3", body: "", ctype: yaml, token: testToken},
			[]string{"answered"}},
		{"a read", req{method: "GET", path: "/api/v1/infras/t1/vms/vm1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trace.Reset()
			s.doWith(t, tt.req, nil)
			var got []string
			for _, line := range strings.Split(strings.TrimSuffix(trace.String(), "\n"), "\n") {
				if line == "" {
					continue
				}
				if !lap.MatchString(line) {
					t.Fatalf("line %q is not a lap", line)
				}
				_, label, _ := strings.Cut(line, "api: ")
				got = append(got, label)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("laps %q, want %q", got, tt.want)
			}
		})
	}
}
