package dataplane

import (
	"github.com/vnet-project/vnet/internal/dataplane/nft"
	"github.com/vnet-project/vnet/internal/plan"
)

// hostConntrack are the settings a stateful firewall in a host's own
// namespace needs (a namespace of vnet's own has them on its netns
// resource): br_netfilter passes bridged IP traffic to the IP hooks.
var hostConntrack = []plan.Sysctl{
	{Key: plan.ConntrackSysctlV4, Value: "1"},
	{Key: plan.ConntrackSysctlV6, Value: "1", Optional: true},
}

// hostConntrackOff says how a host namespace's br_netfilter settings
// differ from what a stateful firewall there needs: their text, or "" when
// they are as needed (or cannot be read).
func hostConntrackOff(ns string) string {
	if text, err := readSysctlSet(ns, "", hostConntrack); err == nil && text != plan.WantedSysctls(hostConntrack) {
		return text
	}
	return ""
}

// firewallsIn returns the firewalls once the namespace's handle is open:
// the namespace's nftables socket is closed with its handle (forget,
// forgetReplaced), so that it never outlives the namespace it was opened
// in, kept alive by the socket itself.
func (l *Linux) firewallsIn(ns string) (*nft.Firewalls, error) {
	if _, err := l.nsHandle(ns); err != nil {
		return nil, err
	}
	return l.fw, nil
}

// ensureFirewall makes a host namespace's firewall (nft.EnsureFirewall).
// In a host's own namespace, a stateful firewall also turns br_netfilter's
// IP hooks on for bridged traffic (its settings are the namespace's, and
// stay on when the firewall goes: other users of the machine may rely on
// them, and on 1, the kernel's default once br_netfilter is loaded).
func (l *Linux) ensureFirewall(r plan.Resource) error {
	if r.Name != "" && r.Match == plan.FirewallStateful {
		if err := writeSysctls(r.NS, "", hostConntrack, plan.WantedSysctls(hostConntrack)); err != nil {
			return err
		}
	}
	fw, err := l.firewallsIn(r.NS)
	if err != nil {
		return err
	}
	return fw.EnsureFirewall(r)
}

// removeFirewall deletes a host namespace's firewall, if the namespace is
// still there.
func (l *Linux) removeFirewall(r plan.Resource) error {
	if !netnsExists(r.NS) {
		return nil
	}
	fw, err := l.firewallsIn(r.NS)
	if err != nil {
		return err
	}
	return fw.RemoveFirewall(r)
}

// ensurePortSec makes a port's policy (nft.EnsurePortSec).
func (l *Linux) ensurePortSec(r plan.Resource) error {
	fw, err := l.firewallsIn(r.NS)
	if err != nil {
		return err
	}
	return fw.EnsurePortSec(r)
}

// ensurePortSecs makes the policies of several ports of one firewall
// together (nft.EnsurePortSecs).
func (l *Linux) ensurePortSecs(rs []plan.Resource) error {
	fw, err := l.firewallsIn(rs[0].NS)
	if err != nil {
		return nft.ErrNotBatched
	}
	return fw.EnsurePortSecs(rs)
}

// removePortSec deletes a port's policy, if its namespace is still there.
func (l *Linux) removePortSec(r plan.Resource) error {
	if !netnsExists(r.NS) {
		return nil
	}
	fw, err := l.firewallsIn(r.NS)
	if err != nil {
		return err
	}
	return fw.RemovePortSec(r)
}

// FirewallCounters reads, for each port of a host namespace, the packets
// its policy has counted, by label (forged-mac, acl[0], ...): in every
// firewall of vnet's there and in its port programs (portProgCounters). A
// namespace without either has none.
// Equivalent to: nft -n NS list table bridge vnet (the counters)
func (l *Linux) FirewallCounters(ns string) (map[string]map[string]uint64, error) {
	if !netnsExists(ns) {
		return map[string]map[string]uint64{}, nil
	}
	out, err := l.fw.Counters(ns)
	if err != nil {
		return nil, err
	}
	return out, l.portProgCounters(ns, out)
}
