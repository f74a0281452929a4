package rtnl

import (
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// nlaTypeMask strips the nested and byte-order flags from an attribute type.
const nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)

// Links lists a namespace's links, with the bridge-port settings of those
// that are ports, from one dump. The library drops the bridge-port
// attributes the kernel sends with each port; asking for them per port
// (LinkGetProtinfo) dumps every link of the namespace each time.
// Equivalent to: ip -n NS -d link show
func Links(sock *nl.SocketHandle) ([]netlink.Link, map[int]PortFlags, error) {
	msgs, err := RetryDump(func() ([][]byte, error) {
		req := getLinkRequest(sock, 0)
		return req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	})
	if err != nil {
		return nil, nil, err
	}
	links := make([]netlink.Link, 0, len(msgs))
	ports := map[int]PortFlags{}
	for _, m := range msgs {
		link, err := netlink.LinkDeserialize(nil, m)
		if err != nil {
			return nil, nil, err
		}
		links = append(links, link)
		if f, ok := bridgePortFlags(m); ok {
			ports[link.Attrs().Index] = f
		}
	}
	return links, ports, nil
}

// PortFlagsOf reads the bridge-port settings of one link; those of a
// link that is no port are all false.
// Equivalent to: bridge -n NS -d link show dev LINK
func PortFlagsOf(sock *nl.SocketHandle, index int) (PortFlags, error) {
	msgs, err := getLinkRequest(sock, index).Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	if err != nil {
		return PortFlags{}, err
	}
	if len(msgs) != 1 {
		return PortFlags{}, fmt.Errorf("link %d: %d answers", index, len(msgs))
	}
	f, _ := bridgePortFlags(msgs[0])
	return f, nil
}

// getLinkRequest asks for one link (index > 0) or all of them, on sock.
func getLinkRequest(sock *nl.SocketHandle, index int) *nl.NetlinkRequest {
	flags := 0
	if index == 0 {
		flags = unix.NLM_F_DUMP
	}
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, flags)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: sock}
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(index)
	req.AddData(msg)
	req.AddData(nl.NewRtAttr(unix.IFLA_EXT_MASK, nl.Uint32Attr(nl.RTEXT_FILTER_VF)))
	return req
}

// PortFlags are the bridge-port settings vnet reads back.
type PortFlags struct {
	Isolated bool // IFLA_BRPORT_ISOLATED
	Learning bool // IFLA_BRPORT_LEARNING
	Suppress bool // IFLA_BRPORT_NEIGH_SUPPRESS
}

// bridgePortFlags reads a link message's bridge-port settings, from the
// slave data of its link info; ok is false for a link that is no bridge
// port.
func bridgePortFlags(m []byte) (f PortFlags, ok bool) {
	info := nl.DeserializeIfInfomsg(m)
	attrs, err := nl.ParseRouteAttr(m[info.Len():])
	if err != nil {
		return f, false
	}
	for _, a := range attrs {
		if a.Attr.Type&nlaTypeMask != unix.IFLA_LINKINFO {
			continue
		}
		infos, err := nl.ParseRouteAttr(a.Value)
		if err != nil {
			return f, false
		}
		bridgePort := false
		var data []byte
		for _, i := range infos {
			switch i.Attr.Type & nlaTypeMask {
			case nl.IFLA_INFO_SLAVE_KIND:
				bridgePort = strings.TrimRight(string(i.Value), "\x00") == "bridge"
			case nl.IFLA_INFO_SLAVE_DATA:
				data = i.Value
			}
		}
		if !bridgePort {
			return f, false
		}
		ports, err := nl.ParseRouteAttr(data)
		if err != nil {
			return f, false
		}
		for _, p := range ports {
			if len(p.Value) == 0 {
				continue
			}
			on := p.Value[0] != 0
			switch p.Attr.Type & nlaTypeMask {
			case nl.IFLA_BRPORT_ISOLATED:
				f.Isolated = on
			case nl.IFLA_BRPORT_LEARNING:
				f.Learning = on
			case nl.IFLA_BRPORT_NEIGH_SUPPRESS:
				f.Suppress = on
			}
		}
		return f, true
	}
	return f, false
}
