// Package rtnl makes the route netlink requests vnet needs that
// vishvananda/netlink has no call for, or answers with more than was asked:
// one link by name with its bridge-port settings, the addresses, qdiscs
// and neighbour entries of one link rather than a dump of the namespace's.
// Each function takes a route socket in the namespace to read and returns
// the library's types, so that the dataplane reads the few links of a
// change as it reads a whole namespace.
package rtnl

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// LinksNamed reads the named links, one request each, with the bridge-port
// settings of those that are ports; a name the namespace does not hold is
// skipped. It also reads the masters of those links, so that a port's
// bridge is known by name, but does not return them.
// Equivalent to: ip -n NS -d link show dev NAME, for each name
func LinksNamed(sock *nl.SocketHandle, names []string) (links []netlink.Link, masters map[int]string, ports map[int]PortFlags, err error) {
	ports = map[int]PortFlags{}
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
	for _, name := range names {
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

// AddrsOfLinks reads the addresses of some links, asking the kernel for
// each link's alone (strict checking makes it filter by the index; a
// kernel without it answers with every address, which are filtered here).
// Equivalent to: ip -n NS addr show dev NAME, for each link
func AddrsOfLinks(sock *nl.SocketHandle, links []netlink.Link) (map[int][]netlink.Addr, error) {
	fd := sock.Socket.GetFd()
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1); err == nil {
		defer unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 0) //nolint:errcheck // a socket left strict only refuses malformed dumps
	}
	out := map[int][]netlink.Addr{}
	for _, link := range links {
		index := link.Attrs().Index
		msgs, err := RetryDump(func() ([][]byte, error) {
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

// plainQdiscs are the kinds of qdisc whose settings nothing of vnet reads
// (the dataplane's devices and traffic control): of a link whose root and ingress
// qdiscs are of these kinds, their kind, handle and parent are all there
// is to know.
var plainQdiscs = map[string]bool{"noqueue": true, "pfifo_fast": true, "mq": true, "ingress": true, "clsact": true}

// QdiscsOfLinks reads the root and ingress qdiscs of some links, asking
// the kernel for each of them alone: a dump of the namespace's qdiscs
// answers with every link's, thousands on a host that carries thousands of
// networks. It reports false, having read what it returns of no use, when
// a link's qdisc is of a kind whose settings matter (plainQdiscs), or when
// it shows no root qdisc: the caller then dumps them, and the library
// reads their settings.
// Equivalent to: tc -n NS qdisc show dev NAME root; ... ingress, for each link
func QdiscsOfLinks(sock *nl.SocketHandle, links []netlink.Link) (map[int][]netlink.Qdisc, bool, error) {
	out := map[int][]netlink.Qdisc{}
	for _, link := range links {
		index := link.Attrs().Index
		for _, parent := range []uint32{netlink.HANDLE_ROOT, netlink.HANDLE_INGRESS} {
			q, err := getQdisc(sock, index, parent)
			if err != nil {
				return nil, false, fmt.Errorf("qdisc of %s: %w", link.Attrs().Name, err)
			}
			if q == nil && parent == netlink.HANDLE_ROOT {
				return nil, false, nil // down, or a kernel that shows no root so: the dump says
			}
			if q == nil {
				continue
			}
			if !plainQdiscs[q.Type()] {
				return nil, false, nil
			}
			out[index] = append(out[index], q)
		}
	}
	return out, true, nil
}

// getQdisc asks for a link's qdisc at parent (the root, or ingress), nil
// when it has none to show: the kernel refuses to show the built-in noop
// qdisc and a missing ingress one.
func getQdisc(sock *nl.SocketHandle, index int, parent uint32) (netlink.Qdisc, error) {
	// The kernel answers with a notification of the qdisc, which reaches
	// the asker only when echoed, and ends with the acknowledgement (also
	// when it shows nothing: the noop qdisc).
	req := nl.NewNetlinkRequest(unix.RTM_GETQDISC, unix.NLM_F_ACK|unix.NLM_F_ECHO)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: sock}
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(index), Parent: parent})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWQDISC)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENODEV):
		return nil, nil
	case err != nil:
		return nil, err
	case len(msgs) == 0:
		return nil, nil
	case len(msgs) != 1:
		return nil, fmt.Errorf("%d answers", len(msgs))
	}
	return parseQdiscHead(msgs[0])
}

// parseQdiscHead reads a qdisc message's link, handle, parent and kind,
// and none of its settings.
func parseQdiscHead(m []byte) (netlink.Qdisc, error) {
	if len(m) < nl.SizeofTcMsg {
		return nil, fmt.Errorf("a qdisc message of %d bytes", len(m))
	}
	msg := nl.DeserializeTcMsg(m)
	attrs, err := nl.ParseRouteAttr(m[msg.Len():])
	if err != nil {
		return nil, err
	}
	kind := ""
	for _, a := range attrs {
		if a.Attr.Type == nl.TCA_KIND {
			kind = strings.TrimRight(string(a.Value), "\x00")
		}
	}
	if kind == "" {
		return nil, errors.New("a qdisc without its kind")
	}
	return &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: int(msg.Ifindex), Handle: msg.Handle,
		Parent: msg.Parent, Refcnt: msg.Info}, QdiscType: kind}, nil
}
