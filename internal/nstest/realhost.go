package nstest

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/dataplane/nsthread"
)

// Machine makes a plain named namespace that stands in for a real host (or
// a container's namespace), named "vnet<base>-RunTag" so that no
// infrastructure's name matches it, and deletes it at cleanup.
func Machine(t testing.TB, base string) string {
	t.Helper()
	RequireRoot(t)
	name := "vnet" + base + "-" + RunTag
	err := nsthread.Run(func() error {
		h, err := netns.NewNamed(name)
		if err != nil {
			return err
		}
		return h.Close()
	})
	if err != nil {
		t.Fatalf("make namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil && !os.IsNotExist(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	if err := Do(t, name, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	}); err != nil {
		t.Fatal(err)
	}
	return name
}

// Exists reports whether a named namespace exists.
func Exists(name string) bool {
	_, err := os.Stat(dataplane.NetnsDir + "/" + name)
	return err == nil
}

// LinkState describes a link as the tests that give devices back compare
// it: master, MTU, alias, up, every qdisc with its settings, its addresses
// and the routes through it, one line each.
func LinkState(t testing.TB, ns, name string) []string {
	t.Helper()
	var out []string
	err := Do(t, ns, func() error {
		link, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		a := link.Attrs()
		master := "-"
		if a.MasterIndex != 0 {
			m, err := netlink.LinkByIndex(a.MasterIndex)
			if err != nil {
				return err
			}
			master = m.Attrs().Name
		}
		out = append(out, fmt.Sprintf("link %s master %s mtu %d alias %q up %v", a.Name, master, a.MTU, a.Alias, a.Flags&(1<<0) != 0))
		qs, err := netlink.QdiscList(link)
		if err != nil {
			return err
		}
		for _, q := range qs {
			out = append(out, fmt.Sprintf("qdisc %s parent %s handle %s %+v", q.Type(), netlink.HandleStr(q.Attrs().Parent),
				netlink.HandleStr(q.Attrs().Handle), qdiscParams(q)))
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, ad := range addrs {
			if ad.IP.IsLinkLocalUnicast() {
				continue // the kernel's own, and remade as the link goes up and down
			}
			out = append(out, "addr "+ad.IPNet.String())
		}
		routes, err := netlink.RouteList(link, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, r := range routes {
			out = append(out, fmt.Sprintf("route %v via %v scope %d table %d", r.Dst, r.Gw, r.Scope, r.Table))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read %s in %s: %v", name, ns, err)
	}
	sort.Strings(out)
	return out
}

// qdiscParams is a qdisc's settings without the attributes that the kernel
// changes as it runs.
func qdiscParams(q netlink.Qdisc) any {
	switch v := q.(type) {
	case *netlink.FqCodel:
		c := *v
		c.QdiscAttrs = netlink.QdiscAttrs{}
		return c
	case *netlink.Htb:
		return fmt.Sprintf("defcls %x", v.Defcls)
	}
	return ""
}

// AddTap makes a persistent TAP device in the namespace and sets it up, as
// libvirt does before QEMU opens it.
// Equivalent to: ip -n NS tuntap add NAME mode tap; ip -n NS link set NAME up
func AddTap(t testing.TB, ns, name string) {
	t.Helper()
	err := Do(t, ns, func() error {
		tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: name},
			Mode: netlink.TUNTAP_MODE_TAP, Flags: netlink.TUNTAP_NO_PI | netlink.TUNTAP_ONE_QUEUE}
		if err := netlink.LinkAdd(tap); err != nil {
			return err
		}
		return netlink.LinkSetUp(tap)
	})
	if err != nil {
		t.Fatalf("add tap %s in %s: %v", name, ns, err)
	}
}

// OpenTap opens an existing TAP device for frames, as QEMU does with
// -netdev tap,ifname=NAME: each read returns one Ethernet frame, each
// write sends one. The file is closed at cleanup.
func OpenTap(t testing.TB, ns, name string) *os.File {
	t.Helper()
	var f *os.File
	err := Do(t, ns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		var req struct {
			name  [unix.IFNAMSIZ]byte
			flags uint16
			_     [22]byte
		}
		copy(req.name[:], name)
		req.flags = unix.IFF_TAP | unix.IFF_NO_PI
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req))); errno != 0 {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF %s: %w", name, errno)
		}
		f = os.NewFile(uintptr(fd), "/dev/net/tun:"+name)
		return nil
	})
	if err != nil {
		t.Fatalf("open tap %s in %s: %v", name, ns, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// InNS runs a netlink request with a handle in the namespace.
func InNS(t testing.TB, ns string, fn func(h *netlink.Handle) error) {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	if err := fn(nh); err != nil {
		t.Fatalf("in %s: %v", ns, err)
	}
}

// Contains reports whether any line has the text.
func Contains(lines []string, text string) bool {
	for _, l := range lines {
		if strings.Contains(l, text) {
			return true
		}
	}
	return false
}
