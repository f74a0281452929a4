package service

import (
	"fmt"
	"net/netip"

	"github.com/vnet-project/vnet/internal/dataplane"
)

// ContainerRoute is a route a container's vNIC gets: to Dst (a prefix),
// by way of Gateway ("" for none).
type ContainerRoute struct{ Dst, Gateway string }

// SetContainerRoutes gives a container's vNIC, on this machine, the
// routes through it that its IPAM or its port group's gateway say (a
// default route). vnet sets addresses on vNICs, not routes: these are the
// container runtime's, set once, and go with the vNIC.
func SetContainerRoutes(netns, ifname string, routes []ContainerRoute) error {
	if len(routes) == 0 {
		return nil
	}
	rs := make([]dataplane.Route, 0, len(routes))
	for _, r := range routes {
		dst, err := netip.ParsePrefix(r.Dst)
		if err != nil {
			return Invalid(fmt.Sprintf("route to %q: not a prefix", r.Dst))
		}
		var gw netip.Addr
		if r.Gateway != "" {
			if gw, err = netip.ParseAddr(r.Gateway); err != nil {
				return Invalid(fmt.Sprintf("route to %s: gateway %q is not an address", r.Dst, r.Gateway))
			}
		}
		rs = append(rs, dataplane.Route{Dst: dst, Gw: gw})
	}
	dp, err := dataplane.New()
	if err != nil {
		return err
	}
	defer dp.Close()
	return dp.SetRoutes(netns, ifname, rs)
}
