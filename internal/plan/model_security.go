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
// Where the kernel runs vnet's port programs (Options.PortPrograms), each
// such port gets them instead (KindPortBPF), which track connections
// themselves: no firewall, no IP hooks.
func (m *modeler) security() {
	type fw struct {
		ns, host string
		stateful bool
	}
	var hosts []*fw
	byNS := map[string]*fw{}
	port := func(host, link string, p PortPolicy, owner string) {
		if p.Empty() {
			return
		}
		ns := m.ns(host)
		if m.opt.PortPrograms {
			m.add(Resource{Kind: KindPortBPF, NS: ns, Link: link, Match: p.String(), Owner: owner})
			return
		}
		f := byNS[ns]
		if f == nil {
			f = &fw{ns: ns, host: host}
			byNS[ns] = f
			hosts = append(hosts, f)
		}
		f.stateful = f.stateful || p.Default != ""
		m.add(Resource{Kind: KindPortSec, NS: ns, Link: link, Match: p.String(), Owner: owner})
	}
	var lb *clientBalancers
	if m.s.HasBalancers() {
		lb = newClientBalancers(m.s, nil)
	}
	for vi := range m.s.VMs {
		vm := &m.s.VMs[vi]
		if m.skips(vm) {
			continue
		}
		for i := range vm.NICs {
			n := &vm.NICs[i]
			mac := m.vnicMAC(vm, i)
			var p PortPolicy
			owner := fmt.Sprintf("vm %s eth%d on %s", vm.Name, i, n.PortGroup)
			var shaped, macChanges bool
			if net, ok := m.network(n.Network); ok {
				sec := net.EffectiveSecurity()
				p = m.policy(sec, net.ACL, mac, n.IP, n.IP6)
				p.Switch, macChanges = NetBridgeName(m.s.Name, n.Network), sec.MACChanges
				owner = fmt.Sprintf("vm %s eth%d on network %s", vm.Name, i, n.Network)
			} else if pg, sw, ok := m.s.PortGroup(n.PortGroup); ok {
				sec := pg.EffectiveSecurity()
				p = m.portPolicy(pg, mac, n.IP)
				p.Switch, macChanges = sw.Name, sec.MACChanges
				shaped = pg.Shaping != nil && pg.Shaping.Ingress != nil
			} else {
				continue
			}
			if n.TapName() != "" && n.MAC == "" {
				p = p.WithoutMAC()
			}
			if m.opt.PortPrograms {
				if !n.IsConnected() {
					p.Switch = ""
				}
				balanced := lb != nil && len(lb.of(*n)) > 0
				// A paused port's switch end is down; a frame handed past
				// the bridge would still reach the VM behind it.
				p.Direct = PortDirect(n, p, shaped, macChanges, balanced) && !m.opt.Paused.VNIC(vm.Name, n)
			} else {
				p.Switch = ""
			}
			port(vm.Host, VNICPortName(m.s.Name, vm.Name, i), p, owner)
		}
	}
	for i, hp := range m.s.HostPorts {
		name := m.s.HostPortName(i)
		if pg, sw, ok := m.s.PortGroup(hp.PortGroup); ok {
			p := m.portPolicy(pg, m.hostPortMAC(hp.Host, name), hp.IP)
			if m.opt.PortPrograms {
				// A host port's own end is in the host's namespace, beside
				// its switch port: it sends past the bridge, takes nothing.
				p.Switch = sw.Name
			}
			port(hp.Host, hostPortPeerName(name), p, fmt.Sprintf("hostport %s/%s on %s", hp.Host, name, hp.PortGroup))
		}
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
	return m.policy(pg.EffectiveSecurity(), pg.ACL, mac, cidr)
}

// policy resolves a security policy and ACL (a port group's or a
// network's) for one port with that MAC and addresses (a network vNIC may
// have an IPv4 and an IPv6 one).
func (m *modeler) policy(sec spec.SecurityPolicy, acl *spec.ACL, mac string, cidrs ...string) PortPolicy {
	p := PortPolicy{MAC: mac, GuardMAC: !sec.ForgedTransmits, GuardRA: !sec.RouterAdvertisements, UnicastOnly: !sec.Promiscuous && !sec.MACChanges}
	// Without an address in the spec vnet does not know which addresses
	// the vNIC may use, so it checks none.
	for _, cidr := range cidrs {
		if pfx, err := netip.ParsePrefix(cidr); err == nil && !sec.IPSpoofing {
			p.GuardIP = true
			p.IPs = append(p.IPs, pfx.Addr())
		}
	}
	if p.GuardIP {
		p.IPs = append(p.IPs, netip.IPv4Unspecified(), netip.IPv6Unspecified())
		if ll, ok := LinkLocal(mac); ok {
			p.IPs = append(p.IPs, ll)
		}
	}
	if acl.Filters() {
		p.Default = ActionAllow
		if acl.Default == spec.ActionDeny {
			p.Default = ActionDeny
		}
		for _, r := range acl.Rules {
			p.Rules = append(p.Rules, PolicyRule{Allow: r.Action == spec.ActionAllow, In: r.Direction == spec.DirIngress,
				Proto: r.Proto, SPort: r.SPort, DPort: r.DPort, Src: m.peer(r.From), Dst: m.peer(r.To)})
		}
	}
	return p
}

// peer resolves one end of a rule: nil for any, a port group's or
// network's members' addresses (an empty list while it has none), or the
// prefix. Members are those of the whole spec, on every host.
func (m *modeler) peer(p *spec.Peer) []netip.Prefix {
	// Every port of a group with an ACL names the same peers: resolve
	// each once, not once per port (each resolution reads every VM).
	members := func(key string, addrs func() []netip.Addr) []netip.Prefix {
		if out, ok := m.peers[key]; ok {
			return out
		}
		out := []netip.Prefix{}
		for _, a := range addrs() {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
		if m.peers == nil {
			m.peers = map[string][]netip.Prefix{}
		}
		m.peers[key] = out
		return out
	}
	switch {
	case p == nil:
		return nil
	case p.PortGroup != "":
		return members("portgroup/"+p.PortGroup, func() []netip.Addr { return m.s.PortGroupMembers(p.PortGroup) })
	case p.Network != "":
		return members("network/"+p.Network, func() []netip.Addr { return m.s.NetworkMembers(p.Network) })
	}
	pfx, err := p.Prefix()
	if err != nil {
		return []netip.Prefix{} // validated; never matches rather than matching everything
	}
	return []netip.Prefix{pfx}
}

// PortDirect reports whether a vNIC's port may be handed frames for its
// MAC past the bridge (PortPolicy.Direct): a connected vNIC on a veth
// whose far end vnet made in the VM's (or the attached container's)
// namespace, whose policy filters by its MAC, rejects MAC changes (a guest
// that changed its MAC would go on receiving frames for the one vnet gave
// it, which the bridge's way lets it drop), and has nothing between the
// bridge and the VM that such frames would pass by: no shaper on the
// switch's end, no segmenting for the vNIC's GRO, no load balancers
// (balanced: the port's egress hook translates their backends' replies
// back, which a frame handed past the bridge skips).
func PortDirect(n *spec.VNIC, p PortPolicy, shaped, macChanges, balanced bool) bool {
	return n.IsConnected() && n.TapName() == "" && p.MAC != "" && !macChanges && !shaped && !balanced &&
		(n.Offloads == nil || n.Offloads.GRO == nil)
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

// hostSecurity places the lab's port policies (lab: its KindPortSec
// resources, among others) of the host's vNICs on their switch ports on a
// real host: a VM's port, an attached namespace's port or a TAP. They go in
// the infrastructure's own tables there (FirewallTable), since the host's
// namespace is the machine's, shared with other infrastructures, with the
// host's firewall when any port has a policy. Host ports are not part of a
// host's part (hostModel), so neither are their policies.
func hostSecurity(infra, host, here, labNS string, ports map[string]string, lab []Resource) []Resource {
	var out []Resource
	var progs []Resource
	for _, r := range lab {
		port, ok := ports[r.Link]
		if (r.Kind != KindPortSec && r.Kind != KindPortBPF) || r.NS != labNS || !ok {
			continue
		}
		r.NS, r.Link = here, port
		if r.Kind == KindPortBPF {
			progs = append(progs, r)
			continue
		}
		r.Name = FirewallTable(infra)
		out = append(out, r)
	}
	if len(out) == 0 {
		return progs
	}
	fw := hostFirewall(Resource{Kind: KindFirewall, NS: here, Name: FirewallTable(infra), Owner: HostOwner(infra, "firewall of host "+host)}, out)
	return append(append([]Resource{fw}, out...), progs...)
}

// hostFirewall is a host's firewall fw for the port policies it holds:
// stateful when any policy has a default.
func hostFirewall(fw Resource, policies []Resource) Resource {
	fw.Match = FirewallBridge
	for _, r := range policies {
		if p, err := ParsePortPolicy(r.Match); err == nil && p.Default != "" {
			fw.Match = FirewallStateful
			break
		}
	}
	return fw
}
