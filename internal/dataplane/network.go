package dataplane

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/rtnl"
	"github.com/vnet-project/vnet/internal/plan"
)

// The objects of virtual networks (plan's model_network.go): the static
// bridge entries and neighbour entries that answer ARP on the host, and the
// bridge-port settings of their tunnels.

// isolatePort makes a network's tunnel a bridge port that learns nothing
// (where remote MACs are, the plan's static entries say; a learned one could
// be a forged source) and does not pass on ARP requests the bridge answers
// from its neighbour entries.
// Equivalent to: bridge link set dev VTEP learning off neigh_suppress on
func isolatePort(h *netlink.Handle, link netlink.Link) error {
	if err := h.LinkSetLearning(link, false); err != nil {
		return fmt.Errorf("bridge link set dev %s learning off: %w", link.Attrs().Name, err)
	}
	if err := h.LinkSetBrNeighSuppress(link, true); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ERANGE) {
			return &FeatureError{Feature: "bridge port neighbour suppression (neigh_suppress)",
				Hint: "Linux 4.15 or later", Err: err}
		}
		return fmt.Errorf("bridge link set dev %s neigh_suppress on: %w", link.Attrs().Name, err)
	}
	return nil
}

// bridgeFDB is the bridge's static entry for MAC on a port. It is sticky:
// the bridge would otherwise move a static entry to whatever port a frame
// from that MAC arrives on (a VM that just moved here, before the entry
// naming its old host is deleted), and then flush it with that port.
func bridgeFDB(link netlink.Link, r plan.Resource) (*netlink.Neigh, error) {
	mac, err := net.ParseMAC(r.MAC)
	if err != nil {
		return nil, err
	}
	return &netlink.Neigh{LinkIndex: link.Attrs().Index, Family: unix.AF_BRIDGE,
		State: netlink.NUD_NOARP, Flags: netlink.NTF_MASTER | netlink.NTF_STICKY, HardwareAddr: mac}, nil
}

// Equivalent to: bridge fdb replace MAC dev PORT master static sticky
func setBridgeFDB(h *netlink.Handle, link netlink.Link, r plan.Resource) error {
	n, err := bridgeFDB(link, r)
	if err != nil {
		return err
	}
	if err := h.NeighSet(n); err != nil {
		return fmt.Errorf("bridge fdb replace %s dev %s master static: %w", r.MAC, r.Link, err)
	}
	return nil
}

// Equivalent to: bridge fdb del MAC dev PORT master
func delBridgeFDB(h *netlink.Handle, link netlink.Link, r plan.Resource) error {
	n, err := bridgeFDB(link, r)
	if err != nil {
		return err
	}
	if err := h.NeighDel(n); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("bridge fdb del %s dev %s master: %w", r.MAC, r.Link, err)
	}
	return nil
}

// isBridgeStatic reports whether a bridge entry is a static one a user (or
// vnet) added: not learned, and not the port's own address (permanent).
// The bridge reports its entries without NTF_MASTER, naming itself as
// their master instead; the port's own (NTF_SELF) are the tunnel's.
func isBridgeStatic(n netlink.Neigh) bool {
	return n.Flags&netlink.NTF_SELF == 0 && n.MasterIndex != 0 && n.State&netlink.NUD_NOARP != 0 &&
		n.State&netlink.NUD_PERMANENT == 0 && n.Vlan == 0 && n.IP == nil
}

func neighOf(link netlink.Link, r plan.Resource) (*netlink.Neigh, error) {
	ip := net.ParseIP(r.CIDR)
	if ip == nil {
		return nil, fmt.Errorf("neighbour %q is not an address", r.CIDR)
	}
	mac, err := net.ParseMAC(r.MAC)
	if err != nil {
		return nil, err
	}
	family := unix.AF_INET
	if ip.To4() == nil {
		family = unix.AF_INET6
	}
	return &netlink.Neigh{LinkIndex: link.Attrs().Index, Family: family, State: netlink.NUD_PERMANENT,
		IP: ip, HardwareAddr: mac}, nil
}

// ensureNeigh sets a permanent neighbour entry. On a network's bridge it
// is what the bridge answers ARP from for the ports with neigh_suppress.
// Equivalent to: ip -n NS neigh replace IP lladdr MAC dev LINK nud permanent
func (l *Linux) ensureNeigh(r plan.Resource) error {
	h, link, err := l.linkIn(r.NS, r.Link)
	if err != nil {
		return err
	}
	n, err := neighOf(link, r)
	if err != nil {
		return err
	}
	if err := h.NeighSet(n); err != nil {
		return fmt.Errorf("ip neigh replace %s lladdr %s dev %s: %w", r.CIDR, r.MAC, r.Link, err)
	}
	return nil
}

// Equivalent to: ip -n NS neigh del IP dev LINK
func (l *Linux) removeNeigh(r plan.Resource) error {
	h, link, err := l.existingLink(r.NS, r.Link)
	if link == nil || err != nil {
		return err
	}
	n, err := neighOf(link, r)
	if err != nil {
		return err
	}
	if err := h.NeighDel(n); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("ip neigh del %s dev %s: %w", r.CIDR, r.Link, err)
	}
	return nil
}

// neighDumps reads a namespace's neighbour or forwarding entries of one
// family once and hands them out by link. The kernel answers a plain dump
// with every entry of the namespace whatever link it is asked for (the
// links are picked out here), so one dump per link would read all of them
// again for each of a host's thousands of networks. A read of a few links
// of such a namespace (perLink) asks instead for each link's entries alone.
type neighDumps struct {
	h       *netlink.Handle
	perLink *nl.SocketHandle
	byLink  map[int]map[int][]netlink.Neigh // family -> link index -> entries
}

// of returns the link's entries of family (netlink.FAMILY_ALL: the
// neighbour tables; unix.AF_BRIDGE: the forwarding databases).
func (d *neighDumps) of(index, family int) ([]netlink.Neigh, error) {
	if d.perLink != nil {
		return rtnl.NeighsOfLink(d.perLink, index, family)
	}
	if d.byLink == nil {
		d.byLink = map[int]map[int][]netlink.Neigh{}
	}
	m, ok := d.byLink[family]
	if !ok {
		all, err := rtnl.RetryDump(func() ([]netlink.Neigh, error) { return d.h.NeighList(0, family) })
		if err != nil {
			return nil, err
		}
		m = map[int][]netlink.Neigh{}
		for _, n := range all {
			m[n.LinkIndex] = append(m[n.LinkIndex], n)
		}
		d.byLink[family] = m
	}
	return m[index], nil
}

// observeNeighs reads a link's permanent neighbour entries.
func observeNeighs(entries *neighDumps, link netlink.Link, ns string) ([]plan.Resource, error) {
	neighs, err := entries.of(link.Attrs().Index, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("ip -n %s neigh show dev %s: %w", ns, link.Attrs().Name, err)
	}
	var out []plan.Resource
	for _, n := range neighs {
		if n.State&netlink.NUD_PERMANENT == 0 || n.IP == nil || n.LinkIndex != link.Attrs().Index {
			continue
		}
		out = append(out, plan.Resource{Kind: plan.KindNeigh, NS: ns, Link: link.Attrs().Name, CIDR: n.IP.String(),
			MAC: strings.ToLower(n.HardwareAddr.String())})
	}
	return out, nil
}

// isNetworkOwner reports whether a link's owner label is a virtual
// network's (plan's networks: "INFRA: network NAME on HOST").
func isNetworkOwner(owner string) bool {
	_, rest, ok := strings.Cut(owner, ": ")
	return ok && strings.HasPrefix(rest, "network ")
}

// hasIPv6 reports whether any of a link's addresses is IPv6: a network's
// bridge must have none, or its VMs could reach the host through it.
func hasIPv6(addrs []netlink.Addr) bool {
	for _, a := range addrs {
		if a.IP.To4() == nil {
			return true
		}
	}
	return false
}

// isolateBridge keeps the host's IPv6 stack off a network's bridge: no
// link-local address is made for it, and any it has goes. (IPv4 has no
// address on it; rp_filter drops what a VM sends to the host's others.)
// Equivalent to: ip link set BRIDGE addrgenmode none; ip -6 addr flush dev BRIDGE
func isolateBridge(h *netlink.Handle, link netlink.Link) error {
	if err := h.LinkSetIP6AddrGenMode(link, 1); err != nil && !errors.Is(err, unix.EAFNOSUPPORT) {
		return fmt.Errorf("ip link set %s addrgenmode none: %w", link.Attrs().Name, err)
	}
	addrs, err := h.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("ip -6 addr show dev %s: %w", link.Attrs().Name, err)
	}
	for _, a := range addrs {
		if err := h.AddrDel(link, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("ip -6 addr del %s dev %s: %w", a.IPNet, link.Attrs().Name, err)
		}
	}
	return nil
}

// hostPeerAliases are the aliases of the second ends of the infrastructure's
// veth pairs with both ends in the host's namespace (the host ports that
// carry networks' tunnels). Such an end's alias names its first end's
// namespace, the host's, which does not tell whose it is, so the desired
// pairs say which are the infrastructure's. One the model no longer wants
// goes with its first end, which names the infrastructure itself.
func hostPeerAliases(infra string, hints []plan.Resource) map[string]bool {
	out := map[string]bool{}
	for _, r := range hints {
		if r.Kind == plan.KindVeth && r.A.NS == r.B.NS &&
			plan.OwnedBy(ownerAlias(r.Owner), infra) {
			out[peerAlias(r.A)] = true
		}
	}
	return out
}
