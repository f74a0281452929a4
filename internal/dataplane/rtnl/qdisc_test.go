package rtnl

import (
	"fmt"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/nsthread"
)

func TestParseQdiscHead(t *testing.T) {
	msg := func(index int32, handle, parent uint32, attrs ...*nl.RtAttr) []byte {
		m := &nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: index, Handle: handle, Parent: parent}
		b := m.Serialize()
		for _, a := range attrs {
			b = append(b, a.Serialize()...)
		}
		return b
	}
	kind := func(k string) *nl.RtAttr { return nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated(k)) }
	for _, c := range []struct {
		name, want string // want: "" for an error
		m          []byte
	}{
		{"root", "7 pfifo_fast none root", msg(7, 0, netlink.HANDLE_ROOT, kind("pfifo_fast"))},
		{"ingress", "3 clsact ffff:0 ingress", msg(3, 0xffff0000, netlink.HANDLE_INGRESS, kind("clsact"))},
		{"with settings after the kind", "5 htb 1:0 root", msg(5, 0x10000, netlink.HANDLE_ROOT, kind("htb"), nl.NewRtAttr(nl.TCA_OPTIONS, []byte{0, 0, 0, 0}))},
		{"no kind", "", msg(5, 0, netlink.HANDLE_ROOT)},
		{"short", "", []byte{0, 0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := parseQdiscHead(c.m)
			got := ""
			if err == nil {
				a := q.Attrs()
				got = fmt.Sprintf("%d %s %s %s", a.LinkIndex, q.Type(), netlink.HandleStr(a.Handle), netlink.HandleStr(a.Parent))
			}
			if got != c.want {
				t.Errorf("got %q (%v), want %q", got, err, c.want)
			}
		})
	}
}

// A few links' qdiscs read one link at a time are what the namespace's dump
// holds of them; a link whose qdisc has settings, or shows none, is left
// to the dump.
func TestQdiscsOfLinksAsTheDump(t *testing.T) {
	h, sock := scratchNamespace(t)
	add := func(link netlink.Link, up bool) netlink.Link {
		t.Helper()
		if err := h.LinkAdd(link); err != nil {
			t.Fatalf("add %s: %v", link.Attrs().Name, err)
		}
		if up {
			if err := h.LinkSetUp(link); err != nil {
				t.Fatal(err)
			}
		}
		got, err := h.LinkByName(link.Attrs().Name)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	bridge := add(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}, true)
	add(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "va"}, PeerName: "vb"}, true)
	add(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vc"}, PeerName: "vd"}, false)
	va, _ := h.LinkByName("va")
	vb, _ := h.LinkByName("vb")
	down, _ := h.LinkByName("vc")
	if err := h.LinkSetUp(vb); err != nil {
		t.Fatal(err)
	}
	for _, q := range []netlink.Qdisc{
		&netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: va.Attrs().Index, Handle: netlink.MakeHandle(2, 0), Parent: netlink.HANDLE_ROOT}, QdiscType: "pfifo_fast"},
		&netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: va.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}},
		netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: vb.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT}),
	} {
		if err := h.QdiscAdd(q); err != nil {
			t.Fatalf("add %s: %v", q.Type(), err)
		}
	}
	all, err := h.QdiscList(nil)
	if err != nil {
		t.Fatal(err)
	}
	dump := map[int][]netlink.Qdisc{}
	for _, q := range all {
		dump[q.Attrs().LinkIndex] = append(dump[q.Attrs().LinkIndex], q)
	}
	heads := func(qs []netlink.Qdisc) map[uint32]string {
		out := map[uint32]string{}
		for _, q := range qs {
			if p := q.Attrs().Parent; p == netlink.HANDLE_ROOT || p == netlink.HANDLE_INGRESS {
				out[p] = q.Type() + " " + netlink.HandleStr(q.Attrs().Handle)
			}
		}
		return out
	}
	got, ok, err := QdiscsOfLinks(sock, []netlink.Link{bridge, va})
	if err != nil || !ok {
		t.Fatalf("qdiscsOfLinks = %v, %v", ok, err)
	}
	for _, link := range []netlink.Link{bridge, va} {
		i := link.Attrs().Index
		if g, w := heads(got[i]), heads(dump[i]); fmt.Sprint(g) != fmt.Sprint(w) || len(w) == 0 {
			t.Errorf("%s: read alone %v, in the dump %v", link.Attrs().Name, g, w)
		}
	}
	if len(heads(got[va.Attrs().Index])) != 2 {
		t.Errorf("va's clsact is missing: %v", heads(got[va.Attrs().Index]))
	}
	for _, link := range []netlink.Link{vb, down} {
		if _, ok, err := QdiscsOfLinks(sock, []netlink.Link{bridge, link}); err != nil || ok {
			t.Errorf("%s (root %v): read alone (%v, %v), want the dump", link.Attrs().Name, heads(dump[link.Attrs().Index]), ok, err)
		}
	}
}

// scratchNamespace is a namespace of the test's own (no entry in the
// namespace directory), with a handle and a route socket in it, gone with
// the test. It skips the test unless run as root.
func scratchNamespace(t *testing.T) (*netlink.Handle, *nl.SocketHandle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root (network namespaces)")
	}
	ns, err := nsthread.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	var sock *nl.SocketHandle
	err = nsthread.In("scratch", ns, func() error {
		s, err := nl.GetNetlinkSocketAt(netns.None(), netns.None(), unix.NETLINK_ROUTE)
		sock = &nl.SocketHandle{Socket: s}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sock.Close)
	return h, sock
}
