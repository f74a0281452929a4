package nft

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/nsthread"
)

// A few ports' elements of the port maps read alone are what a dump of the
// maps holds of them; a port in no map has none, and a table without its
// maps reads as without them.
func TestPortElementsAsTheDump(t *testing.T) {
	f, ns := scratchFirewalls(t)
	table := bridgeTableOf("")
	err := f.nftIn(ns, func(c *nftables.Conn) error {
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
	conn, err := f.netfilterConn(ns)
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
	if kinds, err := f.portElements(ns, table, "port5"); err != nil || !slices.Equal(kinds, []string{portChains[0], portChains[1]}) {
		t.Errorf("port5 is in %v (%v), want the first two maps", kinds, err)
	}
	if err := f.nftIn(ns, func(c *nftables.Conn) error { c.DelSet(portMap(table, portChains[2])); return c.Flush() }); err != nil {
		t.Fatal(err)
	}
	if some, err := mapElementsOf(conn, table, ports); err != nil || len(some) != 2 {
		t.Errorf("without the %s map: %d maps read (%v), want 2", portChains[2], len(some), err)
	}
}

// scratchFirewalls are the firewalls of one namespace of the test's own
// (no entry in the namespace directory), named ns, gone with the test. It
// skips the test unless run as root.
func scratchFirewalls(t *testing.T) (f *Firewalls, ns string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root (network namespaces)")
	}
	h, err := nsthread.New()
	if err != nil {
		t.Fatal(err)
	}
	ns = "scratch"
	open := func(name string) (netns.NsHandle, error) {
		if name != ns {
			return netns.None(), fmt.Errorf("no namespace %s", name)
		}
		fd, err := unix.Dup(int(h))
		return netns.NsHandle(fd), err
	}
	f = New(open, func(string) string { return "" })
	t.Cleanup(func() { f.Close(); h.Close() })
	return f, ns
}
