package plan

import (
	"fmt"
	"net/netip"

	"github.com/vnet-project/vnet/internal/spec"
)

// security adds, for every vNIC and host port whose port group's policy
// filters anything, the port's firewall rules (KindPortSec), and for each
// host namespace with such ports its firewall (KindFirewall). A host whose
// ports have ACLs tracks connections through br_netfilter, so its
// namespace passes bridged IP traffic to the IP hooks (see FirewallStateful).
func (m *modeler) security() {
	type fw struct {
		ns, host string
		stateful bool
	}
	var hosts []*fw
	byNS := map[string]*fw{}
	port := func(host, link, mac, cidr, pgName, owner string) {
		pg, _, ok := m.s.PortGroup(pgName)
		if !ok {
			return
		}
		p := m.portPolicy(pg, mac, cidr)
		if p.Empty() {
			return
		}
		ns := m.ns(host)
		f := byNS[ns]
		if f == nil {
			f = &fw{ns: ns, host: host}
			byNS[ns] = f
			hosts = append(hosts, f)
		}
		f.stateful = f.stateful || p.Default != ""
		m.add(Resource{Kind: KindPortSec, NS: ns, Link: link, Match: p.String(), Owner: owner})
	}
	for _, vm := range m.s.VMs {
		for i, n := range vm.NICs {
			port(vm.Host, VNICPortName(vm.Name, i), m.vnicMAC(&vm, i), n.IP, n.PortGroup,
				fmt.Sprintf("vm %s eth%d on %s", vm.Name, i, n.PortGroup))
		}
	}
	for i, hp := range m.s.HostPorts {
		name := m.s.HostPortName(i)
		port(hp.Host, hostPortPeerName(name), m.hostPortMAC(hp.Host, name), hp.IP, hp.PortGroup,
			fmt.Sprintf("hostport %s/%s on %s", hp.Host, name, hp.PortGroup))
	}
	for _, f := range hosts {
		text := FirewallBridge
		if f.stateful {
			text = FirewallStateful
			m.setNamespaceSysctl(f.ns, ConntrackSysctlV4, "1")
			m.setNamespaceSysctl(f.ns, ConntrackSysctlV6, "1")
		}
		m.add(Resource{Kind: KindFirewall, NS: f.ns, Match: text, Owner: "host " + f.host})
	}
}

// portPolicy resolves a port group's security and ACL for one port.
func (m *modeler) portPolicy(pg *spec.PortGroup, mac, cidr string) PortPolicy {
	sec := pg.EffectiveSecurity()
	p := PortPolicy{MAC: mac, GuardMAC: !sec.ForgedTransmits, GuardRA: !sec.RouterAdvertisements, UnicastOnly: !sec.Promiscuous && !sec.MACChanges}
	// Without an address in the spec vnet does not know which addresses
	// the vNIC may use, so it checks none.
	if pfx, err := netip.ParsePrefix(cidr); err == nil && !sec.IPSpoofing {
		p.GuardIP = true
		p.IPs = append(p.IPs, pfx.Addr(), netip.IPv4Unspecified(), netip.IPv6Unspecified())
		if ll, ok := LinkLocal(mac); ok {
			p.IPs = append(p.IPs, ll)
		}
	}
	if pg.HasACL() {
		p.Default = ActionAllow
		if pg.ACL.Default == spec.ActionDeny {
			p.Default = ActionDeny
		}
		for _, r := range pg.ACL.Rules {
			p.Rules = append(p.Rules, PolicyRule{Allow: r.Action == spec.ActionAllow, In: r.Direction == spec.DirIngress,
				Proto: r.Proto, SPort: r.SPort, DPort: r.DPort, Src: m.peer(r.From), Dst: m.peer(r.To)})
		}
	}
	return p
}

// peer resolves one end of a rule: nil for any, a port group's members'
// addresses (an empty list while it has none), or the prefix.
func (m *modeler) peer(p *spec.Peer) []netip.Prefix {
	switch {
	case p == nil:
		return nil
	case p.PortGroup != "":
		out := []netip.Prefix{}
		for _, a := range m.s.PortGroupMembers(p.PortGroup) {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
		return out
	}
	pfx, err := p.Prefix()
	if err != nil {
		return []netip.Prefix{} // validated; never matches rather than matching everything
	}
	return []netip.Prefix{pfx}
}

// setNamespaceSysctl changes one of vnet's settings in a namespace the
// model already holds.
func (m *modeler) setNamespaceSysctl(ns, key, value string) {
	for i := range m.out {
		if r := &m.out[i]; r.Kind == KindNetns && r.Name == ns {
			values := SysctlValues(r.Sysctls)
			values[key] = value
			r.Sysctls = SysctlText(NamespaceSysctls, values)
		}
	}
}
