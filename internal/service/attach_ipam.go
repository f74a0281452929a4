package service

import (
	"fmt"
	"math/big"
	"net/netip"

	"github.com/vnet-project/vnet/internal/spec"
)

// freeAddress is the lowest address of subnet that no vNIC, host port or
// gateway of the indexed spec uses, with the subnet's prefix length: what
// vnet gives a container that asks it for one. It skips the subnet's
// network address, and for IPv4 its broadcast address. The spec is the
// record of what is taken, read under the infrastructure's lock, so two
// containers never get one address. The scan starts where the last one
// found the lowest free address, or lower where one was given back since
// (attachIndex.low): the gaps that deleted containers left are filled
// first, and an ADD does not step over the thousands taken before it.
func (x *attachIndex) freeAddress(subnet netip.Prefix) (string, error) {
	last := lastOf(subnet)
	from := subnet.Addr().Next()
	taken := func(a netip.Addr) bool { return x.used[a] > 0 }
	if !x.built() {
		used := usedAddresses(x.doc.Spec, subnet)
		taken = func(a netip.Addr) bool { return used[a] }
	} else if low, ok := x.low[subnet]; ok && from.Less(low) {
		from = low
	}
	for a := from; a.IsValid() && subnet.Contains(a); a = a.Next() {
		if a.Is4() && a == last && subnet.Bits() < 31 {
			break
		}
		if !taken(a) {
			if x.built() {
				x.low[subnet] = a
			}
			return netip.PrefixFrom(a, subnet.Bits()).String(), nil
		}
	}
	return "", fmt.Errorf("no free address left in %s", subnet)
}

// lastOf is the last address of a prefix.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	n := new(big.Int).SetBytes(b)
	host := len(b)*8 - p.Bits()
	n.Or(n, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(host)), big.NewInt(1)))
	out := n.FillBytes(make([]byte, len(b)))
	a, _ := netip.AddrFromSlice(out)
	return a
}

// usedAddresses are the addresses of subnet that the spec gives vNICs,
// host ports, port groups' and networks' gateways.
func usedAddresses(s *spec.Spec, subnet netip.Prefix) map[netip.Addr]bool {
	// Sized for a vNIC a VM, as containers have: a map grown from empty
	// to thousands costs more than the parses that fill it.
	used := make(map[netip.Addr]bool, len(s.VMs))
	take := func(cidr string) {
		if cidr == "" {
			return // no address, and no error made to say so
		}
		if p, err := netip.ParsePrefix(cidr); err == nil && subnet.Contains(p.Addr()) {
			used[p.Addr()] = true
		}
	}
	takeAddr := func(addr string) {
		if addr == "" {
			return
		}
		if a, err := netip.ParseAddr(addr); err == nil && subnet.Contains(a) {
			used[a] = true
		}
	}
	for i := range s.VMs {
		for j := range s.VMs[i].NICs {
			n := &s.VMs[i].NICs[j]
			take(n.IP)
			take(n.IP6)
		}
	}
	for _, hp := range s.HostPorts {
		take(hp.IP)
	}
	for _, sw := range s.Switches {
		for _, pg := range sw.PortGroups {
			takeAddr(pg.Gateway)
		}
	}
	for _, n := range s.Networks {
		takeAddr(n.Gateway)
		takeAddr(n.Gateway6)
	}
	return used
}
