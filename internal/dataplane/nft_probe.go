package dataplane

import (
	"errors"
	"os"

	"github.com/vnet-project/vnet/internal/plan"
)

// probeFirewall checks, in the probe's scratch namespace, that the kernel
// has what the plan's firewalls need: nftables' bridge family for port
// security, and for stateful ACLs br_netfilter and conntrack.
func (l *Linux) probeFirewall(ns string, needs []plan.Resource) error {
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
		err := inNS(ns, func() error {
			_, err := os.Stat("/proc/sys/" + plan.ConntrackSysctlV4)
			return err
		})
		if errors.Is(err, os.ErrNotExist) {
			return &FeatureError{Feature: "br_netfilter (stateful ACLs)",
				Hint: "modprobe br_netfilter (CONFIG_BRIDGE_NETFILTER): vnet tracks the connections of bridged traffic in the IP hooks br_netfilter passes it through", Err: err}
		}
	}
	fw := plan.Resource{Kind: plan.KindFirewall, NS: ns, Match: want}
	if err := l.ensureFirewall(fw); err != nil {
		return err
	}
	port := plan.PortPolicy{MAC: "02:00:00:00:00:03", GuardMAC: true, UnicastOnly: true, Default: plan.ActionDeny}
	return l.ensurePortSec(plan.Resource{Kind: plan.KindPortSec, NS: ns, Link: "pb", Match: port.String()})
}
