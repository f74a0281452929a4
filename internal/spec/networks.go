package spec

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Network is an isolated virtual network: one broadcast domain on every
// host where it has a vNIC, carried between hosts over VXLAN with its own
// VNI. Networks on one router route to each other; nothing else crosses
// between networks, and addresses and MACs may repeat in networks of
// different routers (docs/networks.md).
type Network struct {
	Name    string `yaml:"name"`
	VNI     int    `yaml:"vni"`     // 1..16777215; allocated and stored with the spec when left out
	Subnet  string `yaml:"subnet"`  // IPv4, e.g. 10.1.0.0/24: its vNICs' ip must be in it
	Gateway string `yaml:"gateway"` // the router's IPv4 address on the network, in Subnet
	// Subnet6 and Gateway6 are the network's IPv6 side, beside or instead
	// of the IPv4 one: its vNICs' ip6 must be in Subnet6, and the router
	// holds Gateway6.
	Subnet6  string `yaml:"subnet6"`  // e.g. fd00:1::/64
	Gateway6 string `yaml:"gateway6"` // e.g. fd00:1::1
	Router   string `yaml:"router"`   // networks on one router route to each other
	MTU      int    `yaml:"mtu"`      // default DefaultNetworkMTU
	// PortGroup, when set, carries the network's tunnels: each host's
	// tunnel address is its host port on that port group instead of its
	// underlay, so the tunnels leave through the port group's switch and
	// its uplinks, with the port group's pool, shaping and teaming.
	PortGroup string `yaml:"portgroup"`
	// Security and ACL are as on a port group (security.go), with the same
	// defaults: a network vNIC sends only from its own MAC, receives only
	// unicast for it, and sends no IPv6 router advertisements.
	Security *Security `yaml:"security"`
	ACL      *ACL      `yaml:"acl"`
	// LoadBalancers spread connections to a VIP over backends, translated
	// on the clients' hosts (loadbalancer.go).
	LoadBalancers []LoadBalancer `yaml:"loadBalancers"`
}

// TunnelPort returns the host port on the network's port group on a host:
// the network's tunnel address there (docs/networks.md). It is false for a
// network without a port group and for a host without such a port.
func (s *Spec) TunnelPort(n *Network, host string) (int, bool) {
	if n.PortGroup == "" {
		return 0, false
	}
	for i, hp := range s.HostPorts {
		if hp.Host == host && hp.PortGroup == n.PortGroup {
			return i, true
		}
	}
	return 0, false
}

// TunnelAddress is the address a host's tunnels of the network start and
// end at: its host port's on the network's port group, or its underlay.
func (s *Spec) TunnelAddress(n *Network, host string) string {
	if i, ok := s.TunnelPort(n, host); ok {
		if p, err := netip.ParsePrefix(s.HostPorts[i].IP); err == nil {
			return p.Addr().String()
		}
		return ""
	}
	if h, ok := s.Host(host); ok {
		return h.Underlay
	}
	return ""
}

// EffectiveSecurity resolves the network's security policy, with a port
// group's defaults.
func (n *Network) EffectiveSecurity() SecurityPolicy { return n.Security.Effective() }

// HasACL reports whether the network filters traffic by an ACL.
func (n *Network) HasACL() bool { return n.ACL.Filters() }

// NetworkMembers returns the addresses (without prefix length) of every
// connected vNIC on the network, in spec order.
func (s *Spec) NetworkMembers(network string) []netip.Addr {
	var out []netip.Addr
	for _, vm := range s.VMs {
		for _, n := range vm.NICs {
			if n.Network != network || !n.IsConnected() {
				continue
			}
			for _, ip := range []string{n.IP, n.IP6} {
				if p, err := netip.ParsePrefix(ip); err == nil {
					out = append(out, p.Addr())
				}
			}
		}
	}
	return out
}

// DefaultNetworkMTU leaves room for VXLAN's 50 bytes on a 1500-byte
// underlay.
const DefaultNetworkMTU = 1450

// EffectiveMTU is the network's MTU with the default applied.
func (n *Network) EffectiveMTU() int {
	if n.MTU == 0 {
		return DefaultNetworkMTU
	}
	return n.MTU
}

// Network returns the network with that name.
func (s *Spec) Network(name string) (*Network, bool) {
	for i := range s.Networks {
		if s.Networks[i].Name == name {
			return &s.Networks[i], true
		}
	}
	return nil, false
}

// AddressSpace names the scope in which a network's addresses and MACs
// must be unique: its router's, or its own when it has none.
func (n *Network) AddressSpace() string {
	if n.Router != "" {
		return "router " + n.Router
	}
	return "network " + n.Name
}

// DerivedVNI is the VNI a name hashes to, before collisions are resolved.
// Switches use it as is (plan.SwitchVNI); networks start their search for
// a free VNI there (AllocateVNIs).
func DerivedVNI(infra, what string) int {
	sum := sha256.Sum256([]byte("vni/" + infra + "/" + what))
	return int(binary.BigEndian.Uint32(sum[:4])%MaxVNI) + 1
}

// AllocateVNIs returns the VNI of every network: the spec's where it gives
// one, else the one previous (the spec as last stored) gave the network of
// that name, else the first free VNI from the name's hash on. No VNI is
// given twice, and none a switch uses. The result depends only on the two
// specs, so every host computes the same.
func AllocateVNIs(s *Spec, previous *Spec) map[string]int {
	taken := map[int]bool{}
	for i := range s.Switches {
		sw := &s.Switches[i]
		if sw.VNI != 0 {
			taken[sw.VNI] = true
		} else {
			taken[DerivedVNI(s.Name, sw.Name)] = true
		}
	}
	out := make(map[string]int, len(s.Networks))
	for _, n := range s.Networks {
		if n.VNI != 0 {
			out[n.Name] = n.VNI
			taken[n.VNI] = true
		}
	}
	var before map[string]int // previous's VNIs by network name, the first of a name as Spec.Network finds it
	if previous != nil {
		before = make(map[string]int, len(previous.Networks))
		for _, n := range previous.Networks {
			if _, dup := before[n.Name]; !dup {
				before[n.Name] = n.VNI
			}
		}
	}
	var open []string
	for _, n := range s.Networks {
		if n.VNI != 0 {
			continue
		}
		if previous != nil {
			if old, ok := before[n.Name]; ok && old != 0 && !taken[old] {
				out[n.Name] = old
				taken[old] = true
				continue
			}
		}
		open = append(open, n.Name)
	}
	sort.Strings(open) // spec order must not decide who gets a contested VNI
	for _, name := range open {
		vni := DerivedVNI(s.Name, "network/"+name)
		for taken[vni] {
			vni = vni%MaxVNI + 1
		}
		out[name] = vni
		taken[vni] = true
	}
	return out
}

// PinVNIs writes into the spec's source the VNI of every network that
// leaves it out (AllocateVNIs, keeping those previous had), so the VNIs
// are stored with the spec and stay as they are while the network exists.
// A spec whose networks all have one is returned as it is. The new
// document may share what it does not change with doc: neither's Spec is
// to be changed in place after.
func PinVNIs(doc *Document, previous *Spec) (*Document, error) {
	missing := false
	for _, n := range doc.Spec.Networks {
		missing = missing || n.VNI == 0
	}
	if !missing {
		return doc, nil
	}
	vnis := AllocateVNIs(doc.Spec, previous)
	if pinned, ok := pinInText(doc, vnis); ok {
		return pinned, nil
	}
	return pinInTree(doc, vnis)
}

// pinInTree is PinVNIs for any spec: it edits the YAML tree and loads it
// again, as written out anew.
func pinInTree(doc *Document, vnis map[string]int) (*Document, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc.Source, &root); err != nil {
		return nil, err
	}
	if len(root.Content) == 0 {
		return doc, nil
	}
	list := valueOf(root.Content[0], "networks")
	if list == nil || list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("networks: not found in the YAML")
	}
	for _, item := range list.Content {
		name := valueOf(item, "name")
		if name == nil || valueOf(item, "vni") != nil {
			continue
		}
		setKey(item, "vni", strconv.Itoa(vnis[name.Value]), "!!int")
	}
	return reload(doc.File, &root)
}

// NetworkHosts returns, in spec order, the hosts where the network has a
// connected vNIC.
func (s *Spec) NetworkHosts(network string) []string {
	seen := map[string]bool{}
	var out []string
	for _, vm := range s.VMs {
		for _, n := range vm.NICs {
			if n.Network == network && n.IsConnected() && !seen[vm.Host] {
				seen[vm.Host] = true
				out = append(out, vm.Host)
			}
		}
	}
	return out
}

// checkNetworks checks the networks themselves; their vNICs are checked
// with the other vNICs (checkNetworkVNIC).
func (v *validator) checkNetworks() {
	seen := map[string]string{}
	vnis := map[int]string{}
	for i, sw := range v.s.Switches {
		if sw.VNI != 0 {
			vnis[sw.VNI] = indexPath("switches", i)
		}
	}
	subnets := map[string][]netip.Prefix{} // router -> its networks' subnets so far
	for i, n := range v.s.Networks {
		p := indexPath("networks", i)
		if v.checkName(p+".name", n.Name, maxObjectName, objectName, "a network") {
			v.unique(seen, n.Name, p+".name", "network")
		}
		if n.VNI != 0 || v.doc.Given(p+".vni") {
			if n.VNI < 1 || n.VNI > MaxVNI {
				v.errf(p+".vni", "vni %d is outside 1..%d", n.VNI, MaxVNI)
			} else if first, dup := vnis[n.VNI]; dup {
				v.errf(p+".vni", "vni %d is also %s's", n.VNI, first)
			} else {
				vnis[n.VNI] = p
			}
		}
		v.checkMTU(p+".mtu", n.MTU)
		if n.Router != "" {
			v.checkName(p+".router", n.Router, maxObjectName, objectName, "a router")
		}
		subnet, ok := v.checkSubnet(p, n)
		subnet6, ok6 := v.checkSubnet6(p, n)
		if n.Router == "" {
			continue
		}
		if ok {
			v.checkRouterOverlap(p+".subnet", subnet, n.Router, subnets)
		}
		if ok6 {
			v.checkRouterOverlap(p+".subnet6", subnet6, n.Router, subnets)
		}
	}
	v.checkNetworkUnderlay()
	v.checkNetworkPortGroups()
}

// checkRouterOverlap checks that a subnet overlaps none of its router's
// other networks' (subnets holds those seen so far, and gets this one).
func (v *validator) checkRouterOverlap(path string, subnet netip.Prefix, router string, subnets map[string][]netip.Prefix) {
	for _, other := range subnets[router] {
		if other.Overlaps(subnet) {
			v.errf(path, "subnet %s overlaps %s, another network of router %s: a router cannot tell them apart", subnet, other, router)
		}
	}
	subnets[router] = append(subnets[router], subnet)
}

// checkSubnet checks a network's IPv4 subnet and gateway, and returns the
// subnet when it is one.
func (v *validator) checkSubnet(p string, n Network) (netip.Prefix, bool) {
	if n.Router != "" && n.Gateway == "" && (n.Subnet != "" || n.Subnet6 == "") {
		v.errf(p+".gateway", "network %s is on router %s, which needs its address on the network: set gateway", n.Name, n.Router)
	}
	if n.Subnet == "" {
		if n.Gateway != "" {
			v.errf(p+".subnet", "a gateway needs the network's subnet, e.g. subnet: 10.1.0.0/24")
		}
		return netip.Prefix{}, false
	}
	subnet, err := netip.ParsePrefix(n.Subnet)
	switch {
	case err != nil:
		v.errf(p+".subnet", "%q is not a prefix, e.g. 10.1.0.0/24", n.Subnet)
		return netip.Prefix{}, false
	case !v.notMapped(p, ".subnet", subnet.Addr()):
		return netip.Prefix{}, false
	case subnet.Addr().Is6():
		v.errf(p+".subnet", "%s is IPv6: give it as subnet6 (and its router's address as gateway6)", n.Subnet)
		return netip.Prefix{}, false
	case subnet != subnet.Masked():
		v.errf(p+".subnet", "%s has host bits set: the subnet is %s", n.Subnet, subnet.Masked())
		return netip.Prefix{}, false
	case subnet.Bits() == 0:
		v.errf(p+".subnet", "%s: a /0 subnet would take every address", n.Subnet)
		return netip.Prefix{}, false
	}
	if n.Gateway != "" {
		gw, err := netip.ParseAddr(n.Gateway)
		switch {
		case err != nil:
			v.errf(p+".gateway", "%q is not an address (give it without a prefix length)", n.Gateway)
		case !v.notMapped(p, ".gateway", gw):
		case !gw.Is4():
			v.errf(p+".gateway", "gateway %s is IPv6: give it as gateway6", gw)
		case !subnet.Contains(gw):
			v.errf(p+".gateway", "gateway %s is outside subnet %s", gw, subnet)
		case gw.Is4() && subnet.Bits() < 31 && (gw == subnet.Addr() || gw == lastAddr(subnet)):
			v.errf(p+".gateway", "gateway %s is the network or broadcast address of %s", gw, subnet)
		}
	}
	return subnet, true
}

// checkSubnet6 checks a network's IPv6 subnet and gateway, and returns the
// subnet when it is one.
func (v *validator) checkSubnet6(p string, n Network) (netip.Prefix, bool) {
	if n.Router != "" && n.Subnet6 != "" && n.Gateway6 == "" {
		v.errf(p+".gateway6", "network %s is on router %s, which needs its IPv6 address on the network: set gateway6", n.Name, n.Router)
	}
	if n.Gateway6 != "" && n.Router == "" {
		v.errf(p+".gateway6", "a gateway6 is a router's address: set router")
	}
	if n.Subnet6 == "" {
		if n.Gateway6 != "" {
			v.errf(p+".subnet6", "a gateway6 needs the network's subnet6, e.g. subnet6: fd00:1::/64")
		}
		return netip.Prefix{}, false
	}
	subnet, err := netip.ParsePrefix(n.Subnet6)
	switch {
	case err != nil:
		v.errf(p+".subnet6", "%q is not a prefix, e.g. fd00:1::/64", n.Subnet6)
		return netip.Prefix{}, false
	case !v.notMapped(p, ".subnet6", subnet.Addr()):
		return netip.Prefix{}, false
	case !subnet.Addr().Is6():
		v.errf(p+".subnet6", "%s is not IPv6: give an IPv4 subnet as subnet", n.Subnet6)
		return netip.Prefix{}, false
	case subnet != subnet.Masked():
		v.errf(p+".subnet6", "%s has host bits set: the subnet is %s", n.Subnet6, subnet.Masked())
		return netip.Prefix{}, false
	case subnet.Bits() == 0 || subnet.Bits() > 126:
		v.errf(p+".subnet6", "%s: an IPv6 subnet has a prefix length of 1..126", n.Subnet6)
		return netip.Prefix{}, false
	case subnet.Addr().IsLinkLocalUnicast() || subnet.Addr().IsMulticast():
		v.errf(p+".subnet6", "%s is link-local or multicast: VMs make their link-local addresses themselves", n.Subnet6)
		return netip.Prefix{}, false
	}
	if n.Gateway6 != "" {
		gw, err := netip.ParseAddr(n.Gateway6)
		switch {
		case err != nil:
			v.errf(p+".gateway6", "%q is not an address (give it without a prefix length)", n.Gateway6)
		case !v.notMapped(p, ".gateway6", gw):
		case !subnet.Contains(gw):
			v.errf(p+".gateway6", "gateway6 %s is outside subnet6 %s", gw, subnet)
		case gw == subnet.Addr():
			v.errf(p+".gateway6", "gateway6 %s is the subnet-router anycast address of %s", gw, subnet)
		}
	}
	return subnet, true
}

// checkNetworkVNIC checks a vNIC on a network: the network exists, its
// address is in the subnet, and address and MAC are unique in the
// network's address space (AddressSpace), not across the whole spec.
func (v *validator) checkNetworkVNIC(path string, n VNIC) {
	if n.PortGroup != "" {
		v.errf(path+".network", "a vNIC is on a port group or on a network, not both")
	}
	net, ok := v.x.networks[n.Network]
	if !ok {
		v.errf(path+".network", "unknown network %q", n.Network)
		return
	}
	space := v.x.spaces[net]
	if v.netIPs == nil {
		v.indexAddressSpaces()
	}
	if n.IP != "" {
		v.checkCIDRIn(path+".ip", n.IP, v.netIPs[space])
		if pfx, err := netip.ParsePrefix(n.IP); err == nil && net.Subnet != "" {
			if subnet, err := netip.ParsePrefix(net.Subnet); err == nil &&
				(!subnet.Contains(pfx.Addr()) || pfx.Bits() != subnet.Bits()) {
				v.errf(path+".ip", "%s is not in network %s's subnet %s", n.IP, net.Name, subnet)
			}
		}
	}
	if n.IP6 != "" {
		v.checkNetworkIP6(path+".ip6", n.IP6, net, v.netIPs[space])
	}
	v.checkMTU(path+".mtu", n.MTU)
	if n.MTU > net.EffectiveMTU() {
		v.errf(path+".mtu", "mtu %d is larger than network %q's mtu %d", n.MTU, net.Name, net.EffectiveMTU())
	}
	v.checkVNICMAC(path, n, v.netMACs[space])
}

// checkNetworkIP6 checks a network vNIC's IPv6 address: in the network's
// subnet6 with its prefix length, and unique in its address space.
func (v *validator) checkNetworkIP6(path, ip6 string, net *Network, ips map[netip.Addr]string) {
	pfx, err := netip.ParsePrefix(ip6)
	if err != nil {
		v.errf(path, "%q is not an address with a prefix length, e.g. fd00:1::11/64", ip6)
		return
	}
	if !v.notMapped(path, "", pfx.Addr()) {
		return
	}
	if !pfx.Addr().Is6() {
		v.errf(path, "%s is not IPv6: give an IPv4 address as ip", ip6)
		return
	}
	if pfx.Addr().IsLinkLocalUnicast() {
		v.errf(path, "%s is link-local: the VM makes its link-local address itself", ip6)
		return
	}
	if net.Subnet6 == "" {
		v.errf(path, "network %s has no subnet6 for IPv6 addresses", net.Name)
		return
	}
	if subnet, err := netip.ParsePrefix(net.Subnet6); err == nil &&
		(!subnet.Contains(pfx.Addr()) || pfx.Bits() != subnet.Bits()) {
		v.errf(path, "%s is not in network %s's subnet6 %s", ip6, net.Name, subnet)
		return
	}
	v.checkCIDRIn(path, ip6, ips)
}

// indexAddressSpaces makes every address space's sets of addresses and
// MACs, each holding its networks' gateways, in one pass over the
// networks: per vNIC it would cost as many passes as there are spaces.
func (v *validator) indexAddressSpaces() {
	v.netIPs, v.netMACs = map[string]map[netip.Addr]string{}, map[string]map[string]string{}
	for i := range v.s.Networks {
		space := v.x.spaces[&v.s.Networks[i]]
		if v.netIPs[space] == nil {
			v.netIPs[space], v.netMACs[space] = map[netip.Addr]string{}, map[string]string{}
		}
		if gw, err := netip.ParseAddr(v.s.Networks[i].Gateway); err == nil {
			v.netIPs[space][gw] = fmt.Sprintf("networks[%d].gateway", i)
		}
		if gw, err := netip.ParseAddr(v.s.Networks[i].Gateway6); err == nil {
			v.netIPs[space][gw] = fmt.Sprintf("networks[%d].gateway6", i)
		}
	}
}

// checkNetworkUnderlay checks that hosts a network or router spans have
// the addresses its tunnels need.
func (v *validator) checkNetworkUnderlay() {
	spans := make(map[string][]string, len(v.s.Networks)) // address space -> hosts with its vNICs, each once
	on := make(map[[2]string]bool, 2*len(v.s.Networks))   // address space and a host in its span
	first := make(map[string][2]int, len(v.s.Networks))   // address space -> its first vNIC, vms[i].nics[j]
	for i, vm := range v.s.VMs {
		for j, n := range vm.NICs {
			net, ok := v.x.networks[n.Network]
			if !ok || n.PortGroup != "" || net.PortGroup != "" { // a port group's host ports carry its tunnels
				continue
			}
			sp := v.x.spaces[net]
			if _, ok := first[sp]; !ok {
				first[sp] = [2]int{i, j}
			}
			if key := [2]string{sp, vm.Host}; !on[key] {
				on[key] = true
				spans[sp] = append(spans[sp], vm.Host)
			}
		}
	}
	for sp, hosts := range spans {
		if len(hosts) < 2 {
			continue
		}
		var without []string
		for _, h := range hosts {
			if x, ok := v.x.host(h); ok && x.Underlay == "" {
				without = append(without, h)
			}
		}
		sort.Strings(without)
		if len(without) > 0 {
			at := first[sp]
			v.errf(indexPath(indexPath("vms", at[0])+".nics", at[1])+".network", "%s spans hosts over VXLAN, but %s has no underlay address (hosts[].underlay)",
				sp, strings.Join(without, ", "))
		}
	}
}

// networkSpans returns, per address space, the hosts with its vNICs: the
// hosts that carry its networks (a router's part forwards into each).
func (v *validator) networkSpans() map[string]map[string]bool {
	spans := map[string]map[string]bool{}
	for _, vm := range v.s.VMs {
		for _, n := range vm.NICs {
			if net, ok := v.x.networks[n.Network]; ok && n.PortGroup == "" {
				sp := v.x.spaces[net]
				if spans[sp] == nil {
					spans[sp] = map[string]bool{}
				}
				spans[sp][vm.Host] = true
			}
		}
	}
	return spans
}

// checkNetworkPortGroups checks the networks whose tunnels a port group
// carries: the port group exists, its switch has an uplink on every host
// the network spans (else the tunnels could not leave it) and no VM (a VM
// there could send VXLAN to the tunnel addresses), each such host has one
// host port on the port group, of one address family, and the switch's MTU
// has room for the network's frames and VXLAN's overhead.
func (v *validator) checkNetworkPortGroups() {
	var spans map[string]map[string]bool // made when a network needs it: most have no port group
	carriers := map[string]string{}      // switch -> path of a network whose tunnels it carries
	for i := range v.s.Networks {
		n := &v.s.Networks[i]
		if n.PortGroup == "" {
			continue
		}
		p := indexPath("networks", i)
		sw, ok := v.x.pgSwitch[n.PortGroup]
		if !ok {
			v.errf(p+".portgroup", "unknown port group %q", n.PortGroup)
			continue
		}
		if _, seen := carriers[sw.Name]; !seen {
			carriers[sw.Name] = p + ".portgroup"
		}
		if len(sw.Uplinks) == 0 {
			v.errf(p+".portgroup", "port group %s is on switch %s, which has no uplinks: the network's tunnels could not leave a host", n.PortGroup, sw.Name)
			continue
		}
		if spans == nil {
			spans = v.networkSpans()
		}
		hosts := spans[v.x.spaces[n]]
		if len(hosts) < 2 {
			continue // no tunnels
		}
		family := ""
		for _, h := range v.sortedHosts(hosts) {
			v.checkTunnelPort(p, n, sw, h, &family)
		}
	}
	for i, vm := range v.s.VMs {
		for j, nic := range vm.NICs {
			if sw, ok := v.x.pgSwitch[nic.PortGroup]; ok && nic.Network == "" {
				if by, carries := carriers[sw.Name]; carries {
					v.errf(fmt.Sprintf("vms[%d].nics[%d].portgroup", i, j),
						"switch %s carries virtual networks' tunnels (%s): a VM on it could reach their tunnel addresses; put the VM on another switch", sw.Name, by)
				}
			}
		}
	}
}

// checkTunnelPort checks a host's part of a network's tunnels over a port
// group: an uplink of the switch there, and one host port on the port
// group whose address family is the others' (family).
func (v *validator) checkTunnelPort(p string, n *Network, sw *Switch, host string, family *string) {
	uplinked := false
	for _, u := range sw.Uplinks {
		_, on := u.NICs[host]
		uplinked = uplinked || on
	}
	if !uplinked {
		v.errf(p+".portgroup", "switch %s has no uplink on host %s, where network %s's tunnels start", sw.Name, host, n.Name)
	}
	var ports []int
	for i, hp := range v.s.HostPorts {
		if hp.Host == host && hp.PortGroup == n.PortGroup {
			ports = append(ports, i)
		}
	}
	switch {
	case len(ports) == 0:
		v.errf(p+".portgroup", "host %s has no host port on port group %s: give it one (hostports:), its address is the network's tunnel address there", host, n.PortGroup)
		return
	case len(ports) > 1:
		v.errf(p+".portgroup", "host %s has %d host ports on port group %s (hostports[%d] and hostports[%d]): which one is the tunnel address is unclear", host, len(ports), n.PortGroup, ports[0], ports[1])
		return
	}
	hp := v.s.HostPorts[ports[0]]
	pfx, err := netip.ParsePrefix(hp.IP)
	if err != nil {
		return // hostports[].ip says why
	}
	f := "IPv4"
	if pfx.Addr().Is6() && !pfx.Addr().Is4In6() {
		f = "IPv6"
	}
	if *family == "" {
		*family = f
	} else if f != *family {
		v.errf(fmt.Sprintf("hostports[%d].ip", ports[0]), "network %s's tunnels are %s on other hosts, but this host port's address is %s", n.Name, *family, f)
	}
	overhead := 50
	if f == "IPv6" {
		overhead = 70
	}
	mtu := hp.MTU
	if mtu == 0 {
		mtu = sw.EffectiveMTU()
	}
	if n.EffectiveMTU()+overhead > mtu {
		v.errf(p+".mtu", "network %s's MTU %d needs %d on port group %s's host port on %s (VXLAN adds %d), which has MTU %d",
			n.Name, n.EffectiveMTU(), n.EffectiveMTU()+overhead, n.PortGroup, host, overhead, mtu)
	}
}

func (v *validator) sortedHosts(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for h := range set {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}
