package spec

import (
	"bytes"
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
	Subnet  string `yaml:"subnet"`  // e.g. 10.1.0.0/24: its vNICs' addresses must be in it
	Gateway string `yaml:"gateway"` // the router's address on the network, in Subnet
	Router  string `yaml:"router"`  // networks on one router route to each other
	MTU     int    `yaml:"mtu"`     // default DefaultNetworkMTU
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
	var open []string
	for _, n := range s.Networks {
		if n.VNI != 0 {
			continue
		}
		if previous != nil {
			if old, ok := previous.Network(n.Name); ok && old.VNI != 0 && !taken[old.VNI] {
				out[n.Name] = old.VNI
				taken[old.VNI] = true
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
// A spec whose networks all have one is returned as it is.
func PinVNIs(doc *Document, previous *Spec) (*Document, error) {
	missing := false
	for _, n := range doc.Spec.Networks {
		missing = missing || n.VNI == 0
	}
	if !missing {
		return doc, nil
	}
	vnis := AllocateVNIs(doc.Spec, previous)
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
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, err
	}
	return Load(doc.File, buf.Bytes())
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
			vnis[sw.VNI] = fmt.Sprintf("switches[%d]", i)
		}
	}
	subnets := map[string][]netip.Prefix{} // router -> its networks' subnets so far
	for i, n := range v.s.Networks {
		p := fmt.Sprintf("networks[%d]", i)
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
		if !ok || n.Router == "" {
			continue
		}
		for _, other := range subnets[n.Router] {
			if other.Overlaps(subnet) {
				v.errf(p+".subnet", "subnet %s overlaps %s, another network of router %s: a router cannot tell them apart", subnet, other, n.Router)
			}
		}
		subnets[n.Router] = append(subnets[n.Router], subnet)
	}
	v.checkNetworkUnderlay()
}

// checkSubnet checks a network's subnet and gateway, and returns the
// subnet when it is one.
func (v *validator) checkSubnet(p string, n Network) (netip.Prefix, bool) {
	if n.Router != "" && n.Gateway == "" {
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
		case !gw.Is4():
			v.errf(p+".gateway", "gateway %s: routers route IPv4 only", gw)
		case !subnet.Contains(gw):
			v.errf(p+".gateway", "gateway %s is outside subnet %s", gw, subnet)
		case gw.Is4() && subnet.Bits() < 31 && (gw == subnet.Addr() || gw == lastAddr(subnet)):
			v.errf(p+".gateway", "gateway %s is the network or broadcast address of %s", gw, subnet)
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
	space := net.AddressSpace()
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
	v.checkMTU(path+".mtu", n.MTU)
	if n.MTU > net.EffectiveMTU() {
		v.errf(path+".mtu", "mtu %d is larger than network %q's mtu %d", n.MTU, net.Name, net.EffectiveMTU())
	}
	v.checkVNICMAC(path, n, v.netMACs[space])
}

// indexAddressSpaces makes every address space's sets of addresses and
// MACs, each holding its networks' gateways, in one pass over the
// networks: per vNIC it would cost as many passes as there are spaces.
func (v *validator) indexAddressSpaces() {
	v.netIPs, v.netMACs = map[string]map[netip.Addr]string{}, map[string]map[string]string{}
	for i := range v.s.Networks {
		space := v.s.Networks[i].AddressSpace()
		if v.netIPs[space] == nil {
			v.netIPs[space], v.netMACs[space] = map[netip.Addr]string{}, map[string]string{}
		}
		if gw, err := netip.ParseAddr(v.s.Networks[i].Gateway); err == nil {
			v.netIPs[space][gw] = fmt.Sprintf("networks[%d].gateway", i)
		}
	}
}

// checkNetworkUnderlay checks that hosts a network or router spans have
// the addresses its tunnels need.
func (v *validator) checkNetworkUnderlay() {
	spans := map[string]map[string]bool{} // address space -> hosts with its vNICs
	first := map[string]string{}          // address space -> path of a vNIC
	for i, vm := range v.s.VMs {
		for j, n := range vm.NICs {
			net, ok := v.x.networks[n.Network]
			if !ok || n.PortGroup != "" {
				continue
			}
			sp := net.AddressSpace()
			if spans[sp] == nil {
				spans[sp] = map[string]bool{}
				first[sp] = fmt.Sprintf("vms[%d].nics[%d].network", i, j)
			}
			spans[sp][vm.Host] = true
		}
	}
	for sp, hosts := range spans {
		if len(hosts) < 2 {
			continue
		}
		var without []string
		for h := range hosts {
			if x, ok := v.x.host(h); ok && x.Underlay == "" {
				without = append(without, h)
			}
		}
		sort.Strings(without)
		if len(without) > 0 {
			v.errf(first[sp], "%s spans hosts over VXLAN, but %s has no underlay address (hosts[].underlay)",
				sp, strings.Join(without, ", "))
		}
	}
}
