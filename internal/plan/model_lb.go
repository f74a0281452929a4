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

// SiteBalancers is how a client port translates a network's (or port
// group's) load balancers, with the backends in down marked down. client
// is the client's network (nil on a port group): a backend there gets its
// connections at its own MAC, one on another network of the router at the
// client's gateway, whose router on the client's host routes them.
func SiteBalancers(s *spec.Spec, site spec.BalancerSite, client *spec.Network, down map[string]bool) PortBalancers {
	m := &modeler{s: s}
	out := make(PortBalancers, 0, len(site.Balancers()))
	for _, lb := range site.Balancers() {
		b := Balancer{Site: site.Name(), Name: lb.Name, MAC: VIPMAC(s.Name, site.Name(), lb.Name), Source: lb.Method() == spec.SelectSource, Affinity: lb.AffinityTimeout()}
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
			if client != nil && v.Network != client.Name {
				mac = GatewayMAC(s.Name, client.Router, client.Name)
			}
			b.Backends = append(b.Backends, LBBackend{IP: v.IP, IP6: v.IP6, MAC: mac,
				Down: down[BackendKey(site.Name(), lb.Name, v.VM, v.NIC)]})
		}
		out = append(out, b)
	}
	return out
}

// clientBalancers works out, once per network or port group, the load
// balancers its clients' ports translate: on a network, those of every
// network of its address space (its router's networks, or itself), so
// that a client's connection to another network's VIP is translated on
// the client's own port, and the backend's reply, routed back on the
// backend's host, translated back there too; on a port group, its own.
type clientBalancers struct {
	s    *spec.Spec
	down map[string]bool
	memo map[string]PortBalancers
}

func newClientBalancers(s *spec.Spec, down map[string]bool) *clientBalancers {
	return &clientBalancers{s: s, down: down, memo: map[string]PortBalancers{}}
}

// of returns the load balancers a vNIC's port translates (none: nil).
func (c *clientBalancers) of(n spec.VNIC) PortBalancers {
	key := "portgroup " + n.PortGroup
	if n.Network != "" {
		key = "network " + n.Network
	}
	if pb, ok := c.memo[key]; ok {
		return pb
	}
	var pb PortBalancers
	if n.Network != "" {
		if client, ok := c.s.Network(n.Network); ok {
			for i := range c.s.Networks {
				if other := &c.s.Networks[i]; len(other.LoadBalancers) > 0 && other.AddressSpace() == client.AddressSpace() {
					pb = append(pb, SiteBalancers(c.s, spec.BalancerSite{Network: other}, client, c.down)...)
				}
			}
		}
	} else if pg, _, ok := c.s.PortGroup(n.PortGroup); ok && len(pg.LoadBalancers) > 0 {
		pb = SiteBalancers(c.s, spec.BalancerSite{PortGroup: pg}, nil, c.down)
	}
	c.memo[key] = pb
	return pb
}

// balancers adds a KindLB resource to each connected vNIC's switch port
// whose network (or port group) has load balancers to translate: that
// client's translations, made on its own host (model_host.go moves them to
// a real host's ports as it moves port policies).
func (m *modeler) balancers() {
	if !m.s.HasBalancers() {
		return
	}
	c := newClientBalancers(m.s, m.opt.LBDown)
	for vi := range m.s.VMs {
		vm := &m.s.VMs[vi]
		if m.skips(vm) {
			continue
		}
		for i, n := range vm.NICs {
			if !n.IsConnected() {
				continue
			}
			pb := c.of(n)
			if len(pb) == 0 {
				continue
			}
			m.add(Resource{Kind: KindLB, NS: m.ns(vm.Host), Link: VNICPortName(m.s.Name, vm.Name, i), Match: pb.String(), Why: pb.DownText(),
				Owner: fmt.Sprintf("vm %s eth%d: load balancers", vm.Name, i)})
		}
	}
}

// BalancerPort is a client port with load balancers, as status and the
// agents' counts read them: its namespace and name, and its load
// balancers.
type BalancerPort struct {
	NS, Port  string
	Balancers PortBalancers
}

// LBOf is the load balancer of the port whose VIP sends connections to a
// backend's address and port; false for none.
func (p BalancerPort) LBOf(vip, addr string, port int, proto string) (Balancer, bool) {
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
					return b, true
				}
			}
		}
	}
	return Balancer{}, false
}

// BalancerPorts lists the client ports with load balancers on a host, in
// namespace here, as its model makes them (every host's, each in its lab
// namespace, when host is ""): its VMs' connected vNICs' ports, a TAP
// under its own name.
func BalancerPorts(s *spec.Spec, host, here string) []BalancerPort {
	if !s.HasBalancers() {
		return nil
	}
	var out []BalancerPort
	c := newClientBalancers(s, nil)
	for _, vm := range s.VMs {
		if host != "" && vm.Host != host {
			continue
		}
		ns := here
		if host == "" {
			ns = NSName(s.Name, vm.Host)
		}
		for i, n := range vm.NICs {
			pb := c.of(n)
			if !n.IsConnected() || len(pb) == 0 {
				continue
			}
			port := VNICPortName(s.Name, vm.Name, i)
			if tap := n.TapName(); tap != "" && host != "" {
				port = tap
			}
			out = append(out, BalancerPort{NS: ns, Port: port, Balancers: pb})
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
			lb, ok := p.LBOf(c.VIP, c.Addr, c.Port, c.Proto)
			if !ok {
				continue
			}
			k := strings.Join([]string{lb.Site, lb.Name, c.VIP, c.Addr, c.Proto, fmt.Sprint(c.Port)}, "/")
			sum, ok := sums[k]
			if !ok {
				sum = &status.BackendConns{Site: lb.Site, LB: lb.Name, VIP: c.VIP, Addr: c.Addr, Port: c.Port, Proto: c.Proto}
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
