package spec

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/vnet-project/vnet/internal/units"
)

// LoadBalancer is a layer-4 load balancer of a virtual network (or of a
// port group): clients' connections to its VIP are spread over its
// backends. It has no box of its own: each host that carries the network
// translates its own VMs' packets to the VIP before they leave the host
// (docs/loadbalancers.md).
type LoadBalancer struct {
	Name string `yaml:"name"`
	// VIP and VIP6 are its addresses, IPv4 and IPv6; at least one. On a
	// network each is inside the network's subnet (subnet6), or apart from
	// every subnet of its address space.
	VIP         string       `yaml:"vip"`
	VIP6        string       `yaml:"vip6"`
	Listeners   []Listener   `yaml:"listeners"`
	Backends    []Backend    `yaml:"backends"`
	Selection   *Selection   `yaml:"selection"`   // default: a hash of the connection's addresses and ports
	HealthCheck *HealthCheck `yaml:"healthCheck"` // none: every backend counts as up
}

// Listener is a protocol and port of the VIPs and the backends' port that
// serves it.
type Listener struct {
	Protocol    string `yaml:"protocol"`    // tcp or udp
	Port        int    `yaml:"port"`        // the VIP's
	BackendPort int    `yaml:"backendPort"` // the backends'; default Port
}

// Backend is a vNIC that serves a load balancer: a VM's (its vNIC on the
// network, or NIC) or the vNIC with Address.
type Backend struct {
	VM      string `yaml:"vm"`
	NIC     *int   `yaml:"nic"` // the VM's vNIC (eth N); default its first on the network
	Address string `yaml:"address"`
}

// Selection is how a client's connection picks its backend.
type Selection struct {
	Method string `yaml:"method"` // hash (the default) or source
	// Timeout is, with method source, how long a client keeps its backend
	// after its last new connection (DefaultAffinityTimeout).
	Timeout units.Duration `yaml:"timeout"`
}

// The selection methods.
const (
	SelectHash   = "hash"   // a hash of protocol, addresses and ports: connections spread
	SelectSource = "source" // a hash of the client's address, kept for Timeout: a client stays on one backend
)

// HealthCheck is how hosts probe the backends they run.
type HealthCheck struct {
	Protocol string         `yaml:"protocol"` // tcp (a connect) or udp (no port unreachable); default the first listener's
	Port     int            `yaml:"port"`     // default the first listener's backend port
	Interval units.Duration `yaml:"interval"` // DefaultHealthInterval
	Timeout  units.Duration `yaml:"timeout"`  // of one probe; default the interval, at most DefaultHealthTimeout
	Rise     int            `yaml:"rise"`     // probes in a row that bring a backend back (DefaultHealthRise)
	Fall     int            `yaml:"fall"`     // probes in a row that take it out (DefaultHealthFall)
}

// Defaults and limits of load balancers.
const (
	DefaultAffinityTimeout = 10 * time.Minute
	DefaultHealthInterval  = 2 * time.Second
	DefaultHealthTimeout   = time.Second
	DefaultHealthRise      = 2
	DefaultHealthFall      = 2
	MaxLoadBalancers       = 8  // per network or port group
	MaxListeners           = 8  // per load balancer
	MaxBackends            = 64 // per load balancer
	MinHealthInterval      = 100 * time.Millisecond
	MaxHealthInterval      = time.Hour
	MaxHealthCount         = 10 // rise and fall
	MaxAffinityTimeout     = 24 * time.Hour
)

// EffectiveBackendPort is the backends' port for the listener.
func (l Listener) EffectiveBackendPort() int {
	if l.BackendPort == 0 {
		return l.Port
	}
	return l.BackendPort
}

// Method is the selection method with the default applied.
func (lb *LoadBalancer) Method() string {
	if lb.Selection == nil || lb.Selection.Method == "" {
		return SelectHash
	}
	return lb.Selection.Method
}

// AffinityTimeout is how long a client keeps its backend with method
// source; 0 for hash.
func (lb *LoadBalancer) AffinityTimeout() time.Duration {
	if lb.Method() != SelectSource {
		return 0
	}
	if lb.Selection.Timeout == 0 {
		return DefaultAffinityTimeout
	}
	return time.Duration(lb.Selection.Timeout)
}

// Health is a health check with its defaults applied.
type Health struct {
	Protocol   string
	Port       int
	Interval   time.Duration
	Timeout    time.Duration
	Rise, Fall int
}

// EffectiveHealth is the load balancer's health check with the defaults
// applied; false when it has none.
func (lb *LoadBalancer) EffectiveHealth() (Health, bool) {
	hc := lb.HealthCheck
	if hc == nil {
		return Health{}, false
	}
	h := Health{Protocol: hc.Protocol, Port: hc.Port, Interval: time.Duration(hc.Interval), Timeout: time.Duration(hc.Timeout), Rise: hc.Rise, Fall: hc.Fall}
	if len(lb.Listeners) > 0 {
		if h.Protocol == "" {
			h.Protocol = lb.Listeners[0].Protocol
		}
		if h.Port == 0 {
			h.Port = lb.Listeners[0].EffectiveBackendPort()
		}
	}
	if h.Interval == 0 {
		h.Interval = DefaultHealthInterval
	}
	if h.Timeout == 0 {
		h.Timeout = min(h.Interval, DefaultHealthTimeout)
	}
	if h.Rise == 0 {
		h.Rise = DefaultHealthRise
	}
	if h.Fall == 0 {
		h.Fall = DefaultHealthFall
	}
	return h, true
}

// BalancerSite is where load balancers are: a virtual network or a port
// group. Exactly one of Network and PortGroup is set.
type BalancerSite struct {
	Network   *Network
	PortGroup *PortGroup
}

// Name is the site's name as keys and labels use it: "network NAME" or
// "portgroup NAME".
func (b BalancerSite) Name() string {
	if b.Network != nil {
		return "network " + b.Network.Name
	}
	return "portgroup " + b.PortGroup.Name
}

// Balancers returns the load balancers there.
func (b BalancerSite) Balancers() []LoadBalancer {
	if b.Network != nil {
		return b.Network.LoadBalancers
	}
	return b.PortGroup.LoadBalancers
}

// BalancerSites returns every network and port group with load balancers,
// networks first, each in spec order.
func (s *Spec) BalancerSites() []BalancerSite {
	var out []BalancerSite
	for i := range s.Networks {
		if len(s.Networks[i].LoadBalancers) > 0 {
			out = append(out, BalancerSite{Network: &s.Networks[i]})
		}
	}
	for i := range s.Switches {
		for j := range s.Switches[i].PortGroups {
			if pg := &s.Switches[i].PortGroups[j]; len(pg.LoadBalancers) > 0 {
				out = append(out, BalancerSite{PortGroup: pg})
			}
		}
	}
	return out
}

// HasBalancers reports whether any network or port group has a load
// balancer.
func (s *Spec) HasBalancers() bool {
	for i := range s.Networks {
		if len(s.Networks[i].LoadBalancers) > 0 {
			return true
		}
	}
	for i := range s.Switches {
		for j := range s.Switches[i].PortGroups {
			if len(s.Switches[i].PortGroups[j].LoadBalancers) > 0 {
				return true
			}
		}
	}
	return false
}

// BackendVNIC is a backend resolved to the vNIC that serves it.
type BackendVNIC struct {
	VM, Host string
	NIC      int
	// Network is the vNIC's network; it differs from the load balancer's
	// when the backend is routed to (another network of its router). ""
	// on a port group.
	Network string
	IP, IP6 netip.Addr // its addresses; the zero Addr when it has none
}

// Routed reports whether the backend is reached through the router.
func (b BackendVNIC) Routed(site BalancerSite) bool {
	return site.Network != nil && b.Network != site.Network.Name
}

// Addr is the backend's address of the family of vip.
func (b BackendVNIC) Addr(v6 bool) netip.Addr {
	if v6 {
		return b.IP6
	}
	return b.IP
}

// ResolveBackend finds the vNIC a backend names, on the site's network or,
// routed, on another network of its router, or on the site's port group.
// The error says why there is none.
func (s *Spec) ResolveBackend(site BalancerSite, b Backend) (BackendVNIC, error) {
	if b.VM != "" {
		vm, ok := s.VM(b.VM)
		if !ok {
			return BackendVNIC{}, fmt.Errorf("unknown VM %q", b.VM)
		}
		if b.NIC != nil {
			i := *b.NIC
			if i < 0 || i >= len(vm.NICs) {
				return BackendVNIC{}, fmt.Errorf("VM %s has no vNIC %d (it has %d)", vm.Name, i, len(vm.NICs))
			}
			if !s.servesSite(site, vm.NICs[i]) {
				return BackendVNIC{}, fmt.Errorf("VM %s's vNIC %d is not on %s%s", vm.Name, i, site.Name(), s.orRouted(site))
			}
			return vnicBackend(vm, i), nil
		}
		for _, sameOnly := range []bool{true, false} {
			for i, n := range vm.NICs {
				if s.servesSite(site, n) && (!sameOnly || site.Network == nil || n.Network == site.Network.Name) {
					return vnicBackend(vm, i), nil
				}
			}
		}
		return BackendVNIC{}, fmt.Errorf("VM %s has no vNIC on %s%s", vm.Name, site.Name(), s.orRouted(site))
	}
	a, err := netip.ParseAddr(b.Address)
	if err != nil {
		return BackendVNIC{}, fmt.Errorf("%q is not an address (give it without a prefix length)", b.Address)
	}
	for vi := range s.VMs {
		vm := &s.VMs[vi]
		for i, n := range vm.NICs {
			if !s.servesSite(site, n) {
				continue
			}
			got := vnicBackend(vm, i)
			if got.IP == a || got.IP6 == a {
				return got, nil
			}
		}
	}
	return BackendVNIC{}, fmt.Errorf("no vNIC on %s%s has address %s: a backend is a vNIC of the spec, whose MAC vnet knows", site.Name(), s.orRouted(site), a)
}

// servesSite reports whether a vNIC can be a backend of the site's load
// balancers: on its port group, on its network, or on another network of
// the network's router.
func (s *Spec) servesSite(site BalancerSite, n VNIC) bool {
	if site.PortGroup != nil {
		return n.Network == "" && n.PortGroup == site.PortGroup.Name
	}
	if n.Network == site.Network.Name {
		return true
	}
	if site.Network.Router == "" || n.Network == "" {
		return false
	}
	other, ok := s.Network(n.Network)
	return ok && other.Router == site.Network.Router
}

func (s *Spec) orRouted(site BalancerSite) string {
	if site.Network != nil && site.Network.Router != "" {
		return " or another network of router " + site.Network.Router
	}
	return ""
}

func vnicBackend(vm *VM, i int) BackendVNIC {
	n := vm.NICs[i]
	out := BackendVNIC{VM: vm.Name, Host: vm.Host, NIC: i, Network: n.Network}
	for _, ip := range []string{n.IP, n.IP6} {
		if p, err := netip.ParsePrefix(ip); err == nil {
			if p.Addr().Is4() {
				out.IP = p.Addr()
			} else {
				out.IP6 = p.Addr()
			}
		}
	}
	return out
}
