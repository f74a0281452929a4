package plan

import "testing"

func TestTunneled(t *testing.T) {
	for _, tc := range []struct {
		name, hosts, uplinks string
		want                 bool
	}{
		{"emulated uplinks, every host with an underlay",
			"  - {name: hv1, underlay: 10.0.0.11, nics: [{name: vmnic0, speed: 1Gbit}]}\n  - {name: hv2, underlay: 10.0.0.12, nics: [{name: vmnic0, speed: 1Gbit}]}\n",
			"    uplinks: [{name: up1, nics: {hv1: vmnic0, hv2: vmnic0}}]\n", true},
		{"real uplinks: the physical network carries the switch",
			"  - {name: hv1, underlay: 10.0.0.11, nics: [{name: vmnic0, device: eth1, speed: 1Gbit}]}\n  - {name: hv2, underlay: 10.0.0.12, nics: [{name: vmnic0, device: eth1, speed: 1Gbit}]}\n",
			"    uplinks: [{name: up1, nics: {hv1: vmnic0, hv2: vmnic0}}]\n", false},
		{"one real uplink among emulated ones",
			"  - {name: hv1, underlay: 10.0.0.11, nics: [{name: vmnic0, device: eth1, speed: 1Gbit}]}\n  - {name: hv2, underlay: 10.0.0.12, nics: [{name: vmnic0, speed: 1Gbit}]}\n",
			"    uplinks: [{name: up1, nics: {hv1: vmnic0, hv2: vmnic0}}]\n", false},
		{"real uplinks, a host without an underlay (valid: none is needed)",
			"  - {name: hv1, underlay: 10.0.0.11, nics: [{name: vmnic0, device: eth1, speed: 1Gbit}]}\n  - {name: hv2, nics: [{name: vmnic0, device: eth1, speed: 1Gbit}]}\n",
			"    uplinks: [{name: up1, nics: {hv1: vmnic0, hv2: vmnic0}}]\n", false},
		{"one host",
			"  - {name: hv1, underlay: 10.0.0.11, nics: [{name: vmnic0, speed: 1Gbit}]}\n",
			"    uplinks: [{name: up1, nics: {hv1: vmnic0}}]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustLoad(t, "name: tun\nhosts:\n"+tc.hosts+"switches:\n  - name: dvs\n"+tc.uplinks+"    portgroups: [{name: pg}]\n")
			if got := Tunneled(s, &s.Switches[0]); got != tc.want {
				t.Errorf("Tunneled = %v, want %v", got, tc.want)
			}
		})
	}
}
