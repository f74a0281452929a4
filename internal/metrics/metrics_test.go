package metrics

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
)

const demo = `name: m1
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {esx1: vmnic0}}]
    ioc: {enabled: true, pools: {vm: {shares: high, limit: 500Mbit}, backup: {shares: low, reservation: 100Mbit}}}
    portgroups: [{name: pg-vm, pool: vm}, {name: pg-mgmt}]
vms:
  - name: vm1
    host: esx1
    nics: [{portgroup: pg-vm, ip: 10.0.0.1/24}, {portgroup: pg-vm, ip: 10.0.1.1/24, connected: false}]
hostports:
  - {host: esx1, portgroup: pg-mgmt, ip: 10.0.9.1/24}
`

// counting is a kernel whose counters are set by the test.
type counting struct {
	links map[string]map[string]status.Link
	tc    map[string]map[uint32]plan.Counters
	fw    map[string]map[string]map[string]uint64 // ns -> switch port -> label -> packets
}

func (c *counting) FirewallCounters(ns string) (map[string]map[string]uint64, error) {
	return c.fw[ns], nil
}

func (c *counting) LinkStates(ns string) (map[string]status.Link, error) {
	m, ok := c.links[ns]
	if !ok {
		return nil, dataplane.ErrNotRoot
	}
	return m, nil
}

func (c *counting) TCCounters(ns, link string) (map[uint32]plan.Counters, plan.Counters, error) {
	return c.tc[ns+"/"+link], plan.Counters{}, nil
}

func fakeKernel(vmTx, poolBytes uint64) *counting {
	return &counting{
		links: map[string]map[string]status.Link{
			"vnet.m1.vm1":  {"eth0": {Up: true, TxBytes: vmTx, RxBytes: vmTx / 4, TxDropped: vmTx / 100, RxDropped: vmTx / 50}, "eth1": {Up: true}},
			"vnet.m1.esx1": {"vmnic0": {Up: true, TxBytes: poolBytes}, "vmk0": {Up: false}},
		},
		fw: map[string]map[string]map[string]uint64{"vnet.m1.esx1": {
			plan.VNICPortName("m1", "vm1", 0): {"forged-mac": 4, "acl[0]": 7, "acl-default": 2},
			plan.HostPortSwitchPort("vmk0"):   {"forged-mac": 0},
		}},
		tc: map[string]map[uint32]plan.Counters{"vnet.m1.esx1/vmnic0": {0x10: {Bytes: poolBytes, Drops: 3}, 0x11: {Bytes: poolBytes}, 0x12: {Bytes: poolBytes}, 0x13: {Bytes: poolBytes}, 0x14: {Bytes: poolBytes}, 0x15: {Bytes: poolBytes}, 0x16: {Bytes: poolBytes}, 0x17: {Bytes: poolBytes}, 0x18: {Bytes: poolBytes}, 0x19: {Bytes: poolBytes}, 0x1a: {Bytes: poolBytes}, 0x20: {Bytes: poolBytes}, 0x21: {Bytes: poolBytes}}},
	}
}

func load(t *testing.T) *spec.Spec {
	t.Helper()
	doc, err := spec.Load("m1.yaml", []byte(demo))
	if err != nil {
		t.Fatal(err)
	}
	return doc.Spec
}

func TestRead(t *testing.T) {
	s := load(t)
	snap, err := Read(fakeKernel(1000, 5000), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Ports) != 3 || snap.Ports[0].Key() != "vm1/eth0" || !snap.Ports[0].Up || snap.Ports[0].TxBytes != 1000 {
		t.Errorf("ports: %+v", snap.Ports)
	}
	if snap.Ports[1].Up {
		t.Error("a disconnected vNIC counts as up")
	}
	if hp := snap.Ports[2]; hp.VM != "" || hp.VNIC != "vmk0" || hp.Key() != "esx1/vmk0" {
		t.Errorf("host port: %+v", hp)
	}
	if len(snap.Uplinks) != 1 || snap.Uplinks[0].Uplink != "up1" || snap.Uplinks[0].Line != 1e9 {
		t.Errorf("uplinks: %+v", snap.Uplinks)
	}
	pools := map[string]PoolSample{}
	for _, p := range snap.Pools {
		pools[p.Pool] = p
	}
	if vm := pools["vm"]; vm.Shares != 100 || vm.Limit != 500e6 || vm.Ceil != 500e6 || vm.Uplink != "up1" {
		t.Errorf("vm pool: %+v", vm)
	}
	if b := pools["backup"]; b.Shares != 25 || b.Reservation != 100e6 || b.Assured < 100e6 {
		t.Errorf("backup pool: %+v", b)
	}
	if _, err := Read(&counting{}, s); err == nil || !strings.Contains(err.Error(), "is m1 applied?") {
		t.Errorf("missing namespace: %v", err)
	}
}

func snapAt(t *testing.T, at time.Time, vmTx uint64) *Snapshot {
	t.Helper()
	snap, err := Read(fakeKernel(vmTx, vmTx), load(t))
	if err != nil {
		t.Fatal(err)
	}
	snap.At = at
	return snap
}

func TestAverageAndReset(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name   string
		counts []uint64 // vm1 eth0's transmit counter, one a second
		want   float64  // bit/s
	}{
		{"steady", []uint64{0, 1000, 2000, 3000}, 8000},
		{"a reset counts from zero", []uint64{5000, 6000, 500, 1500}, (1000 + 500 + 1000) * 8 / 3.0},
		{"one sample", []uint64{7}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRing(time.Hour)
			for i, c := range tt.counts {
				r.Add(snapAt(t, t0.Add(time.Duration(i)*time.Second), c))
			}
			avg := Average(r.Window(time.Hour))
			if got := avg.Ports[0].Tx; got != tt.want {
				t.Errorf("tx %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRingWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := NewRing(10 * time.Second)
	for i := range 30 {
		r.Add(snapAt(t, t0.Add(time.Duration(i)*time.Second), uint64(i)*100))
	}
	all := r.Window(time.Hour)
	if len(all) != 11 || all[0].At != t0.Add(19*time.Second) {
		t.Errorf("kept %d from %v", len(all), all[0].At)
	}
	w := r.Window(3 * time.Second)
	if len(w) != 4 || w[0].At != t0.Add(26*time.Second) {
		t.Errorf("a 3 s window: %d from %v", len(w), w[0].At)
	}
	if avg := Average(w); avg.Seconds != 3 || avg.Ports[0].Tx != 800 {
		t.Errorf("3 s window: %v s, %v bit/s", avg.Seconds, avg.Ports[0].Tx)
	}
}

func TestSeries(t *testing.T) {
	t0 := time.Unix(1000, 0)
	snaps := []*Snapshot{snapAt(t, t0, 0), snapAt(t, t0.Add(time.Second), 1000), snapAt(t, t0.Add(3*time.Second), 3000)}
	snaps[1].Pools = nil // a reading without the pools: a gap, not a jump
	s := MakeSeries(snaps)
	if len(s.Time) != 2 || s.Uplinks[0].Tx[0] != 8000 || s.Uplinks[0].Tx[1] != 8000 {
		t.Errorf("uplink series: %v %v", s.Time, s.Uplinks[0].Tx)
	}
	var buf bytes.Buffer
	if err := jsonEncode(&buf, s.Pools[0].Tx); err != nil || buf.String() != "[null,null]" {
		t.Errorf("pool series with a gap: %s %v", buf.String(), err)
	}
}

// TestPortSeriesDrops: a vNIC's own drops, sending and receiving, in
// packets per second; a vNIC that dropped nothing has a series of zeros.
func TestPortSeriesDrops(t *testing.T) {
	t0 := time.Unix(1000, 0)
	snaps := []*Snapshot{snapAt(t, t0, 0), snapAt(t, t0.Add(2*time.Second), 1000)}
	if p := snaps[1].Ports[0]; p.TxDrops != 10 || p.RxDrops != 20 {
		t.Fatalf("read %s's drops: tx %d rx %d, want 10 and 20", p.Key(), p.TxDrops, p.RxDrops)
	}
	s := MakeSeries(snaps)
	if len(s.Ports) != 3 {
		t.Fatalf("ports: %+v", s.Ports)
	}
	if p := s.Ports[0]; len(p.TxDrops) != 1 || p.TxDrops[0] != 5 || len(p.RxDrops) != 1 || p.RxDrops[0] != 10 {
		t.Errorf("%s/%s drops: tx %v rx %v, want [5] and [10] packets/s", p.VM, p.VNIC, p.TxDrops, p.RxDrops)
	}
	if p := s.Ports[1]; len(p.TxDrops) != 1 || p.TxDrops[0] != 0 || len(p.RxDrops) != 1 || p.RxDrops[0] != 0 {
		t.Errorf("%s/%s, dropping nothing: tx %v rx %v", p.VM, p.VNIC, p.TxDrops, p.RxDrops)
	}
}

func TestCollectorExposition(t *testing.T) {
	s := load(t)
	reg := prometheus.NewRegistry()
	kernel := fakeKernel(1000, 5000)
	reg.MustRegister(&Collector{Infras: func() []*spec.Spec { return []*spec.Spec{s} },
		Open: func() (Counting, func(), error) { return kernel, func() {}, nil }})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"vnet_up": 1, "vnet_port_transmit_bytes_total": 3, "vnet_port_receive_bytes_total": 3,
		"vnet_port_transmit_drops_total": 3, "vnet_port_receive_drops_total": 3,
		"vnet_uplink_up": 1, "vnet_pool_transmit_bytes_total": 8, "vnet_pool_shares": 8, "vnet_pool_limit_bits_per_second": 1,
		"vnet_pool_reservation_bits_per_second": 1, "vnet_pool_drops_total": 8, "vnet_pool_backlog_bytes": 8}
	for name, n := range want {
		f, ok := parsed[name]
		if !ok || len(f.Metric) != n {
			t.Errorf("%s: %d series, want %d", name, len(f.GetMetric()), n)
		}
	}
	var labels map[string]string
	var txValue float64
	for _, m := range parsed["vnet_port_transmit_bytes_total"].Metric {
		l := map[string]string{}
		for _, lp := range m.Label {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["vnic"] == "eth0" {
			labels, txValue = l, m.Counter.GetValue()
		}
	}
	if labels["vm"] != "vm1" || labels["vnic"] != "eth0" || labels["portgroup"] != "pg-vm" || labels["host"] != "esx1" || txValue != 1000 {
		t.Errorf("port series: %v %v", labels, txValue)
	}
	// Port security: a series per port with a firewall and counter; vm1's
	// second vNIC has none.
	security := map[string]float64{}
	for _, m := range parsed["vnet_port_security_packets_total"].Metric {
		l := map[string]string{}
		for _, lp := range m.Label {
			l[lp.GetName()] = lp.GetValue()
		}
		security[l["vm"]+"/"+l["vnic"]+"/"+l["portgroup"]+"/"+l["counter"]] = m.Counter.GetValue()
	}
	wantSecurity := map[string]float64{"vm1/eth0/pg-vm/forged-mac": 4, "vm1/eth0/pg-vm/acl[0]": 7, "vm1/eth0/pg-vm/acl-default": 2, "/vmk0/pg-mgmt/forged-mac": 0}
	if len(security) != len(wantSecurity) {
		t.Errorf("security series %v, want %v", security, wantSecurity)
	}
	for k, v := range wantSecurity {
		if got, ok := security[k]; !ok || got != v {
			t.Errorf("security series %s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	// An infrastructure that cannot be read is down, and the rest still served.
	kernel.links = nil
	fams, err = reg.Gather()
	if err != nil || len(fams) != 1 || fams[0].GetName() != "vnet_up" || fams[0].Metric[0].Gauge.GetValue() != 0 {
		t.Errorf("unreadable infra: %v %v", fams, err)
	}
}

func jsonEncode(buf *bytes.Buffer, v any) error {
	b, err := json.Marshal(v)
	buf.Write(b)
	return err
}

// TestHostCollector exposes one host's part: its VMs' vNICs and its NICs
// found in the agent's namespace, nothing of other hosts.
func TestHostCollector(t *testing.T) {
	const two = `name: m2
hosts:
  - {name: hv1, underlay: 192.0.2.11, nics: [{name: eth0, speed: 1Gbit}]}
  - {name: hv2, underlay: 192.0.2.12, nics: [{name: eth0, speed: 1Gbit}]}
switches:
  - name: dvs
    uplinks: [{name: up1, nics: {hv1: eth0, hv2: eth0}}]
    portgroups: [{name: pg}]
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: pg, ip: 10.0.0.1/24}]}
  - {name: vm2, host: hv2, nics: [{portgroup: pg, ip: 10.0.0.2/24}]}
`
	doc, err := spec.Load("two.yaml", []byte(two))
	if err != nil {
		t.Fatal(err)
	}
	k := &counting{links: map[string]map[string]status.Link{
		"vnet.m2.vm1":  {"eth0": {Up: true, TxBytes: 1000, RxBytes: 500}},
		plan.CurrentNS: {"eth0": {Up: true, TxBytes: 7000}},
	}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&Collector{Infras: func() []*spec.Spec { return []*spec.Spec{doc.Spec} },
		Open: func() (Counting, func(), error) { return k, func() {}, nil }, Host: "hv1", HostNS: plan.CurrentNS})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	got := map[string]float64{}
	for name, f := range parsed {
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[name+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"vnet_up{infra=m2}": 1,
		"vnet_port_transmit_bytes_total{host=hv1,infra=m2,portgroup=pg,vm=vm1,vnic=eth0}":    1000,
		"vnet_uplink_transmit_bytes_total{host=hv1,infra=m2,nic=eth0,switch=dvs,uplink=up1}": 7000,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for k := range got {
		if strings.Contains(k, "hv2") || strings.Contains(k, "vm2") {
			t.Errorf("host hv1 exposes %s", k)
		}
	}
}

// A port's firewall drops become packets per second: the checks' drops and
// the ACL default's, not an ACL rule's matches.
func TestSeriesSecurityDrops(t *testing.T) {
	t0 := time.Unix(1000, 0)
	snaps := []*Snapshot{snapAt(t, t0, 0), snapAt(t, t0.Add(2*time.Second), 1000)}
	port := snaps[0].Ports[0]
	for i, n := range []uint64{10, 30} {
		snaps[i].Security = []SecuritySample{{Host: port.Host, VM: port.VM, VNIC: port.VNIC, PortGroup: port.PortGroup,
			Counters: map[string]uint64{"ip-spoof": n, "acl-default": n, "acl[0]": 1000 * n}}}
	}
	s := MakeSeries(snaps)
	for _, p := range s.Ports {
		switch {
		case p.VM == port.VM && p.VNIC == port.VNIC && (len(p.Dropped) != 1 || p.Dropped[0] != 20):
			t.Errorf("%s/%s drops: %v, want [20] packets/s", p.VM, p.VNIC, p.Dropped)
		case (p.VM != port.VM || p.VNIC != port.VNIC) && p.Dropped != nil:
			t.Errorf("%s/%s, without a firewall, has drops %v", p.VM, p.VNIC, p.Dropped)
		}
	}
}

// TestThin: a series thinned keeps the newest snapshot and at most the
// points asked for, and each step is the average over those it spans.
func TestThin(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var snaps []*Snapshot
	for i := range 101 {
		snaps = append(snaps, snapAt(t, t0.Add(time.Duration(i)*time.Second), uint64(i)*1000))
	}
	tests := []struct {
		points, want int
	}{{0, 101}, {100, 101}, {500, 101}, {10, 11}, {30, 26}, {1, 2}}
	for _, tt := range tests {
		got := Thin(snaps, tt.points)
		if len(got) != tt.want || got[len(got)-1] != snaps[100] {
			t.Errorf("%d points: %d snapshots ending at %v, want %d ending with the newest", tt.points, len(got), got[len(got)-1].At, tt.want)
		}
		// A steady 8 kbit/s, whatever the stride.
		s := MakeSeries(got)
		for i, r := range s.Ports[0].Tx {
			if r != 8000 {
				t.Errorf("%d points: step %d is %v bit/s, want 8000", tt.points, i, r)
				break
			}
		}
	}
}
