package plan

import (
	"net/netip"
	"time"

	"github.com/vnet-project/vnet/internal/spec"
)

// HealthTarget is one backend of a load balancer with a health check, as
// the host that runs the backend probes it.
type HealthTarget struct {
	Key        string // BackendKey
	Site, LB   string // "network a-web", "web"
	VM         string
	NIC        int
	Host       string
	Probe      BackendProbe
	Interval   time.Duration
	Rise, Fall int
}

// BackendProbe is one probe of a backend: a TCP SYN (or a UDP datagram)
// from a VIP of its load balancer, sent into the backend's vNIC on its
// switch port, and what the backend answers there.
type BackendProbe struct {
	NS, Port string // the backend's switch port, in its host's namespace
	Proto    string // tcp or udp
	Src, Dst netip.Addr
	SrcMAC   string // the VIP's
	DstMAC   string // the backend vNIC's
	DstPort  int
	// Avoid are the VIP's listener ports: a probe's source port is none of
	// them, or its answer would be taken for a client's connection.
	Avoid   []int
	Timeout time.Duration
}

// HealthTargets are the backends with a health check that the host runs
// (every host's, when host is ""), with the namespace that holds the
// host's switch ports: here on a real host, the host's lab namespace on
// one machine. A backend is probed from a VIP of the family of one of its
// addresses, IPv4 first. A backend on a TAP is probed on the TAP; one whose
// vNIC is disconnected is not probed (its port is cut from the switch) and
// counts as down.
func HealthTargets(s *spec.Spec, host, here string) []HealthTarget {
	var out []HealthTarget
	m := &modeler{s: s}
	for _, site := range s.BalancerSites() {
		for _, lb := range site.Balancers() {
			h, ok := lb.EffectiveHealth()
			if !ok {
				continue
			}
			var avoid []int
			for _, l := range lb.Listeners {
				avoid = append(avoid, l.Port)
			}
			for _, be := range lb.Backends {
				v, err := s.ResolveBackend(site, be)
				if err != nil || host != "" && v.Host != host {
					continue
				}
				vm, _ := s.VM(v.VM)
				n := vm.NICs[v.NIC]
				t := HealthTarget{Key: BackendKey(site.Name(), lb.Name, v.VM, v.NIC), Site: site.Name(), LB: lb.Name, VM: v.VM, NIC: v.NIC,
					Host: v.Host, Interval: h.Interval, Rise: h.Rise, Fall: h.Fall}
				ns := here
				if host == "" {
					ns = NSName(s.Name, v.Host)
				}
				port := VNICPortName(s.Name, v.VM, v.NIC)
				if tap := n.TapName(); tap != "" {
					port = tap
				}
				t.Probe = BackendProbe{NS: ns, Port: port, Proto: h.Protocol, DstMAC: m.vnicMAC(vm, v.NIC), DstPort: h.Port,
					SrcMAC: VIPMAC(s.Name, site.Name(), lb.Name), Avoid: avoid, Timeout: h.Timeout}
				vip4, err4 := netip.ParseAddr(lb.VIP)
				vip6, err6 := netip.ParseAddr(lb.VIP6)
				switch {
				case err4 == nil && v.IP.IsValid():
					t.Probe.Src, t.Probe.Dst = vip4, v.IP
				case err6 == nil && v.IP6.IsValid():
					t.Probe.Src, t.Probe.Dst = vip6, v.IP6
				default:
					continue // validated: a backend has an address of a VIP's family
				}
				if !n.IsConnected() {
					t.Probe.Port = "" // nothing to probe: down
				}
				out = append(out, t)
			}
		}
	}
	return out
}
