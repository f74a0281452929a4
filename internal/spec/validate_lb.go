package spec

import (
	"fmt"
	"net/netip"
	"time"
)

// checkLoadBalancers validates the load balancers of every network and port
// group: names, VIPs (inside the network's subnet or apart from every
// subnet of its address space, unique there and no vNIC's or gateway's),
// listeners (no two on one protocol and port), backends (vNICs of the
// network, routed ones of its router, or of the port group), selection and
// health check.
func (v *validator) checkLoadBalancers() {
	vips := map[string]map[netip.Addr]string{} // address space -> VIP -> path
	names := map[string]map[string]string{}    // address space -> load balancer name -> path
	for i := range v.s.Networks {
		n := &v.s.Networks[i]
		if len(n.LoadBalancers) == 0 {
			continue
		}
		space := v.x.spaces[n]
		if vips[space] == nil {
			vips[space], names[space] = map[netip.Addr]string{}, map[string]string{}
		}
		if v.netIPs == nil {
			v.indexAddressSpaces()
		}
		v.checkSiteBalancers(indexPath("networks", i)+".loadBalancers", BalancerSite{Network: n}, names[space], vips[space], v.netIPs[space])
	}
	for i := range v.s.Switches {
		sw := &v.s.Switches[i]
		for j := range sw.PortGroups {
			pg := &sw.PortGroups[j]
			if len(pg.LoadBalancers) == 0 {
				continue
			}
			p := fmt.Sprintf("switches[%d].portgroups[%d].loadBalancers", i, j)
			if len(sw.Uplinks) > 1 {
				v.errf(p, "switch %s has %d uplinks, whose teaming steers each port's frames before a load balancer could translate them: put load balancers on a port group of a switch with at most one uplink, or on a virtual network", sw.Name, len(sw.Uplinks))
				continue
			}
			if vips["port groups"] == nil {
				vips["port groups"] = map[netip.Addr]string{}
			}
			v.checkSiteBalancers(p, BalancerSite{PortGroup: pg}, map[string]string{}, vips["port groups"], v.ips)
		}
	}
}

// checkSiteBalancers checks one network's or port group's load balancers;
// names and vips are the load balancers' names and VIPs of its address
// space so far (a client port translates all of them, so names are unique
// there), taken the addresses of its vNICs and gateways.
func (v *validator) checkSiteBalancers(p string, site BalancerSite, names map[string]string, vips, taken map[netip.Addr]string) {
	lbs := site.Balancers()
	if len(lbs) > MaxLoadBalancers {
		v.errf(p, "at most %d load balancers on a %s, got %d", MaxLoadBalancers, siteKind(site), len(lbs))
		return
	}
	for k := range lbs {
		lb := &lbs[k]
		lp := indexPath(p, k)
		if v.checkName(lp+".name", lb.Name, maxObjectName, objectName, "a load balancer") {
			v.unique(names, lb.Name, lp+".name", "load balancer (names are unique among a router's networks)")
		}
		has4 := v.checkVIP(lp+".vip", lb.VIP, false, site, vips, taken)
		has6 := v.checkVIP(lp+".vip6", lb.VIP6, true, site, vips, taken)
		if lb.VIP == "" && lb.VIP6 == "" {
			v.errf(lp+".vip", "a load balancer needs a vip (IPv4) or vip6 (IPv6), or both")
		}
		v.checkListeners(lp+".listeners", lb.Listeners)
		v.checkBackends(lp, site, lb, has4, has6)
		v.checkSelection(lp+".selection", lb.Selection)
		v.checkHealthCheck(lp+".healthCheck", lb)
	}
}

func siteKind(site BalancerSite) string {
	if site.Network != nil {
		return "network"
	}
	return "port group"
}

// checkVIP checks a VIP of one family and reports whether it is one.
func (v *validator) checkVIP(path, s string, want6 bool, site BalancerSite, vips, taken map[netip.Addr]string) bool {
	if s == "" {
		return false
	}
	a, err := netip.ParseAddr(s)
	field, other := "vip", "vip6"
	if want6 {
		field, other = "vip6", "vip"
	}
	switch {
	case err != nil:
		v.errf(path, "%q is not an address (give it without a prefix length)", s)
		return false
	case a.Is6() != want6 || a.Is4In6():
		v.errf(path, "%s is not an IPv%s address: give it as %s", a, map[bool]string{true: "6", false: "4"}[want6], other)
		return false
	case a.IsMulticast() || a.IsUnspecified() || a.IsLoopback() || a.IsLinkLocalUnicast() || a == netip.IPv4Unspecified():
		v.errf(path, "%s cannot be a %s: it is not a unicast address of a network", a, field)
		return false
	}
	if prev, ok := taken[a]; ok {
		v.errf(path, "%s %s is already the address at %s", field, a, prev)
		return false
	}
	if prev, ok := vips[a]; ok {
		v.errf(path, "%s %s is also the VIP at %s", field, a, prev)
		return false
	}
	vips[a] = path
	if site.Network != nil {
		v.checkVIPSubnet(path, a, field, site.Network)
	}
	return true
}

// checkVIPSubnet checks that a network's VIP is inside its subnet, where it
// is neither its network nor its broadcast address, or apart from every
// subnet of the network's address space.
func (v *validator) checkVIPSubnet(path string, a netip.Addr, field string, n *Network) {
	space := v.x.spaces[n]
	for i := range v.s.Networks {
		other := &v.s.Networks[i]
		if v.x.spaces[other] != space {
			continue
		}
		for _, sub := range []string{other.Subnet, other.Subnet6} {
			subnet, err := netip.ParsePrefix(sub)
			if err != nil || !subnet.Contains(a) {
				continue
			}
			switch {
			case other != n:
				v.errf(path, "%s %s is inside network %s's subnet %s: give a VIP inside network %s's own subnet or apart from every subnet of %s", field, a, other.Name, subnet, n.Name, space)
			case a.Is4() && subnet.Bits() < 31 && (a == subnet.Addr() || a == lastAddr(subnet)):
				v.errf(path, "%s %s is the network or broadcast address of %s", field, a, subnet)
			case a.Is6() && a == subnet.Addr():
				v.errf(path, "%s %s is the subnet-router anycast address of %s", field, a, subnet)
			}
		}
	}
}

func (v *validator) checkListeners(p string, ls []Listener) {
	switch {
	case len(ls) == 0:
		v.errf(p, "a load balancer needs a listener, e.g. listeners: [{protocol: tcp, port: 80}]")
		return
	case len(ls) > MaxListeners:
		v.errf(p, "a load balancer has at most %d listeners, got %d", MaxListeners, len(ls))
		return
	}
	seen := map[string]string{}
	for i, l := range ls {
		lp := indexPath(p, i)
		switch l.Protocol {
		case "tcp", "udp":
			key := fmt.Sprintf("%s port %d", l.Protocol, l.Port)
			if prev, dup := seen[key]; dup {
				v.errf(lp+".port", "%s is also %s's: a listener is one protocol and port", key, prev)
			} else {
				seen[key] = lp
			}
		case "":
			v.errf(lp+".protocol", "a listener needs a protocol: tcp or udp")
		default:
			v.errf(lp+".protocol", "protocol %q: want tcp or udp", l.Protocol)
		}
		if l.Port < 1 || l.Port > 65535 {
			v.errf(lp+".port", "port %d is outside 1..65535", l.Port)
		}
		if (l.BackendPort != 0 || v.doc.Given(lp+".backendPort")) && (l.BackendPort < 1 || l.BackendPort > 65535) {
			v.errf(lp+".backendPort", "backendPort %d is outside 1..65535 (leave it out for the listener's port)", l.BackendPort)
		}
	}
}

// checkBackends checks that every backend is a vNIC of the site, once, and
// that each VIP family has a backend with an address of that family.
func (v *validator) checkBackends(lp string, site BalancerSite, lb *LoadBalancer, has4, has6 bool) {
	p := lp + ".backends"
	switch {
	case len(lb.Backends) == 0:
		v.errf(p, "a load balancer needs a backend, e.g. backends: [{vm: web1}]")
		return
	case len(lb.Backends) > MaxBackends:
		v.errf(p, "a load balancer has at most %d backends, got %d", MaxBackends, len(lb.Backends))
		return
	}
	seen := map[[2]string]string{}
	any4, any6 := false, false
	for i, b := range lb.Backends {
		bp := indexPath(p, i)
		field := bp + ".vm"
		switch {
		case b.VM != "" && b.Address != "":
			v.errf(bp, "a backend is a vm or an address, not both")
			continue
		case b.VM == "" && b.Address == "":
			v.errf(bp, "a backend needs a vm (and nic) or an address")
			continue
		case b.Address != "":
			field = bp + ".address"
			if b.NIC != nil {
				v.errf(bp+".nic", "nic goes with vm, not with address")
			}
		case b.NIC != nil:
			field = bp + ".nic"
		}
		got, err := v.s.ResolveBackend(site, b)
		if err != nil {
			v.errf(field, "%v", err)
			continue
		}
		key := [2]string{got.VM, fmt.Sprint(got.NIC)}
		if prev, dup := seen[key]; dup {
			v.errf(field, "VM %s's vNIC %d is already the backend at %s", got.VM, got.NIC, prev)
			continue
		}
		seen[key] = bp
		any4 = any4 || got.IP.IsValid()
		any6 = any6 || got.IP6.IsValid()
		if !got.IP.IsValid() && !got.IP6.IsValid() {
			v.errf(field, "VM %s's vNIC %d has no address to send connections to", got.VM, got.NIC)
		}
		if vm, _ := v.s.VM(got.VM); vm.NICs[got.NIC].TapName() != "" && vm.NICs[got.NIC].MAC == "" {
			v.errf(field, "VM %s's vNIC %d is a TAP whose guest chose its MAC: give the vNIC its mac, which its connections are sent to", got.VM, got.NIC)
		}
	}
	if has4 && !any4 && len(seen) > 0 {
		v.errf(lp+".vip", "no backend has an IPv4 address for vip %s", lb.VIP)
	}
	if has6 && !any6 && len(seen) > 0 {
		v.errf(lp+".vip6", "no backend has an IPv6 address for vip6 %s", lb.VIP6)
	}
}

func (v *validator) checkSelection(p string, sel *Selection) {
	if sel == nil {
		return
	}
	switch sel.Method {
	case "", SelectHash:
		if sel.Timeout != 0 || v.doc.Given(p+".timeout") {
			v.errf(p+".timeout", "a timeout is for method source: method hash keeps no client on a backend")
		}
	case SelectSource:
		if t := time.Duration(sel.Timeout); (t != 0 || v.doc.Given(p+".timeout")) && (t < time.Second || t > MaxAffinityTimeout) {
			v.errf(p+".timeout", "timeout %s is outside 1s..%s", t, MaxAffinityTimeout)
		}
	default:
		v.errf(p+".method", "method %q: want hash (of addresses and ports) or source (the client's address)", sel.Method)
	}
}

func (v *validator) checkHealthCheck(p string, lb *LoadBalancer) {
	hc := lb.HealthCheck
	if hc == nil {
		return
	}
	switch hc.Protocol {
	case "", "tcp", "udp":
	default:
		v.errf(p+".protocol", "protocol %q: want tcp (a connect) or udp (a datagram no port unreachable answers)", hc.Protocol)
	}
	if (hc.Port != 0 || v.doc.Given(p+".port")) && (hc.Port < 1 || hc.Port > 65535) {
		v.errf(p+".port", "port %d is outside 1..65535 (leave it out for the first listener's backend port)", hc.Port)
	}
	interval := time.Duration(hc.Interval)
	if (interval != 0 || v.doc.Given(p+".interval")) && (interval < MinHealthInterval || interval > MaxHealthInterval) {
		v.errf(p+".interval", "interval %s is outside %s..%s", interval, MinHealthInterval, MaxHealthInterval)
	}
	h, _ := lb.EffectiveHealth()
	if timeout := time.Duration(hc.Timeout); timeout != 0 || v.doc.Given(p+".timeout") {
		if timeout < 10*time.Millisecond || timeout > h.Interval {
			v.errf(p+".timeout", "timeout %s is outside 10ms..%s (the interval): a probe ends before the next starts", timeout, h.Interval)
		}
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"rise", hc.Rise}, {"fall", hc.Fall}} {
		if (c.n != 0 || v.doc.Given(p+"."+c.name)) && (c.n < 1 || c.n > MaxHealthCount) {
			v.errf(p+"."+c.name, "%s %d is outside 1..%d", c.name, c.n, MaxHealthCount)
		}
	}
}
