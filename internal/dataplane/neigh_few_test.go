package dataplane

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A link's neighbour and forwarding entries asked for alone are what the
// namespace's dump holds of that link, and only those.
func TestNeighsOfLinkAsTheDump(t *testing.T) {
	l, ns, h := scratchNamespace(t, "vnettestn")
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
	sock, err := l.routeSocket(ns)
	if err != nil {
		t.Fatal(err)
	}
	dump, alone := &neighDumps{h: h}, &neighDumps{h: h, perLink: sock}
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
			w, err := dump.of(c.link.Attrs().Index, c.family)
			if err != nil {
				t.Fatal(err)
			}
			g, err := alone.of(c.link.Attrs().Index, c.family)
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

// A few ports' elements of the port maps read alone are what a dump of the
// maps holds of them; a port in no map has none, and a table without its
// maps reads as without them.
func TestPortElementsAsTheDump(t *testing.T) {
	_, ns, _ := scratchNamespace(t, "vnettestm")
	table := bridgeTableOf("")
	err := nftIn(ns, func(c *nftables.Conn) error {
		c.AddTable(table)
		for i, kind := range portChains {
			c.AddChain(&nftables.Chain{Name: kind + "-chain", Table: table})
			m := portMap(table, kind)
			if err := c.AddSet(m, nil); err != nil {
				return err
			}
			var elems []nftables.SetElement
			for p := range 20 {
				if p%3 == i {
					continue // each port in two of the three maps
				}
				e := nftables.SetElement{Key: ifname(fmt.Sprintf("port%d", p)), Comment: fmt.Sprintf("port port%d d%d", p, p),
					VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: kind + "-chain"}}
				elems = append(elems, e)
			}
			if err := c.SetAddElements(m, elems); err != nil {
				return err
			}
		}
		return c.Flush()
	})
	if err != nil {
		t.Fatalf("make the maps: %v", err)
	}
	conn, err := netfilterConn(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	all, err := mapElementsOf(conn, table, nil)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]bool{"port1": true, "port5": true, "port9": true, "nosuch": true}
	some, err := mapElementsOf(conn, table, ports)
	if err != nil {
		t.Fatal(err)
	}
	for i, kind := range portChains {
		var want []elemNote
		for _, e := range all[kind] {
			if ports[e.port] {
				want = append(want, e)
			}
		}
		byPort := func(a, b elemNote) int { return strings.Compare(a.port, b.port) }
		slices.SortFunc(want, byPort)
		got := slices.SortedFunc(slices.Values(some[kind]), byPort)
		if len(all[kind]) != 20-(20-i+2)/3 || len(want) != 2 || !slices.Equal(got, want) {
			t.Errorf("%s: read alone %v, in the dump %v (of %d)", kind, got, want, len(all[kind]))
		}
	}
	if kinds, err := portElements(ns, table, "port5"); err != nil || !slices.Equal(kinds, []string{portChains[0], portChains[1]}) {
		t.Errorf("port5 is in %v (%v), want the first two maps", kinds, err)
	}
	if err := nftIn(ns, func(c *nftables.Conn) error { c.DelSet(portMap(table, portChains[2])); return c.Flush() }); err != nil {
		t.Fatal(err)
	}
	if some, err := mapElementsOf(conn, table, ports); err != nil || len(some) != 2 {
		t.Errorf("without the %s map: %d maps read (%v), want 2", portChains[2], len(some), err)
	}
}
