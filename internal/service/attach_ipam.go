package service

import (
	"fmt"
	"math/big"
	"net/netip"
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
	if low, ok := x.low[subnet]; ok && from.Less(low) {
		from = low
	}
	for a := from; a.IsValid() && subnet.Contains(a); a = a.Next() {
		if a.Is4() && a == last && subnet.Bits() < 31 {
			break
		}
		if x.used[a] == 0 {
			x.low[subnet] = a
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
