package rtnl

import (
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A link's neighbour and forwarding entries asked for alone are what the
// namespace's dump holds of that link, and only those.
func TestNeighsOfLinkAsTheDump(t *testing.T) {
	h, sock := scratchNamespace(t)
	var bridges, tunnels []netlink.Link
	for i := range 3 {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("br%d", i)}}
		vx := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("vx%d", i)}, VxlanId: 100 + i, Port: 4789, Learning: false}
		for _, link := range []netlink.Link{br, vx} {
			if err := h.LinkAdd(link); err != nil {
				t.Fatalf("add %s: %v", link.Attrs().Name, err)
			}
			if err := h.LinkSetUp(link); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.LinkSetMaster(vx, br); err != nil {
			t.Fatal(err)
		}
		for j := range 2 + i {
			mac, _ := net.ParseMAC(fmt.Sprintf("02:00:00:00:%02x:%02x", i, j))
			if err := h.NeighAppend(&netlink.Neigh{LinkIndex: vx.Index, Family: unix.AF_BRIDGE, State: netlink.NUD_PERMANENT,
				Flags: netlink.NTF_SELF, HardwareAddr: mac, IP: net.ParseIP(fmt.Sprintf("192.0.2.%d", 10+j))}); err != nil {
				t.Fatalf("fdb on %s: %v", vx.Name, err)
			}
			if err := h.NeighAdd(&netlink.Neigh{LinkIndex: br.Index, State: netlink.NUD_PERMANENT, HardwareAddr: mac,
				IP: net.ParseIP(fmt.Sprintf("10.%d.0.%d", i, 10+j))}); err != nil {
				t.Fatalf("neigh on %s: %v", br.Name, err)
			}
		}
		bridges, tunnels = append(bridges, br), append(tunnels, vx)
	}
	text := func(ns []netlink.Neigh) []string {
		var out []string
		for _, n := range ns {
			out = append(out, fmt.Sprintf("%d %s %s %d", n.LinkIndex, n.IP, n.HardwareAddr, n.State))
		}
		slices.Sort(out)
		return out
	}
	for i := range 3 {
		for _, c := range []struct {
			link   netlink.Link
			family int
			want   int // permanent entries with an address
		}{{tunnels[i], unix.AF_BRIDGE, 2 + i}, {bridges[i], netlink.FAMILY_ALL, 2 + i}} {
			w, err := h.NeighList(c.link.Attrs().Index, c.family)
			if err != nil {
				t.Fatal(err)
			}
			w = slices.DeleteFunc(w, func(n netlink.Neigh) bool { return n.LinkIndex != c.link.Attrs().Index })
			g, err := NeighsOfLink(sock, c.link.Attrs().Index, c.family)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(text(g), text(w)) {
				t.Errorf("%s, family %d: alone %v, in the dump %v", c.link.Attrs().Name, c.family, text(g), text(w))
			}
			permanent := 0
			for _, n := range g {
				if n.State&netlink.NUD_PERMANENT != 0 && n.IP != nil {
					permanent++
				}
			}
			if permanent != c.want {
				t.Errorf("%s, family %d: %d permanent entries, want %d: %v", c.link.Attrs().Name, c.family, permanent, c.want, text(g))
			}
		}
	}
}
