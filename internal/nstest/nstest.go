// Package nstest helps integration tests build real infrastructures and
// prove they leave nothing behind. Every test that touches the kernel goes
// through it, so none can leak a namespace.
package nstest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/dataplane/nsthread"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// RequireRoot skips, loudly, a test that needs to change the network.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root to create network namespaces; CI runs these as root (sudo go test ./...)")
	}
	if testing.Short() {
		t.Skip("SKIPPED: an integration test, and -short runs unit tests only")
	}
}

// Engine returns an engine on the real kernel with a private state store.
// At cleanup it destroys every infra it applied and fails the test if any
// namespace of theirs is left.
func Engine(t testing.TB) *reconcile.Engine {
	t.Helper()
	RequireRoot(t)
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	eng := &reconcile.Engine{DP: dp, Store: st}
	t.Cleanup(func() {
		recs, _ := st.List()
		for _, r := range recs {
			if _, err := eng.Destroy(r.Name); err != nil {
				t.Errorf("cleanup: %v", err)
			}
			AssertGone(t, r.Name)
		}
		st.Close()
		dp.Close()
	})
	return eng
}

// Apply loads and applies a spec, failing the test on error.
func Apply(t testing.TB, eng *reconcile.Engine, src string) (*spec.Document, reconcile.Result) {
	t.Helper()
	doc, err := spec.Load("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Apply(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, res
}

// AssertGone fails if any namespace, cgroup or stray link of the infra
// remains. It looks at the infra's own objects only, so other runs on the
// host cannot fail it.
func AssertGone(t testing.TB, infra string) {
	t.Helper()
	entries, _ := os.ReadDir(dataplane.NetnsDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), plan.InfraNSPrefix(infra)) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
	// vnet makes nothing in the root namespace; a veth end stranded there by
	// a failed move names its peer, in one of the infra's namespaces.
	links, _ := netlink.LinkList()
	for _, l := range links {
		if a := l.Attrs().Alias; strings.HasPrefix(a, plan.AliasPrefix) && strings.Contains(a, plan.InfraNSPrefix(infra)) {
			t.Errorf("link %s (%s) left behind in the root namespace", l.Attrs().Name, a)
		}
	}
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuset"} {
		if _, err := os.Stat(filepath.Join(root, "vnet", infra)); err == nil {
			t.Errorf("cgroup %s left behind", filepath.Join(root, "vnet", infra))
		}
	}
}

// Do runs fn on a thread inside the namespace; sockets it opens stay there.
// The thread goes back to the namespace it came from before it serves
// other goroutines. It must: Go ends a thread a goroutine leaves locked,
// except the process's main thread, which it keeps as it is. Left in the
// namespace, the main thread would make the whole test process count as
// running there, and destroying the namespace kills what runs there.
func Do(t testing.TB, ns string, fn func() error) error {
	t.Helper()
	return nsthread.InNamed(ns, fn)
}

// Listen opens a TCP listener inside a namespace.
func Listen(t testing.TB, ns, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	if err := Do(t, ns, func() (err error) { l, err = net.Listen("tcp", addr); return }); err != nil {
		t.Fatalf("listen in %s: %v", ns, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// EchoLines answers each TCP connection to addr in the namespace with the
// first line it sends, as the guests' echo expects, until the test ends.
func EchoLines(t testing.TB, ns, addr string) {
	t.Helper()
	l := Listen(t, ns, addr)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if line, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					c.Write([]byte(line))
				}
			}()
		}
	}()
}

// Dial opens a TCP connection from inside a namespace.
func Dial(t testing.TB, ns, addr string, d net.Dialer) (net.Conn, error) {
	t.Helper()
	var c net.Conn
	err := Do(t, ns, func() (err error) { c, err = d.Dial("tcp", addr); return })
	return c, err
}

// Snapshot describes what the kernel holds for an infra: namespaces, links
// (with type, master, MTU, MAC, state), addresses, qdiscs and classes, one
// line each and sorted, so two snapshots compare as text.
func Snapshot(t testing.TB, infra string) []string {
	t.Helper()
	var out []string
	entries, _ := os.ReadDir(dataplane.NetnsDir)
	for _, e := range entries {
		ns := e.Name()
		if !strings.HasPrefix(ns, plan.InfraNSPrefix(infra)) {
			continue
		}
		out = append(out, "netns "+ns)
		out = append(out, snapshotNS(t, ns)...)
		out = append(out, snapshotNFT(t, ns)...)
	}
	sort.Strings(out)
	return out
}

// Netlink returns a netlink handle in namespace ns, closed when the test
// ends.
func Netlink(t testing.TB, ns string) *netlink.Handle {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Close)
	return nl
}

func snapshotNS(t testing.TB, ns string) []string {
	nl := Netlink(t, ns)
	links, err := nl.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	var out []string
	for _, l := range links {
		a := l.Attrs()
		p := ns + " " + a.Name
		out = append(out, fmt.Sprintf("link %s type=%s master=%s mtu=%d mac=%s up=%v alias=%q",
			p, l.Type(), names[a.MasterIndex], a.MTU, a.HardwareAddr, a.Flags&net.FlagUp != 0, a.Alias))
		if a.MasterIndex != 0 {
			if pi, err := nl.LinkGetProtinfo(l); err == nil {
				out = append(out, fmt.Sprintf("bridge port %s isolated=%v flood=%v learning=%v", p, pi.Isolated, pi.Flood, pi.Learning))
			}
		}
		for _, hook := range []struct {
			name   string
			parent uint32
		}{{"ingress", netlink.HANDLE_MIN_INGRESS}, {"egress", netlink.HANDLE_MIN_EGRESS}} {
			fs, _ := nl.FilterList(l, hook.parent)
			for _, f := range fs {
				if b, ok := f.(*netlink.BpfFilter); ok {
					out = append(out, fmt.Sprintf("filter %s %s bpf %q", p, hook.name, b.Name))
				}
			}
		}
		addrs, _ := nl.AddrList(l, netlink.FAMILY_ALL)
		for _, ad := range addrs {
			if !ad.IP.IsLinkLocalUnicast() {
				out = append(out, "addr "+p+" "+ad.IPNet.String())
			}
		}
		qs, _ := nl.QdiscList(l)
		for _, q := range qs {
			if q.Type() == "noqueue" || q.Attrs().Handle == 0 {
				continue // the kernel's defaults, which it may number differently
			}
			out = append(out, fmt.Sprintf("qdisc %s %s %s parent %s", p, q.Type(), netlink.HandleStr(q.Attrs().Handle), netlink.HandleStr(q.Attrs().Parent)))
			fs, _ := nl.FilterList(l, q.Attrs().Handle)
			for _, f := range fs {
				if u, ok := f.(*netlink.U32); ok && u.Sel != nil {
					out = append(out, fmt.Sprintf("filter %s prio %d u32 %v -> %s", p, u.Priority, u.Sel.Keys, netlink.HandleStr(u.ClassId)))
				}
			}
		}
		cs, _ := nl.ClassList(l, 0)
		for _, c := range cs {
			desc := fmt.Sprintf("class %s %s %s", p, c.Type(), netlink.HandleStr(c.Attrs().Handle))
			if htb, ok := c.(*netlink.HtbClass); ok {
				// the buckets in bytes, as tc shows them
				desc += fmt.Sprintf(" rate=%d ceil=%d burst=%dB cburst=%dB", htb.Rate, htb.Ceil,
					netlink.Xmitsize(htb.Rate, htb.Buffer), netlink.Xmitsize(htb.Ceil, htb.Cbuffer))
			}
			out = append(out, desc)
		}
	}
	return out
}

// Ifindexes maps ns/link to ifindex for every link of the infra.
func Ifindexes(t testing.TB, infra string) map[string]int {
	t.Helper()
	out := map[string]int{}
	entries, _ := os.ReadDir(dataplane.NetnsDir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), plan.InfraNSPrefix(infra)) {
			continue
		}
		h, err := netns.GetFromName(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		nl, err := netlink.NewHandleAt(h)
		h.Close()
		if err != nil {
			t.Fatal(err)
		}
		links, _ := nl.LinkList()
		for _, l := range links {
			out[e.Name()+"/"+l.Attrs().Name] = l.Attrs().Index
		}
		nl.Close()
	}
	return out
}

// NSName is the namespace of a node of an infra.
func NSName(infra, node string) string { return plan.NSName(infra, node) }

// ProgramPort is a link of a namespace that runs vnet's port programs, and
// the programs' IDs: its ingress hook's and its egress hook's (0 for a
// hook without one).
type ProgramPort struct {
	Name  string
	Index uint32
	IDs   [2]uint32
}

// ProgramPorts lists the links of a namespace that run port programs.
func ProgramPorts(t testing.TB, ns string) []ProgramPort {
	t.Helper()
	h := Netlink(t, ns)
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []ProgramPort
	for _, l := range links {
		var ids [2]uint32
		for i, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, _ := h.FilterList(l, parent)
			for _, f := range fs {
				if bf, ok := f.(*netlink.BpfFilter); ok && strings.HasPrefix(bf.Name, plan.AliasPrefix+"port ") {
					ids[i] = uint32(bf.Id)
				}
			}
		}
		if ids != [2]uint32{} {
			out = append(out, ProgramPort{Name: l.Attrs().Name, Index: uint32(l.Attrs().Index), IDs: ids})
		}
	}
	return out
}
