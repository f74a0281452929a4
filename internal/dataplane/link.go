package dataplane

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/plan"
)

func ownerAlias(owner string) string { return plan.AliasPrefix + owner }

// peerAlias marks the second end of a pair with the name of the first, so
// that observation can join the two ends without netnsid bookkeeping.
func peerAlias(a plan.End) string { return plan.AliasPrefix + "peer=" + a.NS + "/" + a.Name }

func parsePeerAlias(alias string) (ns, name string, ok bool) {
	rest, ok := strings.CutPrefix(alias, plan.AliasPrefix+"peer=")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}

// ensureBridge makes a bridge with a fixed MAC, MTU and settings
// (plan.BridgeSysctls, as the resource gives them). The MAC is set
// explicitly, otherwise the bridge takes its lowest port's and changes as
// ports come and go.
// Equivalent to: ip -n NS link add NAME type bridge; ip -n NS link set NAME addrgenmode none;
// ip netns exec NS sysctl -w net.ipv4.conf.NAME.rp_filter=1 [net.ipv6.conf.NAME.disable_ipv6=1];
// ip -n NS link set NAME address MAC mtu MTU alias A up
func (l *Linux) ensureBridge(r plan.Resource) error {
	h, err := l.handle(r.NS)
	if err != nil {
		return err
	}
	link, err := h.LinkByName(r.Name)
	made := false
	if isGone(err) {
		br := &netlink.Bridge{LinkAttrs: newLinkAttrs(r.Name, r.MAC, r.MTU, ownerAlias(r.Owner))}
		if err := h.LinkAdd(br); err != nil {
			return bridgeErr(err)
		}
		changed("bridge made: %s in %s", r.Name, r.NS)
		if link, err = h.LinkByName(r.Name); err == nil {
			err = quietIPv6(h, link, r.NS)
			made = true
		}
	}
	if err != nil {
		return err
	}
	if !made {
		if err := claimLink(link, r.NS, r.Owner); err != nil {
			return err
		}
	}
	if link.Type() != "bridge" {
		return fmt.Errorf("%s exists in %s and is a %s, not a bridge", r.Name, r.NS, link.Type())
	}
	// Settings before the link comes up, so that it never takes a frame
	// without them.
	if err := writeBridgeSysctls(r.NS, r.Name, r.Sysctls); err != nil {
		return err
	}
	// A bridge just made, down and without link-local addresses, has no
	// address to remove: asking would dump every address of the namespace.
	if r.Isolate && !made {
		if err := isolateBridge(h, link); err != nil {
			return err
		}
	}
	return setLinkAttrs(h, link, r.MAC, r.MTU, ownerAlias(r.Owner), true)
}

// newLinkAttrs are the attributes a link vnet makes is made with: its
// name, MTU, MAC (when set) and alias in the request that makes it, so
// that the steps that set them otherwise have nothing left to do (each
// request takes the rtnl lock that every link change of the machine
// waits for), and the link is marked as vnet's from its start.
func newLinkAttrs(name, mac string, mtu int, alias string) netlink.LinkAttrs {
	attrs := netlink.LinkAttrs{Name: name, MTU: mtu, Alias: alias}
	if hw, err := net.ParseMAC(mac); err == nil {
		attrs.HardwareAddr = hw
	}
	return attrs
}

func bridgeErr(err error) error {
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		return &FeatureError{Feature: "bridge links", Hint: "modprobe bridge (CONFIG_BRIDGE)", Err: err}
	}
	return err
}

// ensureVeth makes a veth pair whose ends may live in two namespaces.
// Equivalent to: ip -n A link add A.NAME address MAC mtu MTU type veth peer name B.NAME netns B address MAC mtu MTU
func (l *Linux) ensureVeth(r plan.Resource) error {
	h, err := l.handle(r.A.NS)
	if err != nil {
		return err
	}
	made := false
	if link, err := h.LinkByName(r.A.Name); isGone(err) {
		if err := l.addVeth(h, r); err != nil {
			return err
		}
		made = true
	} else if err != nil {
		return err
	} else if err := claimLink(link, r.A.NS, r.Owner); err != nil {
		return err
	}
	return l.configureVeth(r, made)
}

// claimLink refuses an existing link of the name a resource makes unless
// it is marked as the resource's infrastructure's. Taking over another's
// link would change it, and the rollback of the failed apply, which sees
// the link as made by it, would delete it.
func claimLink(link netlink.Link, ns, owner string) error {
	alias := link.Attrs().Alias
	if mayAdopt(ns, alias, owner) {
		return nil
	}
	if alias == "" {
		alias = "none"
	}
	return fmt.Errorf("%s in %s (alias %s): %w", link.Attrs().Name, nsLabel(ns), alias, ErrLinkNotOurs)
}

// mayAdopt reports whether a link with the alias have, met where a
// resource of owner is to be made in ns, is that infrastructure's to take
// over. A namespace vnet made holds its infrastructure's links alone (its
// mark, which apply checks, says whose it is), so anything in it is; in
// a namespace shared with the machine and other infrastructures only the
// link's alias proves it, and a link vnet makes carries it from its start.
func mayAdopt(ns, have, owner string) bool {
	if strings.HasPrefix(ns, plan.NSPrefix) {
		return true
	}
	if have == ownerAlias(owner) {
		return true
	}
	infra, _, ok := strings.Cut(owner, ": ")
	return ok && plan.OwnedBy(have, infra)
}

func nsLabel(ns string) string {
	if ns == "" || ns == plan.CurrentNS {
		return "the machine's namespace"
	}
	return "namespace " + ns
}

func (l *Linux) addVeth(h *netlink.Handle, r plan.Resource) error {
	macA, err := net.ParseMAC(r.A.MAC)
	if err != nil {
		return err
	}
	macB, err := net.ParseMAC(r.B.MAC)
	if err != nil {
		return err
	}
	veth := &netlink.Veth{
		// The alias in the request that makes the pair: from its start
		// the link shows whose it is (claimLink).
		LinkAttrs:        netlink.LinkAttrs{Name: r.A.Name, MTU: r.A.MTU, HardwareAddr: macA, Alias: ownerAlias(r.Owner)},
		PeerName:         r.B.Name,
		PeerHardwareAddr: macB,
		PeerMTU:          uint32(r.B.MTU),
	}
	if r.B.NS != r.A.NS {
		peerNS, err := openNS(r.B.NS)
		if err != nil {
			return fmt.Errorf("open netns %s: %w", r.B.NS, err)
		}
		defer peerNS.Close()
		veth.PeerNamespace = netlink.NsFd(peerNS)
	}
	if err := h.LinkAdd(veth); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return &FeatureError{Feature: "veth links", Hint: "modprobe veth (CONFIG_VETH)", Err: err}
		}
		return err
	}
	changed("veth made: %s in %s <-> %s in %s", r.A.Name, r.A.NS, r.B.Name, r.B.NS)
	return nil
}

// configureVeth brings both ends to their desired MAC, MTU, master and alias.
// made says the pair was just made, still down.
func (l *Linux) configureVeth(r plan.Resource, made bool) error {
	if err := l.configureEnd(r.A, ownerAlias(r.Owner), made); err != nil {
		return err
	}
	return l.configureEnd(r.B, peerAlias(r.A), made)
}

// Equivalent to: ip -n NS link set NAME address MAC mtu MTU alias ALIAS [no]master M up
// (and, for a bridge port just made, addrgenmode none and net.ipv6.conf.NAME.disable_ipv6=1 before up)
func (l *Linux) configureEnd(e plan.End, alias string, made bool) error {
	h, err := l.handle(e.NS)
	if err != nil {
		return err
	}
	link, err := h.LinkByName(e.Name)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", e.Name, e.NS, err)
	}
	// A switch port cut from its switch (Down) is still a switch port: it
	// gets its master back when the vNIC is connected again.
	if made && (e.Master != "" || e.Down) {
		if err := quietIPv6(h, link, e.NS); err != nil {
			return err
		}
		if err := l.portWithoutIPv6(e.NS, e.Name); err != nil {
			return err
		}
	}
	if err := l.leaveFastPath(e.NS, h, link, e.Down, e.Master); err != nil {
		return err
	}
	if err := setLinkAttrs(h, link, e.MAC, e.MTU, alias, !e.Down); err != nil {
		return err
	}
	if err := setMaster(h, link, e.Master); err != nil {
		return err
	}
	if e.Master == "" {
		return nil
	}
	if newPort(link) && !e.Isolated {
		return nil
	}
	if isolated, err := l.linkIsolated(e.NS, link.Attrs().Index); err != nil || isolated != e.Isolated {
		return setUplinkPort(h, e.NS, link, e.Isolated)
	}
	return nil
}

// inet6AddrGenNone is IN6_ADDR_GEN_MODE_NONE: the link makes no IPv6
// address of its own, not even a link-local one.
const inet6AddrGenNone = 1

// quietIPv6 stops the kernel from giving a link vnet just made, before it
// comes up, an IPv6 link-local address: a bridge or a bridge port carries
// no address, and each link-local one costs duplicate detection, a router
// solicitation and multicast reports, work of the kernel's addrconf worker
// under the rtnl lock that grew with the links already in the namespace
// (a host's namespace holds a port per VM). The link still takes IPv6
// neighbour entries, and frames of any protocol pass through it. Only links
// vnet makes get it, never a namespace's default, and it is not read back:
// a link made by an older vnet keeps its address until it is made again.
// A kernel without IPv6 (ipv6.disable=1) has nothing to stop.
func quietIPv6(h *netlink.Handle, link netlink.Link, ns string) error {
	err := h.LinkSetIP6AddrGenMode(link, inet6AddrGenNone)
	if errors.Is(err, unix.EAFNOSUPPORT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ip -n %s link set %s addrgenmode none: %w", ns, link.Attrs().Name, err)
	}
	changed("link %s: addrgenmode none", link.Attrs().Name)
	return nil
}

// portWithoutIPv6 turns the host's IPv6 off on a bridge port vnet just
// made, before it comes up: a port only carries frames to its bridge, and
// on every link with IPv6 on the kernel adds a multicast route (ff00::/8)
// to the namespace's one IPv6 table, each in the same list, and walks the
// whole table whenever such a link comes up or changes its MTU. In a host
// namespace with thousands of ports that work grew with the links already
// there and held the rtnl lock (docs/benchmarks.md, "Virtual networks at
// scale"). Not for bridges: a link with IPv6 off refuses IPv6 neighbour
// entries, which a network's bridge holds. Like quietIPv6, not read back.
// Equivalent to: ip netns exec NS sysctl -w net.ipv6.conf.NAME.disable_ipv6=1
func (l *Linux) portWithoutIPv6(ns, name string) error {
	h, err := l.nsHandle(ns)
	if err != nil {
		return err
	}
	err = inNS(ns, func() error {
		h.sysMu.Lock()
		defer h.sysMu.Unlock()
		return h.sys.write("net/ipv6/conf/"+name+"/disable_ipv6", "1")
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil // a kernel without IPv6
	}
	if err != nil {
		return fmt.Errorf("ip netns exec %s sysctl -w net.ipv6.conf.%s.disable_ipv6=1: %w", ns, name, err)
	}
	changed("link %s: disable_ipv6", name)
	return nil
}

func setLinkAttrs(h *netlink.Handle, link netlink.Link, mac string, mtu int, alias string, up bool) error {
	attrs := link.Attrs()
	name := attrs.Name
	if mac != "" && !strings.EqualFold(attrs.HardwareAddr.String(), mac) {
		hw, err := net.ParseMAC(mac)
		if err != nil {
			return err
		}
		if err := h.LinkSetHardwareAddr(link, hw); err != nil {
			return fmt.Errorf("set %s address %s: %w", name, mac, err)
		}
		changed("link %s: address set", name)
	}
	if mtu != 0 && attrs.MTU != mtu {
		if err := h.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("set %s mtu %d: %w", name, mtu, err)
		}
		changed("link %s: mtu set", name)
	}
	if attrs.Alias != alias {
		if err := h.LinkSetAlias(link, alias); err != nil {
			return fmt.Errorf("set %s alias: %w", name, err)
		}
		changed("link %s: alias set", name)
	}
	switch isUp := attrs.Flags&net.FlagUp != 0; {
	case up && !isUp:
		if err := h.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", name, err)
		}
		changed("link %s: up", name)
	case !up && isUp:
		if err := h.LinkSetDown(link); err != nil {
			return fmt.Errorf("set %s down: %w", name, err)
		}
		changed("link %s: down", name)
	}
	return nil
}

// newPort reports whether setMaster just made link, as read before it, a
// bridge port: then its port flags are the bridge's defaults (not
// isolated), and need not be read.
func newPort(link netlink.Link) bool { return link.Attrs().MasterIndex == 0 }

func setMaster(h *netlink.Handle, link netlink.Link, master string) error {
	name := link.Attrs().Name
	current := link.Attrs().MasterIndex
	if master == "" {
		if current == 0 {
			return nil
		}
		if err := h.LinkSetNoMaster(link); err != nil {
			return fmt.Errorf("set %s nomaster: %w", name, err)
		}
		changed("link %s: master unset", name)
		return nil
	}
	br, err := h.LinkByName(master)
	if err != nil {
		return fmt.Errorf("find bridge %s for %s: %w", master, name, err)
	}
	if current == br.Attrs().Index {
		return nil
	}
	if err := h.LinkSetMasterByIndex(link, br.Attrs().Index); err != nil {
		return fmt.Errorf("set %s master %s: %w", name, master, err)
	}
	changed("link %s: master %s", name, master)
	return nil
}

// Equivalent to: ip -n NS link del NAME
func (l *Linux) removeLink(ns, name string) error {
	h, link, err := l.existingLink(ns, name)
	if link == nil || err != nil {
		return err
	}
	if err := h.LinkDel(link); err != nil && !isGone(err) {
		return fmt.Errorf("ip -n %s link del %s: %w", ns, name, err)
	}
	return nil
}

// Equivalent to: ip -n NS addr add CIDR dev LINK
func (l *Linux) ensureAddr(r plan.Resource) error {
	h, link, err := l.linkIn(r.NS, r.Link)
	if err != nil {
		return err
	}
	addr, err := netlink.ParseAddr(r.CIDR)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(link, addr); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("ip -n %s addr add %s dev %s: %w", r.NS, r.CIDR, r.Link, err)
	}
	return nil
}

// Equivalent to: ip -n NS addr del CIDR dev LINK
func (l *Linux) removeAddr(r plan.Resource) error {
	h, link, err := l.existingLink(r.NS, r.Link)
	if link == nil || err != nil {
		return err
	}
	addr, err := netlink.ParseAddr(r.CIDR)
	if err != nil {
		return err
	}
	if err := h.AddrDel(link, addr); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("ip -n %s addr del %s dev %s: %w", r.NS, r.CIDR, r.Link, err)
	}
	return nil
}

func (l *Linux) linkIn(ns, name string) (*netlink.Handle, netlink.Link, error) {
	h, err := l.handle(ns)
	if err != nil {
		return nil, nil, err
	}
	link, err := h.LinkByName(name)
	if err != nil {
		return nil, nil, fmt.Errorf("find %s in %s: %w", name, ns, err)
	}
	return h, link, nil
}
