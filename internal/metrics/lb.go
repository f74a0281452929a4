package metrics

import (
	"strconv"
	"strings"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// readBalancers samples the load balancers of one host's client ports (in
// namespace here), or of every host's on one machine (host ""): per VIP
// and backend, the connections sent and active, summed over the ports,
// and whether the host's first such port marks the backend down.
func readBalancers(c LBCounting, s *spec.Spec, host, here string) []BalancerSample {
	ports := plan.BalancerPorts(s, host, here)
	var out []BalancerSample
	index := map[string]int{}
	for _, p := range ports {
		down, err := c.LBDown(p.NS, p.Port)
		if err != nil {
			continue
		}
		counts, _ := c.LBCounts(p.NS, p.Port)
		onHost := hostOf(s, p.NS, host)
		for _, b := range p.Balancers {
			for _, vip := range b.VIPs {
				for _, be := range b.Backends {
					addr := be.IP
					if vip.Is6() {
						addr = be.IP6
					}
					if !addr.IsValid() {
						continue
					}
					for _, l := range b.Listeners {
						key := strings.Join([]string{onHost, b.Site, b.Name, vip.String(), addr.String(), l.Proto, strconv.Itoa(l.BackendPort)}, "/")
						i, ok := index[key]
						if !ok {
							out = append(out, BalancerSample{Host: onHost, Site: b.Site, LB: b.Name, VIP: vip.String(), Backend: addr.String(),
								Port: l.BackendPort, Proto: l.Proto, Up: !strings.Contains(","+down+",", ","+b.Name+"/"+addr.String()+",")})
							i = len(out) - 1
							index[key] = i
						}
						for _, n := range counts {
							if n.VIP == vip.String() && n.Addr == addr.String() && n.Port == l.BackendPort && n.Proto == l.Proto {
								out[i].Total += n.Total
								out[i].Active += n.Active
							}
						}
					}
				}
			}
		}
	}
	return out
}

// hostOf is the host of a lab namespace (vnet.INFRA.HOST), or host on a
// real host.
func hostOf(s *spec.Spec, ns, host string) string {
	if host != "" {
		return host
	}
	if _, node, ok := plan.SplitNSName(ns); ok {
		return node
	}
	return ns
}
