package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
	"github.com/vnet-project/vnet/internal/store/etcdstore/etcdtest"
)

const clusterSpec = `name: c1
hosts:
  - {name: hv1, underlay: 192.0.2.1, nics: [{name: eth0, speed: 1Gbit}]}
  - {name: hv2, underlay: 192.0.2.2, nics: [{name: eth0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: eth0, hv2: eth0}}]
    portgroups: [{name: pg-vm}]
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: pg-vm, ip: 10.20.0.1/24}]}
  - {name: vm2, host: hv2, nics: [{portgroup: pg-vm, ip: 10.20.0.2/24}]}
`

// clusterServer serves an API over a fresh embedded etcd.
func clusterServer(t *testing.T) (*Server, *etcdstore.Store, func() *Server) {
	t.Helper()
	st := etcdtest.Store(t)
	again := func() *Server {
		s, _ := newTestServer(t, func(c *Config) { c.Backend = service.ClusterOf(st, nil) })
		return s
	}
	return again(), st, again
}

func clusterStatusOf(t *testing.T, s *Server) InfraStatus {
	t.Helper()
	w, _ := s.do(t, req{method: "GET", path: "/api/v1/infras/c1/status"})
	if w.Code != 200 {
		t.Fatalf("status: %d %s", w.Code, w.Body)
	}
	var st InfraStatus
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Infra == nil || st.Cluster == nil {
		t.Fatalf("status %s: %v", w.Body, err)
	}
	return st
}

func hostStates(st InfraStatus) string {
	var parts []string
	for _, h := range st.Cluster.Hosts {
		parts = append(parts, h.Host+"="+string(h.State))
	}
	return strings.Join(parts, " ")
}

// TestAPIOverEtcd applies, reads and destroys through the API with the
// state in an embedded etcd: status comes from the agents' reports, and
// events from etcd, for a server started anew too.
func TestAPIOverEtcd(t *testing.T) {
	s, st, restart := clusterServer(t)
	put := func(path, body string) *httpResult {
		w, eb := s.do(t, req{method: "PUT", path: path, body: body, ctype: "application/yaml", token: testToken})
		return &httpResult{w.Code, w.Body.String(), eb}
	}
	if r := put("/api/v1/infras/c1?dryRun=true", clusterSpec); r.code != 200 || !strings.Contains(r.body, `"changes"`) {
		t.Fatalf("dry run: %d %s", r.code, r.body)
	}
	var dry ApplyResult
	w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/c1?dryRun=true", body: clusterSpec, ctype: "application/yaml", token: testToken})
	if json.Unmarshal(w.Body.Bytes(), &dry); dry.Changes == 0 {
		t.Errorf("the dry run of a new infrastructure plans nothing: %s", w.Body)
	}
	if _, err := st.Get("c1"); err == nil {
		t.Fatal("a dry run stored the spec")
	}
	if r := put("/api/v1/infras/c1", clusterSpec); r.code != 200 {
		t.Fatalf("apply: %d %s", r.code, r.body)
	}
	rec, err := st.Get("c1")
	if err != nil || rec.Generation != 1 {
		t.Fatalf("etcd holds %+v %v, want generation 1", rec, err)
	}
	// The agents make the spec of the encoding stored beside the YAML.
	if want, err := spec.Load(rec.SpecFile, rec.Spec); err != nil || len(rec.SpecEncoded) == 0 {
		t.Errorf("stored spec: %d bytes of encoding, %v", len(rec.SpecEncoded), err)
	} else if got, err := speccache.DecodeValidated(rec.SpecFile, rec.Spec, rec.SpecEncoded); err != nil || !reflect.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("the stored encoding makes another spec than the YAML: %v", err)
	}
	w, _ = s.do(t, req{method: "GET", path: "/api/v1/infras"})
	if !strings.Contains(w.Body.String(), `"name": "c1"`) {
		t.Errorf("list: %s", w.Body)
	}

	// No agent has reported: both hosts' agents are dead to the server.
	got := clusterStatusOf(t, s)
	if hostStates(got) != "hv1=gone hv2=gone" || len(got.Cluster.Dead) != 2 || len(got.VMs) != 2 {
		t.Errorf("before any report: %s, dead %v, %d VMs", hostStates(got), got.Cluster.Dead, len(got.VMs))
	}
	if w, _ := s.do(t, req{method: "GET", path: "/metrics"}); !strings.Contains(w.Body.String(), `vnet_agent_up{host="hv2",infra="c1"} 0`) {
		t.Errorf("/metrics before any report:\n%s", w.Body)
	}
	// hv1 realizes generation 1; hv2 is still on none.
	hv1, _ := st.Reporter("c1", "hv1", 5*time.Second)
	hv2, _ := st.Reporter("c1", "hv2", 5*time.Second)
	defer hv1.Close()
	defer hv2.Close()
	if err := hv1.Report(etcdstore.Report{Generation: 1, Resources: 5, Security: []service.SecurityStatus{
		{Port: "vm1 eth0", PortGroup: "pg", Link: "vn0", Policy: "mac, ra, unicast", Counters: map[string]uint64{"forged-mac": 3}}}}); err != nil {
		t.Fatal(err)
	}
	if err := hv2.Report(etcdstore.Report{Generation: 0}); err != nil {
		t.Fatal(err)
	}
	got = clusterStatusOf(t, s)
	if hostStates(got) != "hv1=current hv2=lagging" || got.Cluster.Converged || strings.Join(got.Cluster.Lagging, ",") != "hv2" {
		t.Errorf("with hv2 behind: %s, lagging %v, converged %v", hostStates(got), got.Cluster.Lagging, got.Cluster.Converged)
	}
	// The counters hv1's agent reported are the status's, as on one
	// machine, and in hv1's report.
	if len(got.Security) != 1 || got.Security[0].Port != "vm1 eth0" || got.Security[0].Counters["forged-mac"] != 3 ||
		len(got.Cluster.Hosts[0].Report.Security) != 1 {
		t.Errorf("security over etcd: %+v, hv1's report %+v", got.Security, got.Cluster.Hosts[0].Report)
	}
	if got.VMs[1].NICs[0].State != "host lagging" {
		t.Errorf("vm2's port on the lagging host is %q", got.VMs[1].NICs[0].State)
	}
	w, _ = s.do(t, req{method: "GET", path: "/metrics"})
	for _, want := range []string{`vnet_agent_up{host="hv1",infra="c1"} 1`, `vnet_agent_up{host="hv2",infra="c1"} 1`} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, w.Body)
		}
	}
	if strings.Contains(w.Body.String(), "vnet_up{") {
		t.Errorf("over etcd the server exports counters it cannot read:\n%s", w.Body)
	}
	if hasChromium() {
		dom := browse(t, startServer(t, s)+"/?infra=c1", "")
		for _, want := range []string{`id="host-hv1" data-agent="current"`, `id="host-hv2" data-agent="lagging"`} {
			if !strings.Contains(dom, want) {
				t.Errorf("the dashboard lacks %s", want)
			}
		}
	}
	hv2.Report(etcdstore.Report{Generation: 1})
	if got = clusterStatusOf(t, s); !got.Cluster.Converged {
		t.Errorf("both current: %s, not converged", hostStates(got))
	}

	// Another apply stored a generation meanwhile: still one at a time.
	if r := put("/api/v1/infras/c1", strings.Replace(clusterSpec, "10.20.0.2/24", "10.20.0.3/24", 1)); r.code != 200 {
		t.Fatalf("second apply: %d %s", r.code, r.body)
	}
	if rec, _ := st.Get("c1"); rec.Generation != 2 {
		t.Errorf("generation %d after a change, want 2", rec.Generation)
	}
	if w, _ := s.do(t, req{method: "GET", path: "/api/v1/infras/c1/ioc"}); w.Code != http.StatusNotImplemented {
		t.Errorf("ioc over etcd: %d, want 501", w.Code)
	}
	// A netperf run is refused at once, not started to fail.
	if w, _ := s.do(t, req{method: "POST", path: "/api/v1/infras/c1/netperf", token: testToken, ctype: "application/json",
		body: `{"to": "vm2", "from": "vm1"}`}); w.Code != http.StatusNotImplemented {
		t.Errorf("netperf over etcd: %d %s, want 501", w.Code, w.Body)
	}
	if w, _ := s.do(t, req{method: "DELETE", path: "/api/v1/infras/c1", token: testToken}); w.Code != 200 {
		t.Fatalf("destroy: %d %s", w.Code, w.Body)
	}
	if w, _ := s.do(t, req{method: "GET", path: "/api/v1/infras/c1"}); w.Code != 404 {
		t.Errorf("after destroy: %d", w.Code)
	}

	// The events are etcd's: a server started anew lists them.
	w, _ = restart().do(t, req{method: "GET", path: "/api/v1/events?infra=c1"})
	var evs []Event
	if err := json.Unmarshal(w.Body.Bytes(), &evs); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range evs {
		actions = append(actions, e.Action+":"+e.Who)
	}
	if strings.Join(actions, " ") != "destroy:alice apply:alice apply:alice" {
		t.Errorf("events after a restart: %v", actions)
	}
}

type httpResult struct {
	code int
	body string
	eb   ErrorBody
}

// A spec of 10,000 networks (above 2 MiB, an etcd value of about 2.7 MiB)
// goes through the API into etcd whole.
func TestLargeSpecOverEtcd(t *testing.T) {
	s, st, _ := clusterServer(t)
	large := strings.Replace(manyNetworks(10000), "name: big", "name: c1", 1)
	if len(large) <= 2<<20 {
		t.Fatalf("the spec is %d bytes, want above 2 MiB", len(large))
	}
	w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/c1", body: large, ctype: "application/yaml", token: testToken})
	if w.Code != http.StatusOK {
		t.Fatalf("apply of %d bytes: %d %.500s", len(large), w.Code, w.Body)
	}
	rec, err := st.Get("c1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Generation != 1 || !strings.Contains(string(rec.Spec), "name: net9999") {
		t.Fatalf("etcd holds generation %d of %d bytes", rec.Generation, len(rec.Spec))
	}
}

// TestAPIPinsVNIs applies networks that leave their VNIs out, then the
// same with a network added before them: the API stores the VNIs with the
// spec, as vnet apply --etcd does, so the networks keep theirs.
func TestAPIPinsVNIs(t *testing.T) {
	s, st, _ := clusterServer(t)
	const head = `name: c1
hosts:
  - {name: hv1, underlay: 192.0.2.1}
  - {name: hv2, underlay: 192.0.2.2}
networks:
`
	const rest = `  - {name: web, subnet: 10.1.0.0/24}
  - name: db
    subnet: 10.2.0.0/24
vms:
  - {name: vm1, host: hv1, nics: [{network: web, ip: 10.1.0.1/24}]}
  - {name: vm2, host: hv2, nics: [{network: db, ip: 10.2.0.1/24}]}
`
	stored := func(gen int) *spec.Spec {
		t.Helper()
		rec, err := st.Get("c1")
		if err != nil || rec.Generation != gen {
			t.Fatalf("etcd holds %+v %v, want generation %d", rec, err, gen)
		}
		doc, err := spec.Load(rec.SpecFile, rec.Spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range doc.Spec.Networks {
			if n.VNI == 0 {
				t.Fatalf("generation %d stores network %s without its VNI:\n%s", gen, n.Name, rec.Spec)
			}
		}
		if enc, err := speccache.DecodeValidated(rec.SpecFile, rec.Spec, rec.SpecEncoded); err != nil || !reflect.DeepEqual(enc.Spec, doc.Spec) {
			t.Errorf("the stored encoding makes another spec than the YAML: %v", err)
		}
		return doc.Spec
	}
	put := func(body string) {
		t.Helper()
		w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/c1", body: body, ctype: "application/yaml", token: testToken})
		if w.Code != http.StatusOK {
			t.Fatalf("apply: %d %s", w.Code, w.Body)
		}
	}
	put(head + rest)
	first := stored(1)
	put(head + "  - {name: app, subnet: 10.3.0.0/24}\n" + rest)
	second := stored(2)
	for _, name := range []string{"web", "db"} {
		was, _ := first.Network(name)
		now, _ := second.Network(name)
		if was.VNI != now.VNI {
			t.Errorf("network %s had VNI %d, has %d after a network was added", name, was.VNI, now.VNI)
		}
	}
	// The same spec again changes nothing: its VNIs are pinned as before.
	put(head + "  - {name: app, subnet: 10.3.0.0/24}\n" + rest)
	stored(2)
}
