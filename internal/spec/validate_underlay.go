package spec

import (
	"fmt"
	"net/netip"
	"strings"
)

// MaxVNI is the largest VXLAN network identifier (24 bits).
const MaxVNI = 1<<24 - 1

// checkUnderlay checks the hosts' tunnel addresses and the switches' VNIs.
// A switch that spans hosts is carried between them over VXLAN only where
// its hosts say where their tunnels end, so either all of its hosts have an
// underlay address or none has.
func (v *validator) checkUnderlay() {
	seen := map[netip.Addr]string{}
	for i, h := range v.s.Hosts {
		if h.Underlay == "" {
			continue
		}
		p := fmt.Sprintf("hosts[%d].underlay", i)
		a, err := netip.ParseAddr(h.Underlay)
		switch {
		case strings.Contains(h.Underlay, "/"):
			v.errf(p, "underlay %q: give the host's address without a prefix length, e.g. 10.0.0.11", h.Underlay)
			continue
		case err != nil:
			v.errf(p, "underlay %q is not an IP address", h.Underlay)
			continue
		case !v.notMapped(p, "", a):
			continue
		case a.IsUnspecified() || a.IsMulticast() || a.IsLoopback():
			v.errf(p, "underlay %s: a tunnel needs the host's own unicast address", a)
			continue
		}
		if first, dup := seen[a]; dup {
			v.errf(p, "underlay %s is also %s's", a, first)
			continue
		}
		seen[a] = p
	}
	vnis := map[int]string{}
	for i, sw := range v.s.Switches {
		p := indexPath("switches", i)
		if sw.VNI != 0 {
			if sw.VNI < 1 || sw.VNI > MaxVNI {
				v.errf(p+".vni", "vni %d is outside 1..%d", sw.VNI, MaxVNI)
			} else if first, dup := vnis[sw.VNI]; dup {
				v.errf(p+".vni", "vni %d is also %s's", sw.VNI, first)
			} else {
				vnis[sw.VNI] = p
			}
		}
		hosts := sw.SwitchHosts()
		if len(hosts) < 2 || v.s.HasRealUplink(&sw) {
			continue // not carried over VXLAN
		}
		var with, without []string
		for _, hn := range hosts {
			if h, ok := v.s.Host(hn); ok && h.Underlay != "" {
				with = append(with, hn)
			} else if ok {
				without = append(without, hn)
			}
		}
		if len(with) > 0 && len(without) > 0 {
			v.errf(p+".name", "switch %s spans hosts %s over VXLAN, but %s has no underlay address (hosts[].underlay)",
				sw.Name, strings.Join(hosts, ", "), strings.Join(without, ", "))
		}
	}
}

// HasRealUplink reports whether an uplink of the switch is a real NIC
// (device:) on some host: then the hosts share a physical network, which
// carries the switch between them, and no tunnel does.
func (s *Spec) HasRealUplink(sw *Switch) bool {
	for _, u := range sw.Uplinks {
		for host, nic := range u.NICs {
			h, ok := s.Host(host)
			if !ok {
				continue
			}
			for _, n := range h.NICs {
				if n.Name == nic && n.IsDevice() {
					return true
				}
			}
		}
	}
	return false
}
