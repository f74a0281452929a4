// Command rawnetlink builds and removes, with netlink requests issued
// directly, what vnet makes for one host with one switch and N VMs of one
// vNIC each: a namespace for the host with a bridge, and per VM a
// namespace, a veth pair from the VM's eth0 to a bridge port, and an
// address; the bridge and its ports without IPv6 link-local addresses.
// bench/scale.py times it beside vnet, as what the kernel itself
// costs for the same objects. It keeps no state: each command works on the
// namespaces named after its -tag.
//
// usage:
//
//	rawnetlink -tag T up N           host, bridge and VMs 1..N
//	rawnetlink -tag T add I CIDR     VM I with its address
//	rawnetlink -tag T addr I CIDR    VM I's address replaced
//	rawnetlink -tag T rm I           VM I removed
//	rawnetlink -tag T bridges N      host, and N bridges with one port each,
//	                                 the port's peer in a VM namespace of its own
//	rawnetlink -tag T networks N     host, and per network a bridge, a VXLAN
//	                                 device and one port, as a host carrying N
//	                                 virtual networks holds them (-ports)
//	rawnetlink -tag T namespaces N   N empty namespaces, loopback up
//	rawnetlink -tag T down           every namespace of the tag removed
//
// -ports netns (the default) makes each network's port a veth pair whose
// other end is eth0 of a VM namespace of its own; -ports tap makes it a
// persistent TAP in the host namespace, as QEMU would hold one.
//
// -portprogs gives each VM's port (up, add, rm) what vnet's port security
// makes of it in the kernel: a clsact hook, a filter on each direction
// running two BPF programs shared by the host namespace's ports, and the
// port's entry in their map (see portprogs.go).
//
// -linklocal leaves the bridges and ports at the kernel's default, an IPv6
// link-local address each, as vnet made them before.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

const netnsDir = "/run/netns"

// addrGenNone (IN6_ADDR_GEN_MODE_NONE): as vnet does, the bridge and its
// ports get no IPv6 link-local address.
const addrGenNone = 1

var (
	linkLocal bool
	withIPv6  bool
	portKind  string
)

// disableIPv6 turns the host's IPv6 off on a bridge port, as vnet does,
// unless -ipv6: no multicast route per link, no walk of the IPv6 routes
// when it comes up. The calling thread is in the link's namespace.
func disableIPv6(l netlink.Link) error {
	if withIPv6 || linkLocal {
		return nil
	}
	return os.WriteFile("/proc/sys/net/ipv6/conf/"+l.Attrs().Name+"/disable_ipv6", []byte("1"), 0o644)
}

// quietIPv6 sets a bridge or port to make no IPv6 address, unless -linklocal.
func quietIPv6(h *netlink.Handle, l netlink.Link) error {
	if linkLocal {
		return nil
	}
	return h.LinkSetIP6AddrGenMode(l, addrGenNone)
}

func main() {
	tag := flag.String("tag", "", "names the namespaces: rawnl.TAG.NODE")
	flag.BoolVar(&linkLocal, "linklocal", false, "give bridges and ports IPv6 link-local addresses (the kernel's default)")
	flag.BoolVar(&withIPv6, "ipv6", false, "networks: leave the host's IPv6 on the networks' links (addrgenmode none only)")
	flag.StringVar(&portKind, "ports", "netns", "networks: each port a veth to a VM namespace (netns) or a TAP (tap)")
	flag.BoolVar(&portProgs, "portprogs", false, "up, add, rm: each VM's port with a clsact hook, shared BPF filters on both directions and its entry in their map, as vnet's port security")
	flag.Parse()
	if *tag == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: rawnetlink -tag T [-linklocal] up N | add I CIDR | addr I CIDR | rm I | bridges N | down")
		os.Exit(2)
	}
	if err := run(*tag, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "rawnetlink:", err)
		os.Exit(1)
	}
}

func run(tag string, args []string) error {
	// Namespaces are entered on this thread only (netns.NewNamed).
	runtime.LockOSThread()
	b := &builder{tag: tag}
	arg := func(i int) int {
		n, _ := strconv.Atoi(args[i])
		return n
	}
	switch {
	case args[0] == "up" && len(args) == 2:
		if err := b.host(); err != nil {
			return err
		}
		for i := 1; i <= arg(1); i++ {
			if err := b.vm(i, cidr(i)); err != nil {
				return err
			}
		}
		return nil
	case args[0] == "add" && len(args) == 3:
		return b.vm(arg(1), args[2])
	case args[0] == "addr" && len(args) == 3:
		return b.readdress(arg(1), args[2])
	case args[0] == "rm" && len(args) == 2:
		return b.removeVM(arg(1))
	case args[0] == "bridges" && len(args) == 2:
		return b.bridges(arg(1))
	case args[0] == "networks" && len(args) == 2:
		return b.networks(arg(1))
	case args[0] == "namespaces" && len(args) == 2:
		return b.namespaces(arg(1))
	case args[0] == "down" && len(args) == 1:
		return b.down()
	}
	return fmt.Errorf("bad arguments %q", args)
}

// cidr is VM i's address, as bench/scale.py gives vnet's VMs.
func cidr(i int) string {
	return fmt.Sprintf("10.%d.%d.%d/8", 100+i/65000, i/250%256, i%250+1)
}

type builder struct {
	tag   string
	progs *sharedProgs // with -portprogs, once a port was hooked
}

func (b *builder) ns(node string) string { return "rawnl." + b.tag + "." + node }

// port is VM i's bridge port in the host namespace.
func port(i int) string { return "p" + strconv.Itoa(i) }

// newNS makes a named namespace, its loopback up, and returns a handle in
// it; the thread stays in the namespace it was in.
func newNS(name string) (netns.NsHandle, *netlink.Handle, error) {
	orig, err := netns.Get()
	if err != nil {
		return 0, nil, err
	}
	defer orig.Close()
	ns, err := netns.NewNamed(name)
	if err != nil {
		return 0, nil, fmt.Errorf("add netns %s: %w", name, err)
	}
	if err := netns.Set(orig); err != nil {
		return 0, nil, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return 0, nil, err
	}
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	return ns, h, err
}

func (b *builder) host() error {
	ns, h, err := newNS(b.ns("h1"))
	if err != nil {
		return err
	}
	defer ns.Close()
	defer h.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := h.LinkAdd(br); err != nil {
		return fmt.Errorf("add bridge: %w", err)
	}
	if err := quietIPv6(h, br); err != nil {
		return err
	}
	return h.LinkSetUp(br)
}

func (b *builder) openHost() (netns.NsHandle, *netlink.Handle, error) {
	ns, err := netns.GetFromName(b.ns("h1"))
	if err != nil {
		return 0, nil, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return 0, nil, err
	}
	return ns, h, nil
}

// vm makes VM i: its namespace, the pair made in the host namespace with
// the VM's end moved into the VM's, the port on the bridge, the address.
func (b *builder) vm(i int, addr string) error {
	hns, hh, err := b.openHost()
	if err != nil {
		return err
	}
	defer hns.Close()
	defer hh.Close()
	vns, vh, err := newNS(b.ns(fmt.Sprintf("vm%d", i)))
	if err != nil {
		return err
	}
	defer vns.Close()
	defer vh.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port(i)}, PeerName: "eth0", PeerNamespace: netlink.NsFd(vns)}
	if err := hh.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s: %w", port(i), err)
	}
	br, err := hh.LinkByName("br0")
	if err != nil {
		return err
	}
	p, err := hh.LinkByName(port(i))
	if err != nil {
		return err
	}
	if err := hh.LinkSetMaster(p, br); err != nil {
		return err
	}
	if err := quietIPv6(hh, p); err != nil {
		return err
	}
	if err := hh.LinkSetUp(p); err != nil {
		return err
	}
	if portProgs {
		if err := securePort(hh, &b.progs, p); err != nil {
			return err
		}
	}
	return setAddr(vh, addr, true)
}

// bridges makes the host namespace with n bridges of one port each, as a
// host carrying n virtual networks holds them; the port's peer is eth0 of
// a VM namespace of its own. It prints the time of each 500.
func (b *builder) bridges(n int) error {
	hns, hh, err := newNS(b.ns("h1"))
	if err != nil {
		return err
	}
	defer hns.Close()
	defer hh.Close()
	start, lap := time.Now(), time.Now()
	for i := 1; i <= n; i++ {
		if err := b.bridge(hh, i); err != nil {
			return err
		}
		if i%500 == 0 || i == n {
			fmt.Printf("%d bridges: last %.2fs, total %.2fs\n", i, time.Since(lap).Seconds(), time.Since(start).Seconds())
			lap = time.Now()
		}
	}
	return nil
}

func (b *builder) bridge(hh *netlink.Handle, i int) error {
	vns, vh, err := newNS(b.ns(fmt.Sprintf("vm%d", i)))
	if err != nil {
		return err
	}
	defer vns.Close()
	defer vh.Close()
	name := "b" + strconv.Itoa(i)
	if err := hh.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		return fmt.Errorf("add bridge %s: %w", name, err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port(i)}, PeerName: "eth0", PeerNamespace: netlink.NsFd(vns)}
	if err := hh.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s: %w", port(i), err)
	}
	br, err := hh.LinkByName(name)
	if err != nil {
		return err
	}
	p, err := hh.LinkByName(port(i))
	if err != nil {
		return err
	}
	for _, l := range []netlink.Link{br, p} {
		if err := quietIPv6(hh, l); err != nil {
			return err
		}
	}
	if err := hh.LinkSetMaster(p, br); err != nil {
		return err
	}
	for _, l := range []netlink.Link{br, p} {
		if err := hh.LinkSetUp(l); err != nil {
			return err
		}
	}
	eth0, err := vh.LinkByName("eth0")
	if err != nil {
		return err
	}
	return vh.LinkSetUp(eth0)
}

// setAddr replaces eth0's IPv4 addresses with addr and brings it up.
func setAddr(h *netlink.Handle, addr string, up bool) error {
	eth0, err := h.LinkByName("eth0")
	if err != nil {
		return err
	}
	old, err := h.AddrList(eth0, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	for _, a := range old {
		if err := h.AddrDel(eth0, &a); err != nil {
			return err
		}
	}
	ip, ipnet, err := net.ParseCIDR(addr)
	if err != nil {
		return err
	}
	ipnet.IP = ip
	if err := h.AddrAdd(eth0, &netlink.Addr{IPNet: ipnet}); err != nil {
		return fmt.Errorf("add address %s: %w", addr, err)
	}
	if up {
		return h.LinkSetUp(eth0)
	}
	return nil
}

func (b *builder) readdress(i int, addr string) error {
	ns, err := netns.GetFromName(b.ns(fmt.Sprintf("vm%d", i)))
	if err != nil {
		return err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	return setAddr(h, addr, false)
}

// removeVM deletes VM i's pair from the host's side, then its namespace:
// the kernel tears down an unmounted namespace, and the pairs with an end
// in it, only some time later, and until then the port keeps its name.
func (b *builder) removeVM(i int) error {
	hns, hh, err := b.openHost()
	if err != nil {
		return err
	}
	defer hns.Close()
	defer hh.Close()
	p, err := hh.LinkByName(port(i))
	if err != nil {
		return err
	}
	if portProgs {
		if err := unsecurePort(hh, p); err != nil {
			return err
		}
	}
	if err := hh.LinkDel(p); err != nil {
		return fmt.Errorf("delete veth %s: %w", port(i), err)
	}
	return deleteNS(b.ns(fmt.Sprintf("vm%d", i)))
}

func deleteNS(name string) error {
	if err := netns.DeleteNamed(name); err != nil {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}

// down deletes every namespace of the tag, the VMs' first: a namespace
// takes its links, and the pairs with an end in it, with it.
func (b *builder) down() error {
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	prefix := b.ns("")
	var errs []error
	host := ""
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		if name == b.ns("h1") {
			host = name
			continue
		}
		errs = append(errs, deleteNS(name))
	}
	if host != "" {
		errs = append(errs, deleteNS(filepath.Base(host)))
	}
	return errors.Join(errs...)
}

// networks makes the host namespace with n virtual networks as vnet makes
// them on a host that carries them: a bridge, a VXLAN device (no learning,
// a flooding entry and a remote VM's entry, neighbour suppression) and one
// VM port each, with a permanent neighbour entry for the remote VM on the
// bridge. It prints the time of each 500, split into the namespaces (or
// TAPs) and the links.
func (b *builder) networks(n int) error {
	hns, hh, err := newNS(b.ns("h1"))
	if err != nil {
		return err
	}
	defer hns.Close()
	defer hh.Close()
	// A TAP is made in the namespace of the thread that opens
	// /dev/net/tun, not by the netlink handle's socket, and /proc/sys/net
	// is the thread's namespace's too.
	if err := netns.Set(hns); err != nil {
		return err
	}
	// The host's own address, on a link made before any network's, as a
	// host's NIC is: a report the kernel sends from a link without an
	// address takes its source from the first link that has one.
	u0 := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "u0"}}
	if err := hh.LinkAdd(u0); err != nil {
		return err
	}
	if err := hh.AddrAdd(u0, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(192, 0, 2, 1), Mask: net.CIDRMask(24, 32)}}); err != nil {
		return err
	}
	if err := hh.LinkSetUp(u0); err != nil {
		return err
	}
	start, lap := time.Now(), time.Now()
	var nsTime, lapNS time.Duration
	for i := 1; i <= n; i++ {
		t0 := time.Now()
		port, closePort, err := b.networkPort(hh, i)
		if err != nil {
			return err
		}
		d := time.Since(t0)
		nsTime, lapNS = nsTime+d, lapNS+d
		err = network(hh, i, port)
		closePort()
		if err != nil {
			return err
		}
		if i%500 == 0 || i == n {
			fmt.Printf("%d networks: last %.2fs (ports %.2fs), total %.2fs (ports %.2fs)\n", i,
				time.Since(lap).Seconds(), lapNS.Seconds(), time.Since(start).Seconds(), nsTime.Seconds())
			lap, lapNS = time.Now(), 0
		}
	}
	return nil
}

// networkPort makes network i's VM port in the host namespace: a TAP, or a
// veth pair with its other end in a new VM namespace, brought up there.
func (b *builder) networkPort(hh *netlink.Handle, i int) (netlink.Link, func(), error) {
	if portKind == "tap" {
		tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "t" + strconv.Itoa(i)}, Mode: netlink.TUNTAP_MODE_TAP,
			Flags: netlink.TUNTAP_DEFAULTS, NonPersist: false}
		if err := hh.LinkAdd(tap); err != nil {
			return nil, nil, fmt.Errorf("add tap: %w", err)
		}
		for _, f := range tap.Fds {
			f.Close()
		}
		l, err := hh.LinkByName(tap.Name)
		return l, func() {}, err
	}
	vns, vh, err := newNS(b.ns(fmt.Sprintf("vm%d", i)))
	if err != nil {
		return nil, nil, err
	}
	done := func() { vns.Close(); vh.Close() }
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port(i)}, PeerName: "eth0", PeerNamespace: netlink.NsFd(vns)}
	if err := hh.LinkAdd(veth); err != nil {
		done()
		return nil, nil, fmt.Errorf("add veth %s: %w", port(i), err)
	}
	eth0, err := vh.LinkByName("eth0")
	if err == nil {
		err = vh.LinkSetUp(eth0)
	}
	var l netlink.Link
	if err == nil {
		l, err = hh.LinkByName(port(i))
	}
	if err != nil {
		done()
		return nil, nil, err
	}
	return l, done, nil
}

func network(hh *netlink.Handle, i int, port netlink.Link) error {
	name := "b" + strconv.Itoa(i)
	if err := hh.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		return fmt.Errorf("add bridge %s: %w", name, err)
	}
	vx := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: "x" + strconv.Itoa(i), MTU: 1450},
		VxlanId: i, SrcAddr: net.ParseIP("192.0.2.1"), Port: 4789, Learning: false}
	if err := hh.LinkAdd(vx); err != nil {
		return fmt.Errorf("add vxlan: %w", err)
	}
	br, err := hh.LinkByName(name)
	if err != nil {
		return err
	}
	x, err := hh.LinkByName(vx.Name)
	if err != nil {
		return err
	}
	for _, l := range []netlink.Link{br, x, port} {
		if err := quietIPv6(hh, l); err != nil {
			return err
		}
	}
	// Not the bridge: it holds the neighbour entries, IPv6 ones too, which
	// a link with IPv6 off refuses.
	for _, l := range []netlink.Link{x, port} {
		if err := disableIPv6(l); err != nil {
			return err
		}
	}
	for _, l := range []netlink.Link{x, port} {
		if err := hh.LinkSetMasterByIndex(l, br.Attrs().Index); err != nil {
			return err
		}
	}
	if err := hh.LinkSetLearning(x, false); err != nil {
		return err
	}
	if err := hh.LinkSetBrNeighSuppress(x, true); err != nil {
		return err
	}
	for _, l := range []netlink.Link{br, x, port} {
		if err := hh.LinkSetUp(l); err != nil {
			return err
		}
	}
	remote := net.ParseIP("192.0.2.2")
	mac := net.HardwareAddr{0x02, 0, byte(i >> 16), byte(i >> 8), byte(i), 1}
	for _, m := range []net.HardwareAddr{make(net.HardwareAddr, 6), mac} {
		if err := hh.NeighAppend(&netlink.Neigh{LinkIndex: x.Attrs().Index, Family: unix.AF_BRIDGE,
			State: netlink.NUD_PERMANENT | netlink.NUD_NOARP, Flags: netlink.NTF_SELF, IP: remote, HardwareAddr: m}); err != nil {
			return fmt.Errorf("fdb: %w", err)
		}
	}
	return hh.NeighSet(&netlink.Neigh{LinkIndex: br.Attrs().Index, Family: netlink.FAMILY_V4,
		State: netlink.NUD_PERMANENT, IP: net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)), HardwareAddr: mac})
}

// namespaces makes n empty namespaces with their loopback up, the cost of
// a namespace VM before any link.
func (b *builder) namespaces(n int) error {
	start, lap := time.Now(), time.Now()
	for i := 1; i <= n; i++ {
		ns, h, err := newNS(b.ns(fmt.Sprintf("vm%d", i)))
		if err != nil {
			return err
		}
		ns.Close()
		h.Close()
		if i%1000 == 0 || i == n {
			fmt.Printf("%d namespaces: last %.2fs, total %.2fs\n", i, time.Since(lap).Seconds(), time.Since(start).Seconds())
			lap = time.Now()
		}
	}
	return nil
}
