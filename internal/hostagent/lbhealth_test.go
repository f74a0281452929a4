package hostagent

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// A backend's state follows its probes: the first decides, then rise
// successes in a row bring it up and fall failures in a row take it down.
func TestProbeState(t *testing.T) {
	fail := errors.New("refused")
	cases := []struct {
		name       string
		rise, fall int
		probes     []bool // true: the probe succeeded
		want       []bool // the state after each
		changes    []int  // after which probes it changed
	}{
		{"first up", 2, 2, []bool{true, true}, []bool{true, true}, []int{0}},
		{"first down", 2, 2, []bool{false, true, true}, []bool{false, false, true}, []int{0, 2}},
		{"fall 2", 2, 2, []bool{true, false, true, false, false}, []bool{true, true, true, true, false}, []int{0, 4}},
		{"fall 1", 1, 1, []bool{true, false, true}, []bool{true, false, true}, []int{0, 1, 2}},
		{"rise 3", 3, 1, []bool{false, true, true, false, true, true, true}, []bool{false, false, false, false, false, false, true}, []int{0, 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var st probeState
			var changes []int
			for i, ok := range c.probes {
				var err error
				if !ok {
					err = fail
				}
				if st.record(err, c.rise, c.fall, time.Unix(int64(i), 0)) {
					changes = append(changes, i)
				}
				if st.up != c.want[i] {
					t.Errorf("after probe %d: up %v, want %v", i, st.up, c.want[i])
				}
				if !st.up && st.err != "refused" || st.up && st.err != "" {
					t.Errorf("after probe %d: error %q", i, st.err)
				}
			}
			if len(changes) != len(c.changes) {
				t.Fatalf("changes %v, want %v", changes, c.changes)
			}
			for i := range changes {
				if changes[i] != c.changes[i] {
					t.Errorf("changes %v, want %v", changes, c.changes)
				}
			}
			if last := c.changes[len(c.changes)-1]; st.since != time.Unix(int64(last), 0) {
				t.Errorf("since %v, want the last change's", st.since)
			}
		})
	}
}

// reportsOnly is a cluster that holds hosts' reports, and nothing else.
type reportsOnly struct {
	Cluster
	reports []etcdstore.Report
}

func (r reportsOnly) Reports(string) ([]etcdstore.Report, error) { return r.reports, nil }
func (r reportsOnly) WatchReports(context.Context, string) <-chan struct{} {
	return nil
}

// Which backends a host marks down: its own as its probes found them
// (before its first probe, as its report had them), the others' as their
// hosts report them, and those of a host that reports nothing.
func TestBackendsMarkedDown(t *testing.T) {
	doc, err := spec.Load("t.yaml", []byte(`name: t
hosts:
  - {name: hv1, underlay: 192.0.2.11}
  - {name: hv2, underlay: 192.0.2.12}
  - {name: hv3, underlay: 192.0.2.13}
  - {name: hv4, underlay: 192.0.2.14}
networks:
  - name: net
    subnet: 10.1.0.0/24
    loadBalancers:
      - {name: web, vip: 10.1.0.100, listeners: [{protocol: tcp, port: 80}], backends: [{vm: w1}, {vm: w1b}, {vm: w2}, {vm: w3}, {vm: w4}], healthCheck: {}}
vms:
  - {name: w1, host: hv1, nics: [{network: net, ip: 10.1.0.11/24}]}
  - {name: w1b, host: hv1, nics: [{network: net, ip: 10.1.0.15/24}]}
  - {name: w2, host: hv2, nics: [{network: net, ip: 10.1.0.12/24}]}
  - {name: w3, host: hv3, nics: [{network: net, ip: 10.1.0.13/24}]}
  - {name: w4, host: hv4, nics: [{network: net, ip: 10.1.0.14/24}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	key := func(vm string) string { return plan.BackendKey("network net", "web", vm, 0) }
	a := &Agent{Host: "hv1", Cluster: reportsOnly{reports: []etcdstore.Report{
		{Host: "hv1", Health: []status.BackendHealth{{Key: key("w1"), Up: true}, {Key: key("w1b"), Up: false}}},
		{Host: "hv2", Health: []status.BackendHealth{{Key: key("w2"), Up: false}}},
		{Host: "hv3"}, // not probed yet
		// hv4 reports nothing: gone
	}}}
	h := &healthRun{states: map[string]*probeState{key("w1"): {known: true, up: false}}}
	a.healthRuns = map[string]*healthRun{"t": h}
	got := a.lbDown(doc.Spec)
	want := map[string]bool{key("w1"): true, key("w1b"): true, key("w2"): true, key("w4"): true}
	if !maps.Equal(got, want) {
		t.Errorf("down %v, want %v", got, want)
	}
}
