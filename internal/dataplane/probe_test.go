package dataplane

import (
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
)

func TestProbeNeeds(t *testing.T) {
	bridge := plan.Resource{Kind: plan.KindBridge}
	for _, c := range []struct {
		name  string
		needs []plan.Resource
		want  probeSet
	}{
		{"nothing", nil, 0},
		{"namespaces only", []plan.Resource{{Kind: plan.KindNetns}, {Kind: plan.KindNeigh}}, 0},
		{"pools without links are not probed", []plan.Resource{{Kind: plan.KindPool}, {Kind: plan.KindFilter}}, 0},
		{"firewall without links is not probed", []plan.Resource{{Kind: plan.KindFirewall}}, 0},
		{"a bridge", []plan.Resource{bridge}, probeLinks},
		{"a veth pair", []plan.Resource{{Kind: plan.KindVeth}}, probeLinks},
		{"a line rate", []plan.Resource{{Kind: plan.KindLineRate}}, probeLinks},
		{"a shaper alone", []plan.Resource{{Kind: plan.KindShaper}}, probeLinks | probeShaper},
		{"steering alone", []plan.Resource{{Kind: plan.KindSteer}}, probeLinks | probeSteer},
		{"pools", []plan.Resource{bridge, {Kind: plan.KindFilter}}, probeLinks | probePools},
		{"port security", []plan.Resource{bridge, {Kind: plan.KindFirewall, Match: plan.FirewallBridge}}, probeLinks | probeFirewall},
		{"ACLs", []plan.Resource{bridge, {Kind: plan.KindFirewall, Match: plan.FirewallBridge}, {Kind: plan.KindFirewall, Match: plan.FirewallStateful}},
			probeLinks | probeFirewall | probeStateful},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := probeNeeds(c.needs); got != c.want {
				t.Errorf("probeNeeds = %06b, want %06b", got, c.want)
			}
		})
	}
}

func TestProbeCovers(t *testing.T) {
	all := probeLinks | probePools | probeShaper | probeSteer | probeFirewall | probeStateful
	for _, c := range []struct {
		name        string
		known, want probeSet
		noNetfilter bool
		covered     bool
	}{
		{"nothing probed, nothing needed", 0, 0, false, true},
		{"nothing probed yet", 0, probeLinks, false, false},
		{"the same again", probeLinks, probeLinks, false, true},
		{"less than probed", probeLinks | probePools, probeLinks, false, true},
		{"a kind not probed yet", probeLinks, probeLinks | probeShaper, false, false},
		{"stateful after stateless", probeLinks | probeFirewall, probeLinks | probeFirewall | probeStateful, false, false},
		{"stateless after stateful", all, probeLinks | probeFirewall, false, true},
		{"without br_netfilter, ACLs are probed again", all, probeLinks | probeFirewall | probeStateful, true, false},
		{"without br_netfilter, the rest is kept", all, probeLinks | probeFirewall, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.known.covers(c.want, c.noNetfilter); got != c.covered {
				t.Errorf("%06b covers %06b = %v, want %v", c.known, c.want, got, c.covered)
			}
		})
	}
}
