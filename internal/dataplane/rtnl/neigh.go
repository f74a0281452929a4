package rtnl

import (
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// NeighsOfLink dumps one link's entries of family. With strict checking the
// kernel filters them: a forwarding-database dump by the bridge port in its
// header, a neighbour dump by NDA_IFINDEX (the header must name no link
// there). A kernel without strict checking, or without the filter, answers
// with every entry, which are picked out here.
// Equivalent to: bridge -n NS fdb show brport DEV; ip -n NS neigh show dev DEV
func NeighsOfLink(sock *nl.SocketHandle, index, family int) ([]netlink.Neigh, error) {
	fd := sock.Socket.GetFd()
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1); err == nil {
		defer unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 0) //nolint:errcheck // a socket left strict only refuses malformed dumps
	}
	msgs, err := RetryDump(func() ([][]byte, error) {
		req := nl.NewNetlinkRequest(unix.RTM_GETNEIGH, unix.NLM_F_DUMP)
		req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: sock}
		if family == unix.AF_BRIDGE {
			req.AddData(&netlink.Ndmsg{Family: unix.AF_BRIDGE, Index: uint32(index)})
		} else {
			req.AddData(&netlink.Ndmsg{Family: uint8(family)})
			req.AddData(nl.NewRtAttr(unix.NDA_IFINDEX, nl.Uint32Attr(uint32(index))))
		}
		return req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWNEIGH)
	})
	if err != nil {
		return nil, err
	}
	var out []netlink.Neigh
	for _, m := range msgs {
		n, err := netlink.NeighDeserialize(m)
		if err != nil {
			return nil, err
		}
		if n.LinkIndex == index && (family != unix.AF_BRIDGE || n.Family == unix.AF_BRIDGE) {
			out = append(out, *n)
		}
	}
	return out, nil
}
