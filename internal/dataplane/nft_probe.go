package dataplane

import (
	"errors"
	"fmt"
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
		if err := l.brNetfilter(ns); err != nil {
			return &FeatureError{Feature: "br_netfilter, which ACLs need to track connections (vnet has no stateless ACLs; port security without an ACL does not need it)",
				Hint: "modprobe br_netfilter (CONFIG_BRIDGE_NETFILTER)", Err: err}
		}
	}
	fw := plan.Resource{Kind: plan.KindFirewall, NS: ns, Match: want}
	if err := l.ensureFirewall(fw); err != nil {
		return err
	}
	port := plan.PortPolicy{MAC: "02:00:00:00:00:03", GuardMAC: true, UnicastOnly: true, Default: plan.ActionDeny}
	return l.ensurePortSec(plan.Resource{Kind: plan.KindPortSec, NS: ns, Link: "pb", Match: port.String()})
}

// brNetfilter checks that br_netfilter is there to pass bridged IP traffic
// through the namespace's IP hooks: its settings exist in every namespace
// once the module is loaded, and in none before.
func (l *Linux) brNetfilter(ns string) error {
	if l.WithoutBrNetfilter {
		return fmt.Errorf("stat /proc/sys/%s: %w (simulated)", plan.ConntrackSysctlV4, os.ErrNotExist)
	}
	err := inNS(ns, func() error {
		_, err := os.Stat("/proc/sys/" + plan.ConntrackSysctlV4)
		return err
	})
	if errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
