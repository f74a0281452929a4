package dataplane

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// fewLinks is how many links of a namespace a scoped observation asks the
// kernel for one by one rather than in one dump of the namespace. A host
// that carries thousands of virtual networks holds three links per network
// in one namespace; a change to one network names a few of them, and a dump
// would read, and this process decode, every other one each time.
const fewLinks = 64

// linksNamed reads the named links of a namespace, and lo (which holds the
// namespace's mark), one request each; a name the namespace does not hold
// is skipped. It also reads the masters of those links, so that a port's
// bridge is known by name, but does not return them.
// Equivalent to: ip -n NS -d link show dev NAME, for each name
func (l *Linux) linksNamed(ns string, names map[string]bool) (links []netlink.Link, masters map[int]string, ports map[int]portFlags, err error) {
	sock, err := l.routeSocket(ns)
	if err != nil {
		return nil, nil, nil, err
	}
	ports = map[int]portFlags{}
	get := func(req *nl.NetlinkRequest) (netlink.Link, bool, error) {
		msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
		if errors.Is(err, unix.ENODEV) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		if len(msgs) != 1 {
			return nil, false, fmt.Errorf("%d answers", len(msgs))
		}
		link, err := netlink.LinkDeserialize(nil, msgs[0])
		if err != nil {
			return nil, false, err
		}
		if f, ok := bridgePortFlags(msgs[0]); ok {
			ports[link.Attrs().Index] = f
		}
		return link, true, nil
	}
	byIndex := map[int]bool{}
	wanted := sortedKeys(names)
	if !names["lo"] {
		wanted = append(wanted, "lo")
	}
	for _, name := range wanted {
		req := getLinkRequest(sock, 0)
		req.Flags = unix.NLM_F_REQUEST
		req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(name)))
		link, ok, err := get(req)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("link %s: %w", name, err)
		}
		if ok && !byIndex[link.Attrs().Index] {
			byIndex[link.Attrs().Index] = true
			links = append(links, link)
		}
	}
	masters = map[int]string{}
	for _, link := range links {
		m := link.Attrs().MasterIndex
		if m == 0 || byIndex[m] || masters[m] != "" {
			continue
		}
		master, ok, err := get(getLinkRequest(sock, m))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("link %d: %w", m, err)
		}
		if ok {
			masters[m] = master.Attrs().Name
		}
	}
	return links, masters, ports, nil
}

// addrsOfLinks reads the addresses of some links of a namespace, asking the
// kernel for each link's alone (strict checking makes it filter by the
// index; a kernel without it answers with every address, which are
// filtered here).
// Equivalent to: ip -n NS addr show dev NAME, for each link
func (l *Linux) addrsOfLinks(ns string, links []netlink.Link) (map[int][]netlink.Addr, error) {
	sock, err := l.routeSocket(ns)
	if err != nil {
		return nil, err
	}
	fd := sock.Socket.GetFd()
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1); err == nil {
		defer unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 0) //nolint:errcheck // a socket left strict only refuses malformed dumps
	}
	out := map[int][]netlink.Addr{}
	for _, link := range links {
		index := link.Attrs().Index
		msgs, err := retryDump(func() ([][]byte, error) {
			req := nl.NewNetlinkRequest(unix.RTM_GETADDR, unix.NLM_F_DUMP)
			req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: sock}
			msg := nl.NewIfAddrmsg(unix.AF_UNSPEC)
			msg.Index = uint32(index)
			req.AddData(msg)
			return req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWADDR)
		})
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", link.Attrs().Name, err)
		}
		for _, m := range msgs {
			if a, ok := parseAddrMsg(m); ok && a.LinkIndex == index {
				out[index] = append(out[index], a)
			}
		}
	}
	return out, nil
}

// parseAddrMsg reads what observation uses of an address message: the
// address with its prefix, its scope and its link. The local address is
// the link's own where a peer address is given too.
func parseAddrMsg(m []byte) (netlink.Addr, bool) {
	msg := nl.DeserializeIfAddrmsg(m)
	attrs, err := nl.ParseRouteAttr(m[msg.Len():])
	if err != nil {
		return netlink.Addr{}, false
	}
	var address, local net.IP
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.IFA_ADDRESS:
			address = net.IP(append([]byte(nil), a.Value...))
		case unix.IFA_LOCAL:
			local = net.IP(append([]byte(nil), a.Value...))
		}
	}
	ip := address
	if local != nil {
		ip = local
	}
	if ip == nil {
		return netlink.Addr{}, false
	}
	bits := 8 * len(ip)
	return netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(int(msg.Prefixlen), bits)},
		Scope: int(msg.Scope), LinkIndex: int(msg.Index)}, true
}
