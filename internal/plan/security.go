package plan

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// PortPolicy is what the firewall of a host does on one switch port: the
// port group's security policy and ACL for the vNIC (or host port) behind
// it. Its canonical text is a KindPortSec resource's Match.
type PortPolicy struct {
	MAC string // the vNIC's MAC, as the spec gives or derives it
	// IPs are the addresses the vNIC may send from and claim in ARP and
	// neighbour advertisements (with GuardIP): the spec's, the unspecified
	// addresses (DHCP, ARP probes, duplicate address detection) and the
	// IPv6 link-local address the kernel derives from the MAC.
	IPs []netip.Addr
	// GuardMAC drops frames from any other source MAC (forged transmits
	// rejected).
	GuardMAC bool
	// GuardIP drops IPv4, IPv6, ARP and neighbour advertisements from or
	// for addresses other than IPs (IP spoofing rejected).
	GuardIP bool
	// GuardRA drops IPv6 router advertisements and redirects from the vNIC
	// (router advertisements rejected): only a router sends those.
	GuardRA bool
	// UnicastOnly delivers to the vNIC unicast only for MAC, besides
	// broadcast and multicast (promiscuous mode and MAC changes rejected).
	UnicastOnly bool
	// Default is the ACL's verdict for traffic no rule matches: "" when the
	// port group has no ACL, else ActionAllow or ActionDeny.
	Default string
	Rules   []PolicyRule
}

// PolicyRule is an ACL rule with its port groups resolved to addresses.
type PolicyRule struct {
	Allow bool
	In    bool   // ingress: traffic to the vNIC; else egress, from it
	Proto string // tcp, udp, icmp, icmpv6; "" for any
	SPort int
	DPort int
	// Src and Dst are the prefixes matched; nil means any. A port group
	// without members resolves to an empty, non-nil list: the rule matches
	// nothing until the group has one.
	Src, Dst []netip.Prefix
}

// The ACL verdicts of PortPolicy.Default.
const (
	ActionAllow = "allow"
	ActionDeny  = "deny"
)

// Empty reports whether the policy lets everything through, so that the
// port needs no firewall at all.
func (p PortPolicy) Empty() bool {
	return !p.GuardMAC && !p.GuardIP && !p.GuardRA && !p.UnicastOnly && p.Default == ""
}

// WithoutMAC is the policy of a port whose MAC vnet does not know (a QEMU
// guest's TAP without mac: in the spec, whose guest chose it): the checks
// that compare with the MAC (forged transmits, unicast filtering, and the
// IP guard, which checks the MAC in ARP and neighbour discovery) are off;
// the router advertisement guard and the ACL stay.
func (p PortPolicy) WithoutMAC() PortPolicy {
	p.GuardMAC, p.UnicastOnly, p.GuardIP, p.IPs = false, false, false, nil
	return p
}

// String is the canonical text: "mac M ip A,B guard mac,ip unicast-only acl
// deny; allow in tcp dport 443 from 0.0.0.0/0; ...".
func (p PortPolicy) String() string {
	var b strings.Builder
	b.WriteString("mac " + p.MAC)
	if len(p.IPs) > 0 {
		ips := make([]string, len(p.IPs))
		for i, a := range p.IPs {
			ips[i] = a.String()
		}
		b.WriteString(" ip " + strings.Join(ips, ","))
	}
	var guards []string
	if p.GuardMAC {
		guards = append(guards, "mac")
	}
	if p.GuardIP {
		guards = append(guards, "ip")
	}
	if p.GuardRA {
		guards = append(guards, "ra")
	}
	if len(guards) > 0 {
		b.WriteString(" guard " + strings.Join(guards, ","))
	}
	if p.UnicastOnly {
		b.WriteString(" unicast-only")
	}
	if p.Default != "" {
		b.WriteString(" acl " + p.Default)
	}
	for _, r := range p.Rules {
		b.WriteString("; " + r.String())
	}
	return b.String()
}

func (r PolicyRule) String() string {
	parts := []string{map[bool]string{true: ActionAllow, false: ActionDeny}[r.Allow], map[bool]string{true: "in", false: "out"}[r.In]}
	if r.Proto != "" {
		parts = append(parts, r.Proto)
	}
	if r.SPort != 0 {
		parts = append(parts, "sport", strconv.Itoa(r.SPort))
	}
	if r.DPort != 0 {
		parts = append(parts, "dport", strconv.Itoa(r.DPort))
	}
	if r.Src != nil {
		parts = append(parts, "from", prefixList(r.Src))
	}
	if r.Dst != nil {
		parts = append(parts, "to", prefixList(r.Dst))
	}
	return strings.Join(parts, " ")
}

func prefixList(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "none"
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		if p.IsSingleIP() {
			out[i] = p.Addr().String()
		} else {
			out[i] = p.String()
		}
	}
	return strings.Join(out, ",")
}

// ParsePortPolicy reads the canonical text back.
func ParsePortPolicy(text string) (PortPolicy, error) {
	var p PortPolicy
	parts := strings.Split(text, "; ")
	head := strings.Fields(parts[0])
	bad := func(format string, args ...any) (PortPolicy, error) {
		return PortPolicy{}, fmt.Errorf("port policy %q: %s", text, fmt.Sprintf(format, args...))
	}
	for i := 0; i < len(head); i++ {
		key := head[i]
		if key == "unicast-only" {
			p.UnicastOnly = true
			continue
		}
		if i+1 >= len(head) {
			return bad("%s has no value", key)
		}
		i++
		val := head[i]
		switch key {
		case "mac":
			p.MAC = val
		case "ip":
			for _, s := range strings.Split(val, ",") {
				a, err := netip.ParseAddr(s)
				if err != nil {
					return bad("address %q", s)
				}
				p.IPs = append(p.IPs, a)
			}
		case "guard":
			for _, g := range strings.Split(val, ",") {
				switch g {
				case "mac":
					p.GuardMAC = true
				case "ip":
					p.GuardIP = true
				case "ra":
					p.GuardRA = true
				default:
					return bad("unknown guard %q", g)
				}
			}
		case "acl":
			if val != ActionAllow && val != ActionDeny {
				return bad("acl %q", val)
			}
			p.Default = val
		default:
			return bad("unknown field %q", key)
		}
	}
	if p.MAC == "" {
		return bad("no mac")
	}
	for _, rt := range parts[1:] {
		r, err := parsePolicyRule(rt)
		if err != nil {
			return bad("%v", err)
		}
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

func parsePolicyRule(text string) (PolicyRule, error) {
	var r PolicyRule
	f := strings.Fields(text)
	if len(f) < 2 || (f[0] != ActionAllow && f[0] != ActionDeny) || (f[1] != "in" && f[1] != "out") {
		return r, fmt.Errorf("rule %q: want allow|deny in|out first", text)
	}
	r.Allow, r.In = f[0] == ActionAllow, f[1] == "in"
	for i := 2; i < len(f); i++ {
		switch f[i] {
		case "tcp", "udp", "icmp", "icmpv6":
			r.Proto = f[i]
			continue
		}
		if i+1 >= len(f) {
			return r, fmt.Errorf("rule %q: %s has no value", text, f[i])
		}
		key, val := f[i], f[i+1]
		i++
		var err error
		switch key {
		case "sport":
			r.SPort, err = strconv.Atoi(val)
		case "dport":
			r.DPort, err = strconv.Atoi(val)
		case "from":
			r.Src, err = parsePrefixList(val)
		case "to":
			r.Dst, err = parsePrefixList(val)
		default:
			err = fmt.Errorf("unknown field %q", key)
		}
		if err != nil {
			return r, fmt.Errorf("rule %q: %w", text, err)
		}
	}
	return r, nil
}

func parsePrefixList(s string) ([]netip.Prefix, error) {
	out := []netip.Prefix{}
	if s == "none" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p)
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("prefix %q", item)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Firewall texts: the Match of a KindFirewall resource. Every host
// namespace with a port policy has the bridge table; one whose ports have
// ACLs also tracks connections, so that replies to allowed connections
// pass. nftables' bridge family cannot track connections without
// nf_conntrack_bridge, so vnet has br_netfilter pass bridged IP traffic
// through the namespace's IPv4 and IPv6 hooks, where a small inet table
// marks packets of known connections for the bridge table's rules.
const (
	FirewallBridge    = "bridge table vnet"
	FirewallStateful  = "bridge table vnet, connection tracking by br_netfilter"
	ConntrackSysctlV4 = "net/bridge/bridge-nf-call-iptables"
	ConntrackSysctlV6 = "net/bridge/bridge-nf-call-ip6tables"
)

// FirewallTable is the name of an infrastructure's nftables tables (bridge
// and inet) in a host's own namespace (a host model's), which the machine
// and other infrastructures share: a KindFirewall or KindPortSec resource
// whose Name is empty is in the table "vnet" of a namespace of vnet's own.
func FirewallTable(infra string) string { return "vnet-" + infra }

// LinkLocal is the IPv6 link-local address the kernel derives from a MAC
// (EUI-64), the address a VM's stack sends router and neighbour
// solicitations from.
func LinkLocal(mac string) (netip.Addr, bool) {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return netip.Addr{}, false
	}
	var b [16]byte
	b[0], b[1] = 0xfe, 0x80
	b[8], b[9], b[10], b[11] = hw[0]^0x02, hw[1], hw[2], 0xff
	b[12], b[13], b[14], b[15] = 0xfe, hw[3], hw[4], hw[5]
	return netip.AddrFrom16(b), true
}

// HostPortSwitchPort is the switch-side port of a host port, where its
// port policy applies.
func HostPortSwitchPort(name string) string { return hostPortPeerName(name) }

// shortMatch is a resource's Match for people: a port policy of many
// rules is cut after its first ones, with its rule count and digest, so a
// plan line stays readable and a change still shows.
func shortMatch(r Resource) string {
	const keep = 240
	if r.Kind != KindPortSec && r.Kind != KindPortBPF && r.Kind != KindLB || len(r.Match) <= keep+40 {
		return r.Match
	}
	cut := strings.LastIndex(r.Match[:keep], "; ")
	if cut < 0 {
		cut = keep
	}
	if r.Kind == KindLB {
		return fmt.Sprintf("%s ... (%d load balancers in all, %s)", r.Match[:cut], strings.Count(r.Match, "; ")+1, SteerDigest(r.Match))
	}
	return fmt.Sprintf("%s; ... (%d rules in all, %s)", r.Match[:cut], strings.Count(r.Match, "; "), SteerDigest(r.Match))
}
