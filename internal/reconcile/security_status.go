package reconcile

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
)

// PortProgrammer is a dataplane that may enforce port policies with its
// own tc/BPF programs (plan.Options.PortPrograms): it says whether it
// does on this machine, and how it enforces them.
type PortProgrammer interface {
	PortPrograms() (bool, string)
}

// FirewallCounting is what status needs to show port security's drops;
// a dataplane without it shows none.
type FirewallCounting interface {
	FirewallCounters(ns string) (map[string]map[string]uint64, error)
}

// securityStatus lists the ports that have a firewall, with their counters:
// those of read (by namespace, as FirewallCounters returns them), else
// read now.
func (e *Engine) securityStatus(s *spec.Spec, desired []plan.Resource, read map[string]map[string]map[string]uint64) ([]status.PortSecurity, error) {
	fc, ok := e.DP.(FirewallCounting)
	if !ok {
		return nil, nil
	}
	owners := map[string][2]string{} // ns/link -> port, port group
	for vi := range s.VMs {
		vm := &s.VMs[vi]
		for i, n := range vm.NICs {
			owners[plan.NSName(s.Name, vm.Host)+"/"+plan.SwitchPort(s.Name, vm, i)] = [2]string{fmt.Sprintf("%s eth%d", vm.Name, i), n.PortGroup}
		}
	}
	for i, hp := range s.HostPorts {
		owners[plan.NSName(s.Name, hp.Host)+"/"+plan.HostPortSwitchPort(s.HostPortName(i))] = [2]string{hp.Host + " " + s.HostPortName(i), hp.PortGroup}
	}
	return securityOf(fc, desired, read, func(r plan.Resource) [2]string { return owners[r.NS+"/"+r.Link] })
}

// HostSecurity lists the ports of one host of a cluster that have a
// firewall, with their counters, from what the host's agent realized
// (realized: its record's resources). A vNIC's switch port there is named
// as in the lab, a TAP by itself; host ports are not part of a host's part.
func HostSecurity(fc FirewallCounting, s *spec.Spec, host string, realized []plan.Resource) ([]status.PortSecurity, error) {
	owners := map[string][2]string{} // link -> port, port group
	for _, vm := range s.VMs {
		if vm.Host != host {
			continue
		}
		for i, n := range vm.NICs {
			owners[plan.SwitchPort(s.Name, &vm, i)] = [2]string{fmt.Sprintf("%s eth%d", vm.Name, i), n.PortGroup}
		}
	}
	return securityOf(fc, realized, nil, func(r plan.Resource) [2]string { return owners[r.Link] })
}

// securityOf reads the counters of each port policy among resources, one
// dump per namespace that read does not hold, and names each port by owner.
func securityOf(fc FirewallCounting, resources []plan.Resource, read map[string]map[string]map[string]uint64, owner func(plan.Resource) [2]string) ([]status.PortSecurity, error) {
	counts := maps.Clone(read)
	if counts == nil {
		counts = map[string]map[string]map[string]uint64{}
	}
	var out []status.PortSecurity
	for _, r := range resources {
		if r.Kind != plan.KindPortSec && r.Kind != plan.KindPortBPF {
			continue
		}
		if _, read := counts[r.NS]; !read {
			c, err := fc.FirewallCounters(r.NS)
			if err != nil {
				return nil, err
			}
			counts[r.NS] = c
		}
		o := owner(r)
		by := "nftables"
		if r.Kind == plan.KindPortBPF {
			by = "tc/BPF"
		}
		out = append(out, status.PortSecurity{Port: o[0], PortGroup: o[1], Link: r.Link, Policy: policySummary(r.Match), By: by, Counters: counts[r.NS][r.Link]})
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
