package reconcile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// FirewallCounting is what status needs to show port security's drops;
// a dataplane without it shows none.
type FirewallCounting interface {
	FirewallCounters(ns string) (map[string]map[string]uint64, error)
}

// SecurityStatus is one switch port's firewall: its policy in short and
// what its rules counted (packets), by label: forged-mac, ip-spoof,
// arp-spoof, nd-spoof, stacked-vlan, ra-guard, not-for-mac (unicast for another MAC), acl[N] (the
// port group's rule N, allow or deny) and acl-default.
type SecurityStatus struct {
	Port      string            `json:"port"` // "web1 eth0" or "esx1 vmk0"
	PortGroup string            `json:"portgroup"`
	Link      string            `json:"link"` // the switch-side port in the host namespace
	Policy    string            `json:"policy"`
	Counters  map[string]uint64 `json:"counters,omitempty"`
}

// securityStatus lists the ports that have a firewall, with their counters.
func (e *Engine) securityStatus(s *spec.Spec, desired []plan.Resource) ([]SecurityStatus, error) {
	fc, ok := e.DP.(FirewallCounting)
	if !ok {
		return nil, nil
	}
	owners := map[string][2]string{} // ns/link -> port, port group
	for _, vm := range s.VMs {
		for i, n := range vm.NICs {
			owners[plan.NSName(s.Name, vm.Host)+"/"+plan.VNICPortName(vm.Name, i)] = [2]string{fmt.Sprintf("%s eth%d", vm.Name, i), n.PortGroup}
		}
	}
	for i, hp := range s.HostPorts {
		owners[plan.NSName(s.Name, hp.Host)+"/"+plan.HostPortSwitchPort(s.HostPortName(i))] = [2]string{hp.Host + " " + s.HostPortName(i), hp.PortGroup}
	}
	counts := map[string]map[string]map[string]uint64{}
	var out []SecurityStatus
	for _, r := range desired {
		if r.Kind != plan.KindPortSec {
			continue
		}
		if _, read := counts[r.NS]; !read {
			c, err := fc.FirewallCounters(r.NS)
			if err != nil {
				return nil, err
			}
			counts[r.NS] = c
		}
		o := owners[r.NS+"/"+r.Link]
		out = append(out, SecurityStatus{Port: o[0], PortGroup: o[1], Link: r.Link, Policy: policySummary(r.Match), Counters: counts[r.NS][r.Link]})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Port < out[j].Port })
	return out, nil
}

// policySummary is a port policy in a few words: the guards and the ACL.
func policySummary(text string) string {
	p, err := plan.ParsePortPolicy(text)
	if err != nil {
		return "?"
	}
	var parts []string
	if p.GuardMAC {
		parts = append(parts, "mac")
	}
	if p.GuardIP {
		parts = append(parts, "ip")
	}
	if p.GuardRA {
		parts = append(parts, "ra")
	}
	if p.UnicastOnly {
		parts = append(parts, "unicast")
	}
	if p.Default != "" {
		parts = append(parts, fmt.Sprintf("acl(%d rules, default %s)", len(p.Rules), p.Default))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
