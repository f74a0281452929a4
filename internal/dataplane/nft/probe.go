package nft

import (
	"github.com/vnet-project/vnet/internal/dataplane/feature"
	"github.com/vnet-project/vnet/internal/plan"
)

// Probe checks, in the probe's scratch namespace, that the kernel has what
// the plan's firewalls need: nftables' bridge family for port security,
// and for stateful ACLs br_netfilter (which brNetfilter checks for) and
// conntrack.
func (f *Firewalls) Probe(ns string, needs []plan.Resource, brNetfilter func(ns string) error) error {
	want := ""
	for _, r := range needs {
		if r.Kind == plan.KindFirewall && (want == "" || r.Match == plan.FirewallStateful) {
			want = r.Match
		}
	}
	if want == "" {
		return nil
	}
	if want == plan.FirewallStateful {
		if err := brNetfilter(ns); err != nil {
			return &feature.Error{Feature: "br_netfilter, which ACLs need to track connections (vnet has no stateless ACLs; port security without an ACL does not need it)",
				Hint: "modprobe br_netfilter (CONFIG_BRIDGE_NETFILTER)", Err: err}
		}
	}
	fw := plan.Resource{Kind: plan.KindFirewall, NS: ns, Match: want}
	if err := f.EnsureFirewall(fw); err != nil {
		return err
	}
	port := plan.PortPolicy{MAC: "02:00:00:00:00:03", GuardMAC: true, UnicastOnly: true, Default: plan.ActionDeny}
	return f.EnsurePortSec(plan.Resource{Kind: plan.KindPortSec, NS: ns, Link: "pb", Match: port.String()})
}
