package plan

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
)

// VIPMAC is the MAC a load balancer's VIPs answer ARP and neighbour
// discovery with, the same on every host.
func VIPMAC(infra, site, lb string) string { return StableMAC(infra, "vip/"+site+"/"+lb) }

// SiteBalancers is how every client port of a network (or port group)
// translates its load balancers, with the backends in down marked down.
func SiteBalancers(s *spec.Spec, site spec.BalancerSite, down map[string]bool) PortBalancers {
	m := &modeler{s: s}
	out := make(PortBalancers, 0, len(site.Balancers()))
	for _, lb := range site.Balancers() {
		b := Balancer{Name: lb.Name, MAC: VIPMAC(s.Name, site.Name(), lb.Name), Source: lb.Method() == spec.SelectSource, Affinity: lb.AffinityTimeout()}
		for _, v := range []string{lb.VIP, lb.VIP6} {
			if a, err := netip.ParseAddr(v); err == nil {
				b.VIPs = append(b.VIPs, a)
			}
		}
		for _, l := range lb.Listeners {
			b.Listeners = append(b.Listeners, LBListener{Proto: l.Protocol, Port: l.Port, BackendPort: l.EffectiveBackendPort()})
		}
		for _, be := range lb.Backends {
			v, err := s.ResolveBackend(site, be)
			if err != nil {
				continue // validated
			}
			vm, _ := s.VM(v.VM)
			mac := m.vnicMAC(vm, v.NIC)
			if v.Routed(site) {
				mac = GatewayMAC(s.Name, site.Network.Router, site.Network.Name)
			}
			b.Backends = append(b.Backends, LBBackend{IP: v.IP, IP6: v.IP6, MAC: mac,
				Down: down[BackendKey(site.Name(), lb.Name, v.VM, v.NIC)]})
		}
		out = append(out, b)
	}
	return out
}

// balancers adds, for every load balancer's network or port group, each
// connected vNIC's switch port a KindLB resource: that client's
// translations, made on its own host (model_host.go moves them to a real
// host's ports as it moves port policies). With withNetworks, each router
// leg's port on a network with load balancers gets one too, on every host
// that carries the network: the router's packets are the clients of other
// networks of the router.
func (m *modeler) balancers(withNetworks bool) {
	for _, site := range m.s.BalancerSites() {
		pb := SiteBalancers(m.s, site, m.opt.LBDown)
		text, why := pb.String(), pb.DownText()
		for vi := range m.s.VMs {
			vm := &m.s.VMs[vi]
			if m.skips(vm) {
				continue
			}
			for i, n := range vm.NICs {
				if !n.IsConnected() || !onSite(site, n) {
					continue
				}
				m.add(Resource{Kind: KindLB, NS: m.ns(vm.Host), Link: VNICPortName(vm.Name, i), Match: text, Why: why,
					Owner: fmt.Sprintf("vm %s eth%d: load balancers of %s", vm.Name, i, site.Name())})
			}
		}
	}
	if withNetworks {
		for _, h := range m.s.Hosts {
			m.out = append(m.out, routerBalancers(m.s, h.Name, m.ns(h.Name), m.opt.LBDown)...)
		}
	}
}

func onSite(site spec.BalancerSite, n spec.VNIC) bool {
	if site.Network != nil {
		return n.Network == site.Network.Name
	}
	return n.Network == "" && n.PortGroup == site.PortGroup.Name
}

// routerBalancers are the KindLB resources of the router legs' ports on the
// host (in namespace here) of the networks with load balancers it carries.
func routerBalancers(s *spec.Spec, host, here string, down map[string]bool) []Resource {
	var out []Resource
	var x *netIndex
	for i := range s.Networks {
		n := &s.Networks[i]
		if len(n.LoadBalancers) == 0 || n.Router == "" {
			continue
		}
		if x == nil {
			x = indexNetworks(s)
		}
		if !x.carriers(n)[host] {
			continue
		}
		pb := SiteBalancers(s, spec.BalancerSite{Network: n}, down)
		out = append(out, Resource{Kind: KindLB, NS: here, Link: RouterPortName(s.Name, n.Name), Match: pb.String(), Why: pb.DownText(),
			Owner: HostOwner(s.Name, "router "+n.Router+" on network "+n.Name+" on "+host+": load balancers")})
	}
	return out
}

// BalancerPort is a client port with load balancers, as status and the
// agents' counts read them: its namespace and name, its site, and its
// load balancers.
type BalancerPort struct {
	NS, Port, Site string
	Balancers      PortBalancers
}

// LBOf names the load balancer of the port whose VIP sends connections to
// a backend's address and port, "" for none.
func (p BalancerPort) LBOf(vip, addr string, port int, proto string) string {
	for _, b := range p.Balancers {
		if !slices.ContainsFunc(b.VIPs, func(a netip.Addr) bool { return a.String() == vip }) {
			continue
		}
		for _, be := range b.Backends {
			if be.IP.String() != addr && be.IP6.String() != addr {
				continue
			}
			for _, l := range b.Listeners {
				if l.BackendPort == port && l.Proto == proto {
					return b.Name
				}
			}
		}
	}
	return ""
}

// BalancerPorts lists the client ports with load balancers on a host, in
// namespace here, as its model makes them (every host's, each in its lab
// namespace, when host is ""): its VMs' connected vNICs' ports (a TAP
// under its own name) and the router legs' ports of the networks it
// carries.
func BalancerPorts(s *spec.Spec, host, here string) []BalancerPort {
	var out []BalancerPort
	var x *netIndex
	for _, site := range s.BalancerSites() {
		pb := SiteBalancers(s, site, nil)
		for _, vm := range s.VMs {
			if host != "" && vm.Host != host {
				continue
			}
			ns := here
			if host == "" {
				ns = NSName(s.Name, vm.Host)
			}
			for i, n := range vm.NICs {
				if !n.IsConnected() || !onSite(site, n) {
					continue
				}
				port := VNICPortName(vm.Name, i)
				if tap := n.TapName(); tap != "" && host != "" {
					port = tap
				}
				out = append(out, BalancerPort{NS: ns, Port: port, Site: site.Name(), Balancers: pb})
			}
		}
		n := site.Network
		if n == nil || n.Router == "" {
			continue
		}
		if x == nil {
			x = indexNetworks(s)
		}
		for _, h := range s.Hosts {
			if host != "" && h.Name != host || !x.carriers(n)[h.Name] {
				continue
			}
			ns := here
			if host == "" {
				ns = NSName(s.Name, h.Name)
			}
			out = append(out, BalancerPort{NS: ns, Port: RouterPortName(s.Name, n.Name), Site: site.Name(), Balancers: pb})
		}
	}
	return out
}

// SumBalancerConns adds up what the load balancers of the host's client
// ports (in namespace here; every host's in the lab's namespaces when host
// is "") counted, by load balancer and backend. read is the dataplane's
// LBCounts; a port it cannot read counts nothing.
func SumBalancerConns(s *spec.Spec, host, here string, read func(ns, port string) ([]status.BackendConns, error)) []status.BackendConns {
	sums := map[string]*status.BackendConns{}
	var order []string
	for _, p := range BalancerPorts(s, host, here) {
		counts, err := read(p.NS, p.Port)
		if err != nil {
			continue
		}
		for _, c := range counts {
			lb := p.LBOf(c.VIP, c.Addr, c.Port, c.Proto)
			if lb == "" {
				continue
			}
			k := strings.Join([]string{p.Site, lb, c.VIP, c.Addr, c.Proto, fmt.Sprint(c.Port)}, "/")
			sum, ok := sums[k]
			if !ok {
				sum = &status.BackendConns{Site: p.Site, LB: lb, VIP: c.VIP, Addr: c.Addr, Port: c.Port, Proto: c.Proto}
				sums[k] = sum
				order = append(order, k)
			}
			sum.Total += c.Total
			sum.Active += c.Active
		}
	}
	out := make([]status.BackendConns, 0, len(order))
	for _, k := range order {
		out = append(out, *sums[k])
	}
	return out
}
