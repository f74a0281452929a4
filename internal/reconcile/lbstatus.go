package reconcile

import (
	"fmt"
	"net/netip"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// LBCounter is a dataplane that reads what a client port's load balancers
// counted (dataplane.Linux does).
type LBCounter interface {
	LBCounts(ns, port string) ([]status.BackendConns, error)
}

// BalancerHealth says what is known of a backend's health: its host's
// findings by plan.BackendKey, and which hosts report at all (a host that
// does not is taken for gone, and its backends for down). On one machine
// health is nil: no check runs, every backend counts as up and shows as
// unchecked.
type BalancerHealth struct {
	Found    map[string]status.BackendHealth
	Reported map[string]bool
}

// BalancerStatus is each load balancer of the spec with its VIPs,
// listeners and backends: each backend's host, addresses, health and the
// connections conns (every host's client ports' counts) sent it.
func BalancerStatus(s *spec.Spec, health *BalancerHealth, conns []status.BackendConns) []status.Balancer {
	var out []status.Balancer
	for _, site := range s.BalancerSites() {
		for _, lb := range site.Balancers() {
			_, checked := lb.EffectiveHealth()
			b := status.Balancer{Site: site.Name(), Name: lb.Name, Checked: checked}
			for _, v := range []string{lb.VIP, lb.VIP6} {
				if v != "" {
					b.VIPs = append(b.VIPs, v)
				}
			}
			for _, l := range lb.Listeners {
				b.Listeners = append(b.Listeners, fmt.Sprintf("%s %d -> %d", l.Protocol, l.Port, l.EffectiveBackendPort()))
			}
			for _, be := range lb.Backends {
				v, err := s.ResolveBackend(site, be)
				if err != nil {
					continue
				}
				bb := status.BalancerBackend{VM: v.VM, NIC: v.NIC, Host: v.Host, Health: "unchecked"}
				var addrs []netip.Addr
				for _, a := range []netip.Addr{v.IP, v.IP6} {
					if a.IsValid() {
						addrs = append(addrs, a)
						bb.Addrs = append(bb.Addrs, a.String())
					}
				}
				if checked {
					bb.Health, bb.Error = backendHealth(health, plan.BackendKey(site.Name(), lb.Name, v.VM, v.NIC), v.Host)
				}
				for _, c := range conns {
					if c.Site == site.Name() && c.LB == lb.Name && containsAddr(addrs, c.Addr) {
						bb.Connections += c.Total
						bb.Active += c.Active
					}
				}
				b.Backends = append(b.Backends, bb)
			}
			out = append(out, b)
		}
	}
	return out
}

func backendHealth(h *BalancerHealth, key, host string) (string, string) {
	switch {
	case h == nil:
		return "unchecked", "" // on one machine no health check runs
	case !h.Reported[host]:
		return "down", "no report from host " + host
	}
	found, ok := h.Found[key]
	switch {
	case !ok:
		return "unknown", ""
	case found.Up:
		return "up", ""
	}
	return "down", found.Error
}

func containsAddr(addrs []netip.Addr, s string) bool {
	for _, a := range addrs {
		if a.String() == s {
			return true
		}
	}
	return false
}

// balancerStatus is BalancerStatus on one machine: no health checks run
// there, and the counts are read from every client port.
func (e *Engine) balancerStatus(s *spec.Spec) []status.Balancer {
	if !s.HasBalancers() {
		return nil
	}
	var conns []status.BackendConns
	if c, ok := e.DP.(LBCounter); ok {
		conns = plan.SumBalancerConns(s, "", "", c.LBCounts)
	}
	return BalancerStatus(s, nil, conns)
}

// ReportedBalancers is BalancerStatus of a cluster: health and counts as
// the hosts' agents report them.
func ReportedBalancers(s *spec.Spec, reports []etcdstore.Report) []status.Balancer {
	if !s.HasBalancers() {
		return nil
	}
	h := &BalancerHealth{Found: map[string]status.BackendHealth{}, Reported: map[string]bool{}}
	var conns []status.BackendConns
	for _, r := range reports {
		h.Reported[r.Host] = true
		for _, bh := range r.Health {
			h.Found[bh.Key] = bh
		}
		conns = append(conns, r.Conns...)
	}
	return BalancerStatus(s, h, conns)
}
