package metrics

import (
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
)

// A host agent's snapshot has its own VMs' port counters, read in the
// host's namespace: a VM's switch port, a TAP under its own name, a
// network vNIC's port; nothing of another host's VMs.
func TestReadHostSecurity(t *testing.T) {
	doc, err := spec.Load("c.yaml", []byte(`name: c1
hosts:
  - {name: hv1, underlay: 10.0.0.11}
  - {name: hv2, underlay: 10.0.0.12}
switches:
  - {name: dvs, hosts: [hv1, hv2], portgroups: [{name: app}]}
networks:
  - {name: n-a, subnet: 10.9.0.0/24}
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: app, ip: 10.1.0.1/24}]}
  - {name: g1, host: hv1, nics: [{portgroup: app, attach: {tap: tap-g1}, mac: "52:54:00:00:00:01"}]}
  - {name: n1, host: hv1, nics: [{network: n-a, ip: 10.9.0.1/24}]}
  - {name: vm2, host: hv2, nics: [{portgroup: app, ip: 10.1.0.2/24}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	k := &counting{
		links: map[string]map[string]status.Link{
			"vnet.c1.vm1": {"eth0": {Up: true}}, "vnet.c1.g1": {}, "vnet.c1.n1": {"eth0": {Up: true}}, plan.CurrentNS: {},
		},
		fw: map[string]map[string]map[string]uint64{plan.CurrentNS: {
			plan.VNICPortName("c1", "vm1", 0): {"forged-mac": 3},
			"tap-g1":                          {"ra-guard": 1},
			plan.VNICPortName("c1", "n1", 0):  {"ip-spoof": 5},
			plan.VNICPortName("c1", "vm2", 0): {"forged-mac": 9}, // not hv1's: never read as such
		}},
	}
	snap, err := ReadHost(k, doc.Spec, "hv1", plan.CurrentNS)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, s := range snap.Security {
		if s.Host != "hv1" {
			t.Errorf("sample of host %s", s.Host)
		}
		for label, n := range s.Counters {
			got[s.VM+"/"+s.VNIC+"/"+s.PortGroup+"/"+label] = n
		}
	}
	want := map[string]uint64{"vm1/eth0/app/forged-mac": 3, "g1/eth0/app/ra-guard": 1, "n1/eth0//ip-spoof": 5}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for key, n := range want {
		if got[key] != n {
			t.Errorf("%s = %d, want %d (all: %v)", key, got[key], n, got)
		}
	}
}
