package plan

import (
	"net/netip"
)

// UnderlayLinkName is, on one machine, the link of a host's namespace that
// holds its underlay address when none of its NICs does: a cable to the
// emulated physical switch that carries the host's tunnels.
const UnderlayLinkName = "vnet-underlay"

// underlayPort is the node-relative name the physical switch's port for an
// underlay link is derived from. A NIC's name cannot start with "_".
const underlayPort = "_underlay"

// labUnderlay is a host that needs an underlay link on one machine.
type labUnderlay struct {
	host, addr string
	mtu        int
}

// labNetworks are the virtual networks on one machine: each host's
// namespace holds what a host agent makes on a real host (networks), so a
// network that spans hosts goes from host namespace to host namespace over
// VXLAN, across the emulated physical switch. Its tunnels start at the
// host's underlay address: on the host port that has it, else on an
// underlay link that the lab adds to the physical switch (underlays).
func (m *modeler) labNetworks() (out []Resource, underlays []labUnderlay) {
	if len(m.s.Networks) == 0 {
		return nil, nil
	}
	for i := range m.s.Hosts {
		h := &m.s.Hosts[i]
		rs := networks(m.s, h.Name, m.ns(h.Name))
		out = append(out, rs...)
		mtu := 0
		for _, r := range rs {
			// Tunnels of a network with a portgroup start at a host port's
			// address, which the lab makes anyway; only those on the
			// underlay address may need a link.
			if r.Kind == KindVxlan && h.Underlay != "" && r.Local == h.Underlay {
				mtu = max(mtu, r.MTU+TunnelOverhead(r.Local))
			}
		}
		if mtu == 0 || m.holdsAddr(h.Name, h.Underlay) {
			continue
		}
		underlays = append(underlays, labUnderlay{host: h.Name, addr: h.Underlay, mtu: max(mtu, 1500)})
	}
	return out, underlays
}

// holdsAddr reports whether one of the host's host ports (a VMkernel
// port, on a switch whose uplinks reach the physical switch) or NICs has
// the address: then the tunnels start there, and cross the emulated
// NICs, their line rates and Network I/O Control, as on a real host.
func (m *modeler) holdsAddr(host, addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	has := func(cidr string) bool {
		p, err := netip.ParsePrefix(cidr)
		return err == nil && p.Addr() == a
	}
	for _, hp := range m.s.HostPorts {
		if hp.Host == host && has(hp.IP) {
			return true
		}
	}
	h, _ := m.s.Host(host)
	for _, n := range h.NICs {
		if has(n.IP) {
			return true
		}
	}
	return false
}

// underlayLink is a host's underlay link: a veth from its namespace to the
// physical switch, unshaped (it is no NIC of the spec), holding the host's
// underlay address with a prefix that puts every other host's underlay
// address of the same family on the link (underlayBits).
func (m *modeler) underlayLink(u labUnderlay) {
	ns, phys := m.ns(u.host), m.ns(PhysSwitch)
	owner := "underlay of " + u.host
	m.add(Resource{Kind: KindVeth, Owner: owner,
		A: End{NS: ns, Name: UnderlayLinkName, MAC: StableMAC(m.s.Name, "underlay/"+u.host), MTU: u.mtu},
		B: End{NS: phys, Name: physPortName(u.host, underlayPort), MAC: StableMAC(m.s.Name, "punderlay/"+u.host), MTU: u.mtu, Master: PhysBridge}})
	a, _ := netip.ParseAddr(u.addr)
	m.add(Resource{Kind: KindAddr, NS: ns, Link: UnderlayLinkName,
		CIDR: netip.PrefixFrom(a, m.underlayBits(a)).String(), Owner: owner})
}

// underlayBits is the prefix length of a host's underlay address on its
// underlay link: the longest prefix that all hosts' underlay addresses of
// its family share, so each is on the link without a route, but never
// longer than /24 (IPv4) or /64 (IPv6), as an operator would number a
// segment. It depends on the hosts only, so a VM moving leaves it alone.
func (m *modeler) underlayBits(a netip.Addr) int {
	bits := 24
	if a.Is6() {
		bits = 64
	}
	for _, h := range m.s.Hosts {
		b, err := netip.ParseAddr(h.Underlay)
		if err != nil || b.Is4() != a.Is4() {
			continue
		}
		bits = min(bits, commonBits(a, b))
	}
	return bits
}

// commonBits is how many leading bits two addresses of one family share.
func commonBits(a, b netip.Addr) int {
	x, y := a.AsSlice(), b.AsSlice()
	for i := range x {
		if d := x[i] ^ y[i]; d != 0 {
			n := 0
			for d&0x80 == 0 {
				d <<= 1
				n++
			}
			return i*8 + n
		}
	}
	return len(x) * 8
}
