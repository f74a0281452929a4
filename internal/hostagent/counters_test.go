package hostagent

import (
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
	"github.com/vnet-project/vnet/internal/store/etcdstore/etcdtest"
)

// countingDP counts nothing into the kernel: it only answers
// FirewallCounters from its map, by port.
type countingDP struct {
	counters map[string]map[string]uint64
	reads    int
}

func (d *countingDP) Observe(string, []plan.Resource) ([]plan.Resource, error) { return nil, nil }
func (d *countingDP) Execute(plan.Action) error                                { return nil }
func (d *countingDP) Probe([]plan.Resource) error                              { return nil }
func (d *countingDP) FirewallCounters(string) (map[string]map[string]uint64, error) {
	d.reads++
	out := map[string]map[string]uint64{}
	for port, c := range d.counters {
		out[port] = map[string]uint64{}
		for l, n := range c {
			out[port][l] = n
		}
	}
	return out, nil
}

const countersSpec = `name: c1
hosts:
  - {name: hv1, underlay: 192.0.2.1}
  - {name: hv2, underlay: 192.0.2.2}
switches:
  - name: dvs
    hosts: [hv1, hv2]
    portgroups:
      - name: app
        security: {ipSpoofing: false}
vms:
  - {name: app1, host: hv1, nics: [{portgroup: app, ip: 10.78.0.2/24}]}
  - {name: app2, host: hv2, nics: [{portgroup: app, ip: 10.78.0.3/24}]}
`

// An agent's report carries its host's ports' non-zero counters; between
// passes it is written again when they moved and only then.
func TestReportCarriesCounters(t *testing.T) {
	st := etcdtest.Store(t)
	doc, err := spec.Load("c1.yaml", []byte(countersSpec))
	if err != nil {
		t.Fatal(err)
	}
	port := plan.VNICPortName("c1", "app1", 0)
	dp := &countingDP{counters: map[string]map[string]uint64{port: {"forged-mac": 3, "ip-spoof": 0}}}
	a := &Agent{Cluster: st, DP: dp, Host: "hv1"}
	defer a.closeReporters()
	a.loaded = map[string]loadedSpec{"c1": {doc: doc}}
	a.secRes = map[string][]plan.Resource{"c1": {{Kind: plan.KindPortSec, NS: "", Link: port,
		Match: plan.PortPolicy{GuardMAC: true, GuardIP: true}.String()}}}

	report := func() etcdstore.Report {
		t.Helper()
		rs, err := st.Reports("c1")
		if err != nil || len(rs) != 1 {
			t.Fatalf("reports: %+v %v", rs, err)
		}
		return rs[0]
	}
	a.report("c1", 1, 5, nil)
	r := report()
	if len(r.Security) != 1 || r.Security[0].Port != "app1 eth0" || r.Security[0].PortGroup != "app" ||
		len(r.Security[0].Counters) != 1 || r.Security[0].Counters["forged-mac"] != 3 || r.Generation != 1 {
		t.Fatalf("report after a pass: %+v", r)
	}
	// A pass's report after the first carries the last counters, read
	// again only by RefreshCounters.
	reads := dp.reads
	a.report("c1", 1, 5, nil)
	if dp.reads != reads || report().Security[0].Counters["forged-mac"] != 3 {
		t.Errorf("a later pass's report read the counters (%d reads) or dropped them: %+v", dp.reads-reads, report())
	}
	r = report()
	time.Sleep(10 * time.Millisecond)
	a.RefreshCounters()
	if again := report(); !again.At.Equal(r.At) {
		t.Errorf("counters did not move, yet the report was written again (at %s, was %s)", again.At, r.At)
	}
	dp.counters[port]["ip-spoof"] = 7
	a.RefreshCounters()
	r2 := report()
	if r2.Security[0].Counters["ip-spoof"] != 7 || r2.Generation != 1 || r2.Resources != 5 || !r2.At.After(r.At) {
		t.Errorf("report after the counters moved: %+v", r2)
	}
	// An infrastructure without port policies on the host reads nothing.
	a.secRes["c1"] = nil
	reads = dp.reads
	a.RefreshCounters()
	if dp.reads != reads || report().Security != nil {
		t.Errorf("no port policy: %d reads, report %+v", dp.reads-reads, report())
	}
}
