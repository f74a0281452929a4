package plan

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/vnet-project/vnet/internal/spec"
)

// NetBridgeName is a virtual network's bridge on a host.
func NetBridgeName(infra, network string) string { return hashName("nb", infra+"/"+network) }

// NetVTEPName is a virtual network's tunnel endpoint on a host.
func NetVTEPName(infra, network string) string { return hashName("nx", infra+"/"+network) }

// RouterNSName is the namespace of a router's part on one host. Node names
// never start with "_", and "." never appears in a name, so it is no
// host's or VM's and tells router and host apart.
func RouterNSName(infra, router, host string) string {
	return NSName(infra, "_r."+router+"."+host)
}

// RouterLegName is a router's interface on a network, in its namespace.
func RouterLegName(network string) string { return hashName("gw", network) }

// RouterPortName is the bridge port of a router's leg on a network.
func RouterPortName(infra, network string) string { return hashName("rp", infra+"/"+network) }

// GatewayMAC is a network's gateway MAC: the same on every host, so a VM
// that moves keeps a valid neighbour entry for its gateway.
func GatewayMAC(infra, router, network string) string {
	return StableMAC(infra, "gateway/"+router+"/"+network)
}

// IsRouterNS reports whether a namespace is a router's (RouterNSName).
func IsRouterNS(ns string) bool {
	_, node, ok := SplitNSName(ns)
	return ok && strings.HasPrefix(node, "_r.")
}

// RouterSysctls are a router namespace's settings: those of every
// namespace, and forwarding for both families. Duplicate address detection
// is off: a leg's addresses (its gateway6, and the link-local address from
// the gateway MAC) are the same on every host by design, so that a VM finds
// its gateway wherever it runs, and the other hosts' legs, reached through
// the tunnel, would fail every leg's detection. Setting "all" as well keeps
// the kernel from detecting on a leg whatever the leg's own setting.
var RouterSysctls = append(append([]Sysctl(nil), NamespaceSysctls...),
	Sysctl{Key: "net/ipv4/ip_forward", Value: "1"},
	Sysctl{Key: "net/ipv6/conf/all/disable_ipv6", Value: "0", Optional: true},
	Sysctl{Key: "net/ipv6/conf/default/disable_ipv6", Value: "0", Optional: true},
	Sysctl{Key: "net/ipv6/conf/all/accept_dad", Value: "0", Optional: true},
	Sysctl{Key: "net/ipv6/conf/default/accept_dad", Value: "0", Optional: true},
	Sysctl{Key: "net/ipv6/conf/all/forwarding", Value: "1", Optional: true},
)

// NamespaceSysctlSet is the set of settings a namespace carries.
func NamespaceSysctlSet(ns string) []Sysctl {
	if IsRouterNS(ns) {
		return RouterSysctls
	}
	return NamespaceSysctls
}

// member is one connected vNIC of a network.
type member struct {
	vm, host, mac, ip, ip6 string // addresses without prefix length; "" when it has none
	idx                    int
}

// netIndex is what a host model needs to know of the networks, found in
// one pass over the VMs.
type netIndex struct {
	members  map[string][]member        // network -> its vNICs
	hosts    map[string]map[string]bool // network -> hosts with its vNICs
	routerOn map[string]map[string]bool // router -> hosts with vNICs on any of its networks
	vnis     map[string]int
}

func indexNetworks(s *spec.Spec) *netIndex {
	x := &netIndex{members: map[string][]member{}, hosts: map[string]map[string]bool{},
		routerOn: map[string]map[string]bool{}, vnis: spec.AllocateVNIs(s, nil)}
	router := make(map[string]string, len(s.Networks))
	for _, n := range s.Networks {
		router[n.Name] = n.Router
	}
	m := &modeler{s: s}
	for vi := range s.VMs {
		vm := &s.VMs[vi]
		for i, n := range vm.NICs {
			if n.Network == "" || !n.IsConnected() {
				continue
			}
			mem := member{vm: vm.Name, host: vm.Host, mac: m.vnicMAC(vm, i), idx: i}
			if p, err := netip.ParsePrefix(n.IP); err == nil {
				mem.ip = p.Addr().String()
			}
			if p, err := netip.ParsePrefix(n.IP6); err == nil {
				mem.ip6 = p.Addr().String()
			}
			x.members[n.Network] = append(x.members[n.Network], mem)
			addTo(x.hosts, n.Network, vm.Host)
			if r := router[n.Network]; r != "" {
				addTo(x.routerOn, r, vm.Host)
			}
		}
	}
	return x
}

func addTo(m map[string]map[string]bool, key, v string) {
	if m[key] == nil {
		m[key] = map[string]bool{}
	}
	m[key][v] = true
}

// carriers are the hosts that carry a network: those with its vNICs, and,
// when it has any, those with vNICs on another network of its router (the
// router there forwards into it).
func (x *netIndex) carriers(n *spec.Network) map[string]bool {
	if len(x.hosts[n.Name]) == 0 {
		return nil
	}
	if n.Router == "" {
		return x.hosts[n.Name]
	}
	return x.routerOn[n.Router]
}

// networks are the objects of the virtual networks the host carries: per
// network a bridge and, when other hosts carry it too, a tunnel endpoint
// with its own VNI that learns nothing (floods go to the hosts with the
// network's vNICs, head-end replicated; every remote vNIC's MAC has a
// static entry both in the tunnel and in the bridge) and answers ARP
// locally from the bridge's neighbour entries. Per router with vNICs on
// the host, a namespace with a leg on each network of the router the host
// carries, holding its gateway address and MAC. A host carries nothing of
// a network it has no part in.
func networks(s *spec.Spec, host, here string) []Resource {
	return appendNetworks(nil, s, host, here)
}

// appendNetworks appends networks(s, host, here) to out.
func appendNetworks(out []Resource, s *spec.Spec, host, here string) []Resource {
	if len(s.Networks) == 0 {
		return out
	}
	x := indexNetworks(s)
	routers := map[string]bool{}
	for i := range s.Networks {
		n := &s.Networks[i]
		carriers := x.carriers(n)
		if !carriers[host] {
			continue
		}
		bridge := NetBridgeName(s.Name, n.Name)
		owner := HostOwner(s.Name, "network "+n.Name+" on "+host)
		mtu := n.EffectiveMTU()
		out = append(out, Resource{Kind: KindBridge, NS: here, Name: bridge, MTU: mtu,
			MAC: StableMAC(s.Name, "netbridge/"+host+"/"+n.Name), Sysctls: BridgeSysctlText(n.Subnet6 == ""),
			Isolate: true, Owner: owner})
		if len(carriers) > 1 {
			out = appendTunnel(out, s, n, host, here, x, bridge, owner)
		}
		// IPv6 addresses too: the bridge answers neighbour solicitations
		// for remote VMs from them as it answers ARP.
		for _, mem := range x.members[n.Name] {
			for _, ip := range []string{mem.ip, mem.ip6} {
				if ip != "" {
					out = append(out, Resource{Kind: KindNeigh, NS: here, Link: bridge, CIDR: ip, MAC: mem.mac,
						Owner: fmt.Sprintf("%s: vm %s eth%d", owner, mem.vm, mem.idx)})
				}
			}
		}
		if n.Router == "" {
			continue
		}
		rns := RouterNSName(s.Name, n.Router, host)
		if !routers[n.Router] {
			routers[n.Router] = true
			out = append(out, Resource{Kind: KindNetns, Name: rns, Sysctls: WantedSysctls(RouterSysctls),
				Owner: "router " + n.Router + " on " + host})
		}
		legOwner := "router " + n.Router + " on network " + n.Name + " on " + host
		gwMAC := GatewayMAC(s.Name, n.Router, n.Name)
		out = append(out, Resource{Kind: KindVeth, Owner: legOwner,
			A: End{NS: rns, Name: RouterLegName(n.Name), MAC: gwMAC, MTU: mtu},
			B: End{NS: here, Name: RouterPortName(s.Name, n.Name), MAC: StableMAC(s.Name, "routerport/"+host+"/"+n.Name), MTU: mtu, Master: bridge}})
		for _, g := range [][2]string{{n.Gateway, n.Subnet}, {n.Gateway6, n.Subnet6}} {
			gw, err := netip.ParseAddr(g[0])
			if err != nil {
				continue
			}
			subnet, _ := netip.ParsePrefix(g[1])
			out = append(out,
				Resource{Kind: KindAddr, NS: rns, Link: RouterLegName(n.Name), CIDR: netip.PrefixFrom(gw, subnet.Bits()).String(), Owner: legOwner},
				Resource{Kind: KindNeigh, NS: here, Link: bridge, CIDR: gw.String(), MAC: gwMAC, Owner: legOwner})
		}
	}
	return out
}

// appendTunnel appends a network's tunnel endpoint on the host and its entries:
// floods to each other host with the network's vNICs, and each remote
// vNIC's MAC towards its host, in the tunnel and in the bridge.
// The tunnel's addresses are the hosts' underlay addresses, or, for a
// network with a port group, their host ports on it (spec.TunnelAddress):
// then the host routes the tunnel's packets out of that host port, into its
// switch and out of the switch's uplink, where the port group's pool and
// shaping hold them like any other port's traffic.
func appendTunnel(out []Resource, s *spec.Spec, n *spec.Network, host, here string, x *netIndex, bridge, owner string) []Resource {
	vtep := NetVTEPName(s.Name, n.Name)
	out = append(out, Resource{Kind: KindVxlan, NS: here, Name: vtep, Link: bridge,
		MAC: StableMAC(s.Name, "netvtep/"+host+"/"+n.Name), MTU: n.EffectiveMTU(),
		VNI: uint32(x.vnis[n.Name]), Local: s.TunnelAddress(n, host), Port: VXLANPort, Isolate: true, Owner: owner + ": tunnel"})
	underlay := func(hn string) string { return s.TunnelAddress(n, hn) }
	for _, hn := range s.Hosts {
		if hn.Name != host && x.hosts[n.Name][hn.Name] {
			out = append(out, Resource{Kind: KindFDB, NS: here, Link: vtep, MAC: ZeroMAC, Remote: underlay(hn.Name),
				Owner: owner + ": flood to " + hn.Name})
		}
	}
	for _, mem := range x.members[n.Name] {
		if mem.host == host {
			continue
		}
		who := fmt.Sprintf("%s: vm %s eth%d on %s", owner, mem.vm, mem.idx, mem.host)
		out = append(out,
			Resource{Kind: KindFDB, NS: here, Link: vtep, MAC: mem.mac, Remote: underlay(mem.host), Owner: who},
			Resource{Kind: KindFDB, NS: here, Link: vtep, MAC: mem.mac, Owner: who + " (bridge)"})
	}
	return out
}
