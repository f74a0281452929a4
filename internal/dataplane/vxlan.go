package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/nsthread"
	"github.com/vnet-project/vnet/internal/dataplane/rtnl"
	"github.com/vnet-project/vnet/internal/plan"
)

// The namespace vnet started in, which plan.CurrentNS names. It is taken
// once, before any thread of the process enters another namespace, so that
// a thread switched for some other object never passes for it.
var hostNS struct {
	sync.Mutex
	h  netns.NsHandle
	ok bool // a zero NsHandle is fd 0, not "none"
}

func captureHostNS() error {
	hostNS.Lock()
	defer hostNS.Unlock()
	if hostNS.ok {
		return nil
	}
	err := nsthread.Run(func() (err error) {
		hostNS.h, err = netns.Get()
		return err
	})
	if err != nil {
		return fmt.Errorf("open this process's netns: %w", err)
	}
	hostNS.ok = true
	return nil
}

func openHostNS() (netns.NsHandle, error) {
	hostNS.Lock()
	defer hostNS.Unlock()
	if !hostNS.ok {
		return netns.None(), errors.New("the namespace vnet runs in was not captured")
	}
	fd, err := unix.Dup(int(hostNS.h))
	if err != nil {
		return netns.None(), err
	}
	return netns.NsHandle(fd), nil
}

// ensureVxlan makes a tunnel endpoint without learning: where each remote
// endpoint is, the plan's forwarding entries say. Its VNI, local address
// and port are fixed once made (a change is a replace).
// Equivalent to: ip link add NAME type vxlan id VNI local LOCAL dstport PORT nolearning;
// ip link set NAME addrgenmode none; sysctl -w net.ipv6.conf.NAME.disable_ipv6=1 (a bridge port);
// ip link set NAME address MAC mtu MTU alias A master BRIDGE up
func (l *Linux) ensureVxlan(r plan.Resource) error {
	h, err := l.handle(r.NS)
	if err != nil {
		return err
	}
	link, err := h.LinkByName(r.Name)
	if err == nil {
		err = claimLink(link, r.NS, r.Owner)
	} else if isGone(err) {
		vx := &netlink.Vxlan{LinkAttrs: newLinkAttrs(r.Name, r.MAC, r.MTU, ownerAlias(r.Owner)),
			VxlanId: int(r.VNI), SrcAddr: net.ParseIP(r.Local), Port: int(r.Port), Learning: false}
		if err := h.LinkAdd(vx); err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) {
				return &FeatureError{Feature: "vxlan links", Hint: "modprobe vxlan (CONFIG_VXLAN)", Err: err}
			}
			return fmt.Errorf("ip link add %s type vxlan id %d local %s: %w", r.Name, r.VNI, r.Local, err)
		}
		changed("vxlan made: %s in %s", r.Name, r.NS)
		if link, err = h.LinkByName(r.Name); err == nil {
			err = quietIPv6(h, link, r.NS)
		}
		if err == nil && r.Link != "" {
			err = l.portWithoutIPv6(r.NS, r.Name)
		}
	}
	if err != nil {
		return err
	}
	if link.Type() != "vxlan" {
		return fmt.Errorf("%s exists in %s and is a %s, not a vxlan", r.Name, r.NS, link.Type())
	}
	if err := setLinkAttrs(h, link, r.MAC, r.MTU, ownerAlias(r.Owner), true); err != nil {
		return err
	}
	if err := setMaster(h, link, r.Link); err != nil {
		return err
	}
	if r.Isolate {
		return isolatePort(h, link)
	}
	return nil
}

func fdbNeigh(link netlink.Link, r plan.Resource) (*netlink.Neigh, error) {
	mac, err := net.ParseMAC(r.MAC)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(r.Remote)
	if ip == nil {
		return nil, fmt.Errorf("remote %q is not an address", r.Remote)
	}
	return &netlink.Neigh{LinkIndex: link.Attrs().Index, Family: unix.AF_BRIDGE,
		State: netlink.NUD_PERMANENT | netlink.NUD_NOARP, Flags: netlink.NTF_SELF,
		IP: ip, HardwareAddr: mac}, nil
}

// ensureFDB adds a static entry: frames to MAC go through the tunnel to
// the remote endpoint. The all-zeros MAC's entries are appended, so floods
// reach every remote endpoint at once. A VM's MAC has one remote only, and
// the kernel ignores an append to a unicast MAC it already has: a VM moved
// to another host would keep its old remote, whose removal then leaves it
// none, so that entry is replaced instead.
// Equivalent to: bridge fdb append|replace MAC dev VTEP dst REMOTE self permanent
func (l *Linux) ensureFDB(r plan.Resource) error {
	h, link, err := l.linkIn(r.NS, r.Link)
	if err != nil {
		return err
	}
	if r.Remote == "" {
		return setBridgeFDB(h, link, r)
	}
	n, err := fdbNeigh(link, r)
	if err != nil {
		return err
	}
	add, verb := h.NeighAppend, "append"
	if !isFloodMAC(n.HardwareAddr) {
		add, verb = h.NeighSet, "replace"
	}
	if err := add(n); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("bridge fdb %s %s dev %s dst %s: %w", verb, r.MAC, r.Link, r.Remote, err)
	}
	return nil
}

// isFloodMAC is whether a tunnel entry's MAC may have several remotes: the
// all-zeros default and multicast addresses.
func isFloodMAC(mac net.HardwareAddr) bool {
	return len(mac) > 0 && (mac[0]&1 == 1 || bytes.Equal(mac, make(net.HardwareAddr, len(mac))))
}

// Equivalent to: bridge fdb del MAC dev VTEP dst REMOTE self
func (l *Linux) removeFDB(r plan.Resource) error {
	h, link, err := l.existingLink(r.NS, r.Link)
	if link == nil || err != nil {
		return err
	}
	if r.Remote == "" {
		return delBridgeFDB(h, link, r)
	}
	n, err := fdbNeigh(link, r)
	if err != nil {
		return err
	}
	if err := h.NeighDel(n); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("bridge fdb del %s dev %s dst %s: %w", r.MAC, r.Link, r.Remote, err)
	}
	return nil
}

// observeVxlan reads a tunnel endpoint and its static entries (those with
// a remote address; the bridge's own entries have none).
func observeVxlan(entries *neighDumps, link netlink.Link, ns, master, owner string, port rtnl.PortFlags) ([]plan.Resource, error) {
	vx, ok := link.(*netlink.Vxlan)
	if !ok {
		return nil, nil
	}
	attrs := vx.Attrs()
	r := plan.Resource{Kind: plan.KindVxlan, NS: ns, Name: attrs.Name, MAC: attrs.HardwareAddr.String(), MTU: attrs.MTU,
		VNI: uint32(vx.VxlanId), Port: uint16(vx.Port), Link: master, Owner: owner}
	if vx.SrcAddr != nil {
		r.Local = vx.SrcAddr.String()
	}
	if vx.Learning {
		// Learning is never wanted; no field of the plan's says so, but
		// an endpoint that learns must be made again.
		r.Local += " (learning)"
	}
	if attrs.Flags&net.FlagUp == 0 {
		r.Link += " (down)"
	}
	r.Isolate = !port.Learning && port.Suppress
	out := []plan.Resource{r}
	neighs, err := entries.of(attrs.Index, unix.AF_BRIDGE)
	if err != nil {
		return nil, fmt.Errorf("bridge fdb show dev %s: %w", attrs.Name, err)
	}
	for _, n := range neighs {
		if n.LinkIndex != attrs.Index {
			continue
		}
		if isBridgeStatic(n) {
			out = append(out, plan.Resource{Kind: plan.KindFDB, NS: ns, Link: attrs.Name,
				MAC: strings.ToLower(n.HardwareAddr.String())})
		}
		if n.IP == nil || n.Flags&netlink.NTF_SELF == 0 {
			continue
		}
		out = append(out, plan.Resource{Kind: plan.KindFDB, NS: ns, Link: attrs.Name,
			MAC: strings.ToLower(n.HardwareAddr.String()), Remote: n.IP.String()})
	}
	return out, nil
}

// UnderlayLink finds the link in the namespace vnet runs in that holds
// the address, and returns its name and MTU: a tunnel's frames leave
// through it (on a real host the route may say otherwise; the address's
// link is where the operator configured the underlay).
func UnderlayLink(addr string) (name string, mtu int, err error) {
	ip := net.ParseIP(addr)
	if ip == nil {
		return "", 0, fmt.Errorf("underlay %q is not an address", addr)
	}
	h, err := handleFor(plan.CurrentNS)
	if err != nil {
		return "", 0, err
	}
	defer h.Close()
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return "", 0, fmt.Errorf("ip addr show: %w", err)
	}
	for _, a := range addrs {
		if a.IP.Equal(ip) {
			link, err := h.LinkByIndex(a.LinkIndex)
			if err != nil {
				return "", 0, err
			}
			return link.Attrs().Name, link.Attrs().MTU, nil
		}
	}
	return "", 0, fmt.Errorf("underlay %s is not an address of this machine: %w", addr, ErrNoUnderlay)
}

// ErrNoUnderlay is wrapped when a host's underlay address is not configured
// on the machine its agent runs on.
var ErrNoUnderlay = errors.New("no such local address")
