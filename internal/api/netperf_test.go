package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const sixVMs = `name: t6
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {esx1: vmnic0}}]
    portgroups: [{name: pg-vm}, {name: pg-lonely}]
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg-vm, ip: 10.0.0.1/24}]}
  - {name: vm2, host: esx1, nics: [{portgroup: pg-vm, ip: 10.0.0.2/24}]}
  - {name: vm3, host: esx1, nics: [{portgroup: pg-vm, ip: 10.0.0.3/24}]}
  - {name: vm4, host: esx1, nics: [{portgroup: pg-vm, ip: 10.0.0.4/24}]}
  - {name: vm5, host: esx1, nics: [{portgroup: pg-vm, ip: 10.0.0.5/24}]}
  - {name: vm6, host: esx1, nics: [{portgroup: pg-vm, ip: 10.0.0.6/24}, {portgroup: pg-lonely, ip: 10.9.0.6/24}, {portgroup: pg-vm}]}
`

func TestNetperfRuns(t *testing.T) {
	s, be := newTestServer(t, nil)
	be.gate = make(chan struct{})
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/t6", body: sixVMs, ctype: "application/yaml", token: testToken}); w.Code != 200 {
		t.Fatalf("apply: %d %s", w.Code, w.Body)
	}
	start := func(body string) (int, NetperfRun, ErrorBody) {
		w, eb := s.do(t, req{method: "POST", path: "/api/v1/infras/t6/netperf", body: body, ctype: "application/json", token: testToken})
		var run NetperfRun
		if w.Code == 202 {
			if err := json.Unmarshal(w.Body.Bytes(), &run); err != nil {
				t.Fatal(err)
			}
			if w.Header().Get("Location") != "/api/v1/netperf/"+run.ID {
				t.Errorf("Location %q for run %s", w.Header().Get("Location"), run.ID)
			}
		}
		return w.Code, run, eb
	}
	bad := []struct {
		body, field string
		code        int
	}{
		{`{"to": "vm9"}`, "to", 400},
		{`{"to": "vm1", "test": "SCTP_STREAM"}`, "test", 400},
		{`{"to": "vm1", "length": 61}`, "length", 400},
		{`{"to": "vm1", "length": 0.5}`, "length", 400},
		{`{"to": "vm1", "length": "5"}`, "length", 400},
		{`{"to": "vm1", "vnic": "eth3"}`, "vnic", 400},
		{`{"to": "vm6", "vnic": "eth2"}`, "vnic", 400},
		{`{"to": "vm6", "vnic": "eth1"}`, "from", 400}, // nobody else on pg-lonely
		{`{"to": "vm1", "from": "vm1"}`, "from", 400},
		{`{"to": "vm1", "from": "nobody"}`, "from", 400},
		{`{"to": "vm1", "options": {"send_size": "lots"}}`, "options.send_size", 400},
		{`{"to": "vm1", "options": {"request_size": 10}}`, "options.request_size", 400},
		{`{"to": "vm1", "options": {"instances": 9}}`, "options.instances", 400},
		{`{"to": "vm1", "rm": "-rf"}`, "", 400},
		{`{"to": "vm1"} {"to": "vm2"}`, "", 400},
		{`not json`, "", 400},
	}
	for _, tc := range bad {
		code, _, eb := start(tc.body)
		if code != tc.code || eb.Field != tc.field {
			t.Errorf("%s: %d field %q (%s), want %d field %q", tc.body, code, eb.Field, eb.Error, tc.code, tc.field)
		}
	}
	if w, _ := s.do(t, req{method: "POST", path: "/api/v1/infras/t6/netperf", body: `{"to": "vm1"}`, ctype: "application/json"}); w.Code != 401 {
		t.Errorf("without a token: %d", w.Code)
	}
	if w, _ := s.do(t, req{method: "POST", path: "/api/v1/infras/nope/netperf", body: `{"to": "vm1"}`, ctype: "application/json", token: testToken}); w.Code != 404 {
		t.Errorf("unknown infra: %d", w.Code)
	}

	code, first, _ := start(`{"to": "vm2", "length": 2, "options": {"send_size": "64K"}}`)
	if code != 202 || first.State != "running" || first.From != "vm1" || first.Address != "10.0.0.2" || first.Test != "TCP_STREAM" {
		t.Fatalf("start: %d %+v", code, first)
	}
	if !strings.Contains(strings.Join(first.Args, " "), "-H 10.0.0.2 -t TCP_STREAM -l 2 -P 0 --json -- -m 64K") {
		t.Errorf("args %v", first.Args)
	}
	if code, _, eb := start(`{"to": "vm1", "from": "vm3"}`); code != 409 {
		t.Errorf("a run on a VM already measured: %d %s, want 409", code, eb.Error)
	}
	if code, _, _ := start(`{"to": "vm3", "from": "vm4", "test": "TCP_RR", "options": {"request_size": 1, "response_size": 1}}`); code != 202 {
		t.Errorf("a second run: %d", code)
	}
	w, eb := s.do(t, req{method: "POST", path: "/api/v1/infras/t6/netperf", body: `{"to": "vm5", "from": "vm6"}`, ctype: "application/json", token: testToken})
	if w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Errorf("a third run at once: %d %s (Retry-After %q), want 429 with Retry-After", w.Code, eb.Error, w.Header().Get("Retry-After"))
	}
	w, _ = s.do(t, req{method: "GET", path: "/api/v1/netperf/" + first.ID})
	var run NetperfRun
	if json.Unmarshal(w.Body.Bytes(), &run); w.Code != 200 || run.State != "running" || run.Result != nil {
		t.Errorf("a running run: %d %s", w.Code, w.Body)
	}
	close(be.gate)
	deadline := time.Now().Add(5 * time.Second)
	for run.State == "running" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		w, _ = s.do(t, req{method: "GET", path: "/api/v1/netperf/" + first.ID})
		run = NetperfRun{}
		_ = json.Unmarshal(w.Body.Bytes(), &run)
	}
	if run.State != "done" || run.Result == nil || run.Result.Throughput <= 0 || run.Finished == nil {
		t.Errorf("finished run: %s", w.Body)
	}
	w, _ = s.do(t, req{method: "GET", path: "/api/v1/netperf?infra=t6"})
	var runs []NetperfRun
	if json.Unmarshal(w.Body.Bytes(), &runs); len(runs) != 2 || runs[1].ID != first.ID {
		t.Errorf("list: %s", w.Body)
	}
	for path, want := range map[string]int{"/api/v1/netperf/99": 404, "/api/v1/netperf/x1": 400, "/api/v1/netperf?infra=BAD": 400} {
		if w, _ := s.do(t, req{method: "GET", path: path}); w.Code != want {
			t.Errorf("GET %s: %d, want %d", path, w.Code, want)
		}
	}
	// The run is an event too, once it ends.
	deadline = time.Now().Add(5 * time.Second)
	for {
		evs, _ := be.Events(context.Background(), "t6", 10)
		if len(evs) > 0 && evs[0].Action == "netperf" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no netperf event: %+v", evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
