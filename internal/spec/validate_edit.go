package spec

import (
	"net"
	"net/netip"
	"strings"
)

// validateEdit is Validate of doc, whose spec is one that validated with
// its VMs edited: some taken out, and those at written (indexes of its
// VMs) written in. When the edit is one validatesAfterEdit can tell is
// valid, only the VMs written are checked, so that editing one VM of
// thousands does not check them all again; otherwise it is Validate.
func validateEdit(doc *Document, written []int) Errors {
	if validatesAfterEdit(doc, written) {
		doc.valid = true
		return nil
	}
	return Validate(doc)
}

// validatesAfterEdit reports whether doc validates, given that its spec
// is one that validated with its VMs edited (see validateEdit). It checks
// only what such an edit can break: each VM written on its own, as
// Validate checks a VM, and against the rest of the spec what must be
// unique (VM names, addresses and MACs in each address space, TAP
// devices). A VM taken out breaks no check of the others: every check
// that reads more than one VM asks that something be unique, or is of the
// hosts a network spans, which fewer VMs only shrink. The exception is a
// load balancer's backend, which names a VM. It reports false when a
// check fails, and when it cannot tell: in a spec with load balancers, or
// when a VM written is on a network whose span it could break
// (spanAlone), so that Validate says.
func validatesAfterEdit(doc *Document, written []int) bool {
	return validatesAfterEditWith(doc, written, (*validator).clashesWithRest)
}

// restClash reports whether a VM not written has what must be unique and
// a VM written has (validator.clashesWithRest).
type restClash func(v *validator, written []int, names, taps map[string]string) bool

// validatesAfterEditWith is validatesAfterEdit whose check of the VMs
// written against the rest is clashes.
func validatesAfterEditWith(doc *Document, written []int, clashes restClash) bool {
	s := doc.Spec
	if s.HasBalancers() {
		return false
	}
	v := &validator{doc: doc, s: s, x: newIndex(s), ips: map[netip.Addr]string{}, macs: map[string]string{}}
	for _, i := range written {
		if i < 0 || i >= len(s.VMs) {
			return false
		}
		for _, n := range s.VMs[i].NICs {
			if n.Network != "" && !v.spanAlone(n.Network) {
				return false
			}
		}
	}
	names, taps := map[string]string{}, map[string]string{}
	subnets := v.portGroupSubnets()
	for _, i := range written {
		v.checkVM(i, names)
		v.checkAttachedVM(i, taps)
		v.checkVMSubnets(i, subnets)
	}
	v.checkCarriedSwitches(written)
	return len(v.errs) == 0 && !clashes(v, written, names, taps)
}

// spanAlone reports whether a vNIC added to the network breaks no check
// of the hosts the network spans: the network's tunnels do not go over a
// port group (whose host ports checkNetworkPortGroups checks on each
// host), and every host that runs VMs has an underlay address, as a
// network over two hosts needs (checkNetworkUnderlay). The network's
// addresses and MACs are checked with the VM's (checkNetworkVNIC).
func (v *validator) spanAlone(network string) bool {
	if n, ok := v.x.networks[network]; ok && n.PortGroup != "" {
		return false
	}
	for _, h := range v.s.Hosts {
		if !h.Native && h.Underlay == "" {
			return false
		}
	}
	return true
}

// portGroupSubnets are the subnets of the port groups that have one, by
// name, as checkPortGroupSubnets makes them.
func (v *validator) portGroupSubnets() map[string]netip.Prefix {
	subnets := map[string]netip.Prefix{}
	for i, sw := range v.s.Switches {
		for j, pg := range sw.PortGroups {
			if pg.Subnet == "" {
				continue
			}
			if pfx, ok := v.checkPortGroupSubnet(indexPath(indexPath("switches", i)+".portgroups", j), pg); ok {
				subnets[pg.Name] = pfx
			}
		}
	}
	return subnets
}

// checkCarriedSwitches refuses a vNIC of the VMs at written on the switch
// of a port group that carries a network's tunnels, as
// checkNetworkPortGroups does.
func (v *validator) checkCarriedSwitches(written []int) {
	carried := map[*Switch]string{} // switch -> the first network's name
	for i := range v.s.Networks {
		if n := &v.s.Networks[i]; n.PortGroup != "" {
			if sw, ok := v.x.pgSwitch[n.PortGroup]; ok {
				if _, seen := carried[sw]; !seen {
					carried[sw] = indexPath("networks", i) + ".portgroup"
				}
			}
		}
	}
	if len(carried) == 0 {
		return
	}
	for _, i := range written {
		for j, nic := range v.s.VMs[i].NICs {
			if sw, ok := v.x.pgSwitch[nic.PortGroup]; ok && nic.Network == "" {
				if by, carries := carried[sw]; carries {
					v.errf(indexPath(indexPath("vms", i)+".nics", j)+".portgroup",
						"switch %s carries virtual networks' tunnels (%s): a VM on it could reach their tunnel addresses; put the VM on another switch", sw.Name, by)
				}
			}
		}
	}
}

// clashesWithRest reports whether a VM of the spec other than those at
// written, a host port or a host's NIC has a name, an address, a MAC or
// a TAP device that the VMs written have: names, taps, v.ips and v.macs,
// as checking them made these. The others' own are unique among
// themselves, as the spec they come from validated.
func (v *validator) clashesWithRest(written []int, names, taps map[string]string) bool {
	isWritten := make([]bool, len(v.s.VMs))
	for _, i := range written {
		isWritten[i] = true
	}
	// An IPv4 address has one text (netip refuses leading zeros), so
	// that the others' are looked up by their text, without parsing
	// thousands of them; IPv6 addresses are parsed.
	addrs := make(map[string]bool, len(v.ips))
	for a := range v.ips {
		addrs[a.String()] = true
	}
	for i := range v.s.VMs {
		if isWritten[i] {
			continue
		}
		vm := &v.s.VMs[i]
		if _, dup := names[vm.Name]; dup {
			return true
		}
		for _, n := range vm.NICs {
			if a := n.Attach; a != nil && a.Tap != "" {
				if _, dup := taps[vm.Host+"/"+a.Tap]; dup {
					return true
				}
			}
			if n.Network != "" {
				if v.networkClash(n) {
					return true
				}
				continue
			}
			if n.IP != "" && addrs[addrText(n.IP)] || n.MAC != "" && macIn(v.macs, n.MAC) {
				return true
			}
		}
	}
	return hostsHave(v.s, addrs)
}

// hostsHave reports whether a host port or a host's NIC has one of addrs
// (by their text, as addrText writes them).
func hostsHave(s *Spec, addrs map[string]bool) bool {
	if len(addrs) == 0 {
		return false
	}
	for _, hp := range s.HostPorts {
		if hp.IP != "" && addrs[addrText(hp.IP)] {
			return true
		}
	}
	for _, h := range s.Hosts {
		for _, n := range h.NICs {
			if n.IP != "" && addrs[addrText(n.IP)] {
				return true
			}
		}
	}
	return false
}

// addrText is the address of an interface address as netip writes it:
// the text before the prefix length, parsed only when it is not IPv4's.
func addrText(cidr string) string {
	a, _, _ := strings.Cut(cidr, "/")
	if !strings.Contains(a, ":") {
		return a
	}
	if p, err := netip.ParsePrefix(cidr); err == nil {
		return p.Addr().String()
	}
	return a
}

// networkClash reports whether a network vNIC of a VM not written has an
// address or a MAC that one written has in its network's address space
// (v.netIPs, which holds the networks' gateways too: no vNIC of a spec
// that validated has one of those).
func (v *validator) networkClash(n VNIC) bool {
	if v.netIPs == nil {
		return false // no VM written is on a network
	}
	net, ok := v.x.networks[n.Network]
	if !ok {
		return false
	}
	space := v.x.spaces[net]
	for _, cidr := range []string{n.IP, n.IP6} {
		if cidr == "" {
			continue
		}
		if p, err := netip.ParsePrefix(cidr); err == nil {
			if _, dup := v.netIPs[space][p.Addr()]; dup {
				return true
			}
		}
	}
	return n.MAC != "" && macIn(v.netMACs[space], n.MAC)
}

// macIn reports whether mac is one of macs, keyed as checkVNICMAC keys
// them.
func macIn(macs map[string]string, mac string) bool {
	if len(macs) == 0 {
		return false
	}
	if canonicalMAC(mac) {
		// As vnet and runtimes write them: no parse for each of thousands.
		_, dup := macs[mac]
		return dup
	}
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return false
	}
	_, dup := macs[strings.ToLower(hw.String())]
	return dup
}

// canonicalMAC reports whether mac is a 48-bit MAC as checkVNICMAC keys
// it: six pairs of lower-case hex digits between colons.
func canonicalMAC(mac string) bool {
	if len(mac) != 17 {
		return false
	}
	for i := 0; i < len(mac); i++ {
		c := mac[i]
		switch {
		case i%3 == 2:
			if c != ':' {
				return false
			}
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		default:
			return false
		}
	}
	return true
}
