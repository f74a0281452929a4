package dataplane

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// Route is a route through a link: to Dst, by way of Gw (none: on the
// link).
type Route struct {
	Dst netip.Prefix
	Gw  netip.Addr
}

// SetRoutes gives a link of a namespace routes through it, each replacing
// any to the same destination. A container's vNIC gets those its IPAM
// says; they go with the link.
// Equivalent to: ip -n NS route replace DST via GW dev LINK
func (l *Linux) SetRoutes(ns, link string, routes []Route) error {
	h, err := l.handle(ns)
	if err != nil {
		return err
	}
	lk, err := h.LinkByName(link)
	if err != nil {
		return fmt.Errorf("ip -n %s link show %s: %w", ns, link, err)
	}
	for _, r := range routes {
		dst := &net.IPNet{IP: r.Dst.Masked().Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), r.Dst.Addr().BitLen())}
		rt := &netlink.Route{LinkIndex: lk.Attrs().Index, Dst: dst}
		if r.Gw.IsValid() {
			rt.Gw = r.Gw.AsSlice()
		}
		if err := h.RouteReplace(rt); err != nil {
			return fmt.Errorf("ip -n %s route replace %s via %s dev %s: %w", ns, r.Dst, r.Gw, link, err)
		}
	}
	return nil
}
