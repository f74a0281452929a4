package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// A link and an unlink through the API reach the service's Link with the
// vNIC, the port group, whether it is connected and who asked; a body that
// does not name a vNIC, or that an unlink gives a port group, is refused
// and reaches nothing.
func TestLinkAndUnlinkThroughTheAPI(t *testing.T) {
	s, be := newTestServer(t, nil)
	for _, tt := range []struct {
		name string
		q    req
		code int
	}{
		{"no token", req{method: "POST", path: "/api/v1/link", body: `{"vm": "vm1", "nic": "eth0", "portgroup": "pg-b"}`}, 401},
		{"unknown field", req{method: "POST", path: "/api/v1/link", body: `{"vm": "vm1", "nic": "eth0", "switch": "sw0"}`, token: testToken}, 400},
		{"not JSON", req{method: "POST", path: "/api/v1/link", body: `vm: vm1`, token: testToken}, 400},
		{"no body", req{method: "POST", path: "/api/v1/link", token: testToken}, 400},
		{"two documents", req{method: "POST", path: "/api/v1/unlink", body: `{"vm": "vm1", "nic": "eth0"} {}`, token: testToken}, 400},
		{"no vm", req{method: "POST", path: "/api/v1/unlink", body: `{"nic": "eth0"}`, token: testToken}, 400},
		{"no nic", req{method: "POST", path: "/api/v1/unlink", body: `{"vm": "vm1"}`, token: testToken}, 400},
		{"link without a port group", req{method: "POST", path: "/api/v1/link", body: `{"vm": "vm1", "nic": "eth0"}`, token: testToken}, 400},
		{"unlink with a port group", req{method: "POST", path: "/api/v1/unlink", body: `{"vm": "vm1", "nic": "eth0", "portgroup": "pg-b"}`, token: testToken}, 400},
		{"bad infrastructure name", req{method: "POST", path: "/api/v1/unlink", body: `{"infra": "Bad/Name", "vm": "vm1", "nic": "eth0"}`, token: testToken}, 400},
		{"too large", req{method: "POST", path: "/api/v1/link", body: `{"vm": "` + strings.Repeat("a", 5000) + `"}`, token: testToken}, 413},
	} {
		if w, _ := s.do(t, tt.q); w.Code != tt.code {
			t.Errorf("%s: %d %s, want %d", tt.name, w.Code, w.Body, tt.code)
		}
	}
	if len(be.linked) != 0 {
		t.Fatalf("refused requests reached the service: %+v", be.linked)
	}

	w, _ := s.do(t, req{method: "POST", path: "/api/v1/link", body: `{"infra": "t1", "vm": "vm1", "nic": "eth0", "portgroup": "pg-b"}`,
		ctype: "application/json", token: testToken})
	var res LinkResult
	if err := json.Unmarshal(w.Body.Bytes(), &res); w.Code != 200 || err != nil || res.Infra != "t1" || res.Executed != 2 {
		t.Fatalf("link: %d %s", w.Code, w.Body)
	}
	w, _ = s.do(t, req{method: "POST", path: "/api/v1/unlink", body: `{"vm": "vm1", "nic": "eth1"}`, ctype: "application/json", token: testToken})
	if w.Code != 200 {
		t.Fatalf("unlink: %d %s", w.Code, w.Body)
	}
	if len(be.linked) != 2 {
		t.Fatalf("the service was asked %d times, want 2: %+v", len(be.linked), be.linked)
	}
	link, unlink := be.linked[0], be.linked[1]
	if link.Infra != "t1" || link.VM != "vm1" || link.NIC != "eth0" || link.PortGroup != "pg-b" || !link.Connected || link.By.Who != "alice" {
		t.Errorf("link reached the service as %+v", link)
	}
	if unlink.Infra != "" || unlink.NIC != "eth1" || unlink.PortGroup != "" || unlink.Connected || unlink.By.Who != "alice" {
		t.Errorf("unlink reached the service as %+v", unlink)
	}
}
