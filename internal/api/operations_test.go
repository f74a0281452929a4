package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/service"
)

// The operations after an apply through the API, over etcd: each change
// keeps its entry naming the token and the client; a diff, a rollback, the
// applied spec, a snapshot and its restore answer as the service does,
// through the routes and through Remote, the CLI's way to a server.
func TestOperationsThroughAPI(t *testing.T) {
	s, _, _ := clusterServer(t)
	changed := strings.Replace(clusterSpec, "10.20.0.2/24", "10.20.0.3/24", 1)
	for _, spec := range []string{clusterSpec, changed} {
		if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/c1", body: spec, ctype: "application/yaml", token: testToken, remote: "192.0.2.77:5555"}); w.Code != 200 {
			t.Fatalf("apply: %d %s", w.Code, w.Body)
		}
	}
	var h service.HistoryResult
	getJSON(t, s, "/api/v1/infras/c1/history", &h)
	if len(h.Entries) != 2 || h.Current != 2 || h.Entries[1].Who != "alice" || h.Entries[1].Via != history.API ||
		h.Entries[1].Remote != "192.0.2.77:5555" || h.Entries[1].Summary != "~1 vNIC (ip)" {
		t.Fatalf("history: %+v", h)
	}
	if w, _ := s.do(t, req{method: "GET", path: "/api/v1/infras/c1/history/1", remote: "127.0.0.1:1"}); w.Code != 200 || !strings.Contains(w.Body.String(), `10.20.0.2/24`) {
		t.Errorf("generation 1: %d %s", w.Code, w.Body)
	}

	var d service.DiffResult
	if w, _ := s.do(t, req{method: "POST", path: "/api/v1/infras/c1/diff", body: clusterSpec, ctype: "application/yaml"}); w.Code != 200 ||
		json.Unmarshal(w.Body.Bytes(), &d) != nil || d.Equal() || d.Summary != "~1 vNIC (ip)" {
		t.Errorf("diff with a body: %d %s", w.Code, w.Body)
	}
	if w, _ := s.do(t, req{method: "POST", path: "/api/v1/infras/c1/diff?from=1&to=1"}); w.Code != 200 || !strings.Contains(w.Body.String(), `"changes": []`) {
		t.Errorf("diff of a generation with itself: %d %s", w.Code, w.Body)
	}

	if w, _ := s.do(t, req{method: "POST", path: "/api/v1/infras/c1/rollback"}); w.Code != 401 {
		t.Errorf("a rollback without a token: %d", w.Code)
	}
	var rb service.RollbackResult
	w, _ := s.do(t, req{method: "POST", path: "/api/v1/infras/c1/rollback", token: testToken})
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &rb) != nil || rb.To != 1 || rb.Stored.Generation != 3 {
		t.Fatalf("rollback: %d %s", w.Code, w.Body)
	}
	evs, _ := s.be.Events(context.Background(), "c1", 10)
	if len(evs) == 0 || evs[0].Action != "rollback" || evs[0].Who != "alice" {
		t.Errorf("the rollback's event: %+v", evs)
	}

	w, _ = s.do(t, req{method: "GET", path: "/api/v1/infras/c1/spec"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"macs"`) {
		t.Errorf("applied spec: %d %s", w.Code, w.Body)
	}
	w, _ = s.do(t, req{method: "GET", path: "/api/v1/infras/c1/describe/vm/vm2"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"host": "hv2"`) {
		t.Errorf("describe: %d %s", w.Code, w.Body)
	}
	for path, code := range map[string]int{
		"/api/v1/infras/c1/describe/switch/dvs0": 400,
		"/api/v1/infras/c1/describe/vm/nobody":   404,
		"/api/v1/infras/c1/history/0":            400,
		"/api/v1/infras/c1/history/9":            404,
		"/api/v1/infras/zz/history":              404,
	} {
		if w, _ := s.do(t, req{method: "GET", path: path}); w.Code != code {
			t.Errorf("GET %s: %d, want %d: %s", path, w.Code, code, w.Body)
		}
	}

	// Retention: open to read, a change needs a token, a bad one is 400.
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/history/retention", body: `{"max_entries": 2}`}); w.Code != 401 {
		t.Errorf("retention without a token: %d", w.Code)
	}
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/history/retention", body: `{"max_entries": -1}`, token: testToken}); w.Code != 400 {
		t.Errorf("a bad retention: %d %s", w.Code, w.Body)
	}
	if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/history/retention", body: `{"max_entries": 2, "max_age": "30d"}`, token: testToken}); w.Code != 200 {
		t.Errorf("retention: %d %s", w.Code, w.Body)
	}
	if w, _ := s.do(t, req{method: "GET", path: "/api/v1/history/retention"}); w.Body.String() != "{\n  \"max_entries\": 2,\n  \"max_age\": \"30d\"\n}\n" {
		t.Errorf("retention read back: %s", w.Body)
	}
	getJSON(t, s, "/api/v1/infras/c1/history", &h)
	if len(h.Entries) != 2 {
		t.Errorf("after retention 2: %d entries", len(h.Entries))
	}

	// Through Remote, as the CLI with --server.
	rem := remoteTo(t, s)
	ctx := context.Background()
	snap, err := rem.Snapshot(ctx, "c1")
	if err != nil || snap.Generation != 3 || len(snap.Allocations.MACs) != 2 {
		t.Fatalf("snapshot: %+v, %v", snap, err)
	}
	var he *Error
	if _, err := rem.Restore(ctx, snap, service.RestoreOptions{}); !errors.As(err, &he) || he.Status != 409 || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("restore where it exists: %v", err)
	}
	if _, err := rem.Destroy(ctx, "c1", service.DestroyOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := rem.Restore(ctx, snap, service.RestoreOptions{})
	if err != nil || res.Stored == nil || res.Stored.Generation != 1 {
		t.Fatalf("restore: %+v, %v", res, err)
	}
	if d, err := rem.Diff(ctx, "c1", service.DiffRequest{From: 1}); err != nil || !d.Equal() {
		t.Errorf("diff through Remote: %+v, %v", d, err)
	}
	file := filepath.Join(t.TempDir(), "c1.yaml")
	os.WriteFile(file, []byte(clusterSpec), 0o644)
	if _, err := rem.Diff(ctx, "c1", service.DiffRequest{From: 1, Source: &service.Source{File: file}}); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("a bad diff request through Remote: %v", err)
	}
	if _, err := rem.Rollback(ctx, "c1", service.RollbackOptions{Apply: service.ApplyOptions{Wait: 1}}); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("--wait through a server: %v", err)
	}
	hr, err := rem.History(ctx, "c1")
	if err != nil || hr.Entries[len(hr.Entries)-1].Verb != history.Restore {
		t.Errorf("history through Remote: %+v, %v", hr, err)
	}
	if w, _ := s.do(t, req{method: "POST", path: "/api/v1/restore", body: "format: something\n", ctype: "application/yaml", token: testToken}); w.Code != 400 {
		t.Errorf("a bad snapshot: %d %s", w.Code, w.Body)
	}
}

func getJSON(t *testing.T, s *Server, path string, v any) {
	t.Helper()
	w, _ := s.do(t, req{method: "GET", path: path})
	if w.Code != 200 {
		t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// A rollback that would take away a VM a runtime attached is a 409 naming
// it, for a dry run too, and changes nothing; through Remote it is
// ErrAttached (the CLI's exit status 2); dropAttached=true takes it out.
func TestRollbackOverAttachedThroughAPI(t *testing.T) {
	s, _, _ := clusterServer(t)
	withContainer := strings.Replace(strings.Replace(clusterSpec, "portgroups: [{name: pg-vm}]", "portgroups: [{name: pg-vm}, {name: pg-ctr}]", 1),
		"vms:\n", "vms:\n  - {name: c-one, host: hv1, nics: [{portgroup: pg-ctr, ip: 10.20.1.9/24, attach: {netns: ctr1, ifname: eth0, container: one, cni: web}}]}\n", 1)
	for _, spec := range []string{clusterSpec, withContainer} {
		if w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/c1", body: spec, ctype: "application/yaml", token: testToken}); w.Code != 200 {
			t.Fatalf("apply: %d %s", w.Code, w.Body)
		}
	}
	for _, path := range []string{"/api/v1/infras/c1/rollback?to=1", "/api/v1/infras/c1/rollback?to=1&dryRun=true"} {
		w, _ := s.do(t, req{method: "POST", path: path, token: testToken})
		var body ErrorBody
		if w.Code != 409 || json.Unmarshal(w.Body.Bytes(), &body) != nil || len(body.Attached) != 1 || body.Attached[0].VM != "c-one" ||
			body.Attached[0].NICs[0].Netns != "ctr1" || !strings.Contains(body.Error, "no port group pg-ctr") {
			t.Errorf("POST %s: %d %s", path, w.Code, w.Body)
		}
	}
	var h service.HistoryResult
	getJSON(t, s, "/api/v1/infras/c1/history", &h)
	if h.Current != 2 || len(h.Entries) != 2 {
		t.Errorf("the refused rollbacks changed the history: %+v", h)
	}
	rem := remoteTo(t, s)
	ctx := context.Background()
	if _, err := rem.Rollback(ctx, "c1", service.RollbackOptions{To: 1}); !errors.Is(err, service.ErrAttached) {
		t.Errorf("through Remote: %v", err)
	}
	rb, err := rem.Rollback(ctx, "c1", service.RollbackOptions{To: 1, DropAttached: true})
	if err != nil || rb.Attached == nil || !rb.Attached.Dropped || rb.Stored.Generation != 3 {
		t.Fatalf("with dropAttached: %+v, %v", rb, err)
	}
}

// remoteTo is a Remote, the CLI's way to a server, to s served on a port
// of the test's, with the test's token.
func remoteTo(t *testing.T, s *Server) *Remote {
	t.Helper()
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	c, err := NewClient(srv.URL, testToken)
	if err != nil {
		t.Fatal(err)
	}
	return &Remote{C: c}
}

// A PUT of an infrastructure keeps the VMs runtimes attached as they are;
// one whose spec lacks the port group such a VM is on is answered 409
// naming it, changing nothing, unless dropAttached=true; through Remote
// the refusal is ErrAttached.
func TestApplyOverAttachedThroughAPI(t *testing.T) {
	s, _, _ := clusterServer(t)
	userSpec := strings.Replace(clusterSpec, "portgroups: [{name: pg-vm}]", "portgroups: [{name: pg-vm}, {name: pg-ctr}]", 1)
	withContainer := strings.Replace(userSpec,
		"vms:\n", "vms:\n  - {name: c-one, host: hv1, nics: [{portgroup: pg-ctr, ip: 10.20.1.9/24, attach: {netns: ctr1, ifname: eth0, container: one, cni: web}}]}\n", 1)
	put := func(path, body string) (int, ApplyResult, ErrorBody) {
		t.Helper()
		w, _ := s.do(t, req{method: "PUT", path: path, body: body, ctype: "application/yaml", token: testToken})
		var res ApplyResult
		var eb ErrorBody
		if w.Code == 200 {
			json.Unmarshal(w.Body.Bytes(), &res)
		} else {
			json.Unmarshal(w.Body.Bytes(), &eb)
		}
		return w.Code, res, eb
	}
	if code, _, eb := put("/api/v1/infras/c1", withContainer); code != 200 {
		t.Fatalf("apply with the container: %d %+v", code, eb)
	}
	code, res, eb := put("/api/v1/infras/c1", userSpec)
	if code != 200 || res.Attached == nil || len(res.Attached.Kept) != 1 || res.Attached.Kept[0].VM != "c-one" {
		t.Fatalf("apply of the user's spec: %d %+v %+v", code, res, eb)
	}
	var kept service.HistoryResult
	getJSON(t, s, "/api/v1/infras/c1/history", &kept)
	for _, path := range []string{"/api/v1/infras/c1", "/api/v1/infras/c1?dryRun=true"} {
		code, _, eb := put(path, clusterSpec)
		if code != 409 || len(eb.Attached) != 1 || eb.Attached[0].VM != "c-one" || eb.Attached[0].NICs[0].Netns != "ctr1" ||
			!strings.Contains(eb.Error, "no port group pg-ctr") || !strings.HasPrefix(eb.Error, "apply c1: ") {
			t.Errorf("PUT %s without pg-ctr: %d %+v", path, code, eb)
		}
	}
	var h service.HistoryResult
	getJSON(t, s, "/api/v1/infras/c1/history", &h)
	if h.Current != kept.Current || len(h.Entries) != len(kept.Entries) {
		t.Errorf("the refused applies changed the history: %+v, was %+v", h, kept)
	}
	rem := remoteTo(t, s)
	ctx := context.Background()
	doc, err := rem.Load("c1.yaml", []byte(clusterSpec))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rem.Apply(ctx, service.Source{Doc: doc}, service.ApplyOptions{}); !errors.Is(err, service.ErrAttached) {
		t.Errorf("through Remote: %v", err)
	}
	ar, err := rem.Apply(ctx, service.Source{Doc: doc}, service.ApplyOptions{DropAttached: true})
	if err != nil || ar.Attached == nil || !ar.Attached.Dropped || len(ar.Attached.InTheWay) != 1 {
		t.Fatalf("with dropAttached: %+v, %v", ar, err)
	}
	getJSON(t, s, "/api/v1/infras/c1/history", &h)
	if h.Current != kept.Current+1 {
		t.Errorf("after the apply with dropAttached, generation %d, want %d", h.Current, kept.Current+1)
	}
}
