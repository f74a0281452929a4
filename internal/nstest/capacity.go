package nstest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vnet-project/vnet/internal/dataplane/nsthread"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/units"
)

// What a shaper carries is this machine's business, not vnet's: on a host
// whose qdisc timers fire late a plain `tbf rate 100mbit` carries 40, and
// on another day 95. So tests never compare a measured rate with the rate
// a spec names. They compare it with the Capacity of the machine, measured
// in the same test just before, through a bare path shaped the way a vnet
// line is, and they compare rates with each other.

// CapacityMeasure is how long Capacity streams, after Goodput's warm-up.
const CapacityMeasure = 2 * time.Second

// Capacity is what this machine carries now, in bit/s, through a bare path
// shaped to rate the way a vnet line is: TCP from a namespace through an
// HTB-shaped veth into a bridge in a second namespace, and out through a
// second HTB-shaped veth into a third (a NIC's egress, then the physical
// switch's port). It measures with Goodput, as tests measure vnet.
//
// When VNET_WIRE_CEILING caps vnet's emulated wires, the path is shaped to
// the lower of rate and the ceiling: the cap stands for a machine that
// carries no more.
func Capacity(t testing.TB, rate float64) float64 {
	t.Helper()
	RequireRoot(t)
	shaped := rate
	if c := WireCeiling(t); c > 0 && c < rate {
		shaped = c
	}
	p := newBarePath(t, uint64(shaped))
	defer p.remove(t)
	got := Goodput(t, p.ns[0], p.ns[2], barePathTo, CapacityMeasure)
	capped := ""
	if shaped < rate {
		capped = fmt.Sprintf(" (%s, capped by VNET_WIRE_CEILING)", units.Rate(shaped))
	}
	t.Logf("capacity: a bare path shaped to %s%s carries %.1f Mbit/s on this machine now (%.0f%%)",
		units.Rate(rate), capped, got/1e6, 100*got/rate)
	return got
}

// RequireCapacity measures Capacity and skips the test, loudly, when this
// machine carries under fraction of rate: its premise (e.g. that a port
// can be seen busy against its line rate) does not hold here.
func RequireCapacity(t testing.TB, rate, fraction float64, premise string) float64 {
	t.Helper()
	c := Capacity(t, rate)
	if c < fraction*rate {
		t.Skipf("SKIPPED: %s needs this machine to carry %.0f%% of %s through a shaper, and a bare shaped path carried %.1f Mbit/s (%.0f%%): its qdisc timers run late",
			premise, 100*fraction, units.Rate(rate), c/1e6, 100*c/rate)
	}
	return c
}

// WireCeiling is VNET_WIRE_CEILING in bit/s, 0 when it is not set.
func WireCeiling(t testing.TB) float64 {
	s := os.Getenv("VNET_WIRE_CEILING")
	if s == "" {
		return 0
	}
	r, err := units.ParseRate(s)
	if err != nil {
		t.Fatalf("VNET_WIRE_CEILING=%q: %v", s, err)
	}
	return float64(r)
}

const (
	barePathFrom = "10.250.0.1"
	barePathTo   = "10.250.0.2"
)

// barePath is three namespaces: a sender, a bridge, a receiver.
type barePath struct{ ns [3]string }

func newBarePath(t testing.TB, rate uint64) *barePath {
	t.Helper()
	p := &barePath{}
	for i, role := range []string{"tx", "br", "rx"} {
		p.ns[i] = fmt.Sprintf("vnettest-%s-%s", RunTag, role)
	}
	ok := false
	defer func() {
		if !ok {
			p.remove(t)
		}
	}()
	h := make([]*netlink.Handle, 3)
	for i, name := range p.ns {
		nh, err := newNamedNS(name)
		if err != nil {
			t.Fatalf("bare path: create namespace %s: %v", name, err)
		}
		h[i], err = netlink.NewHandleAt(nh)
		if err != nil {
			nh.Close()
			t.Fatalf("bare path: %v", err)
		}
		defer h[i].Close()
		// The peer ends are created here by file descriptor, so keep it open until then.
		defer nh.Close()
		if lo, err := h[i].LinkByName("lo"); err == nil {
			h[i].LinkSetUp(lo)
		}
	}
	brNS, err := netns.GetFromName(p.ns[1])
	if err != nil {
		t.Fatal(err)
	}
	defer brNS.Close()
	rxNS, err := netns.GetFromName(p.ns[2])
	if err != nil {
		t.Fatal(err)
	}
	defer rxNS.Close()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("bare path: %s: %v", what, err)
		}
	}
	// tx/eth0 -- br/in, br/out -- rx/eth0; the bridge's egress toward rx is
	// shaped, like the physical switch's port toward a NIC.
	must("veth tx", h[0].LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "in", PeerNamespace: netlink.NsFd(brNS)}))
	must("veth rx", h[2].LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "out", PeerNamespace: netlink.NsFd(brNS)}))
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br"}}
	must("bridge", h[1].LinkAdd(br))
	// Like vnet's own bridges, this one skips br_netfilter's hooks.
	_ = Do(t, p.ns[1], func() error {
		return os.WriteFile("/proc/sys/net/bridge/bridge-nf-call-iptables", []byte("0"), 0o644)
	})
	for _, port := range []string{"in", "out"} {
		l, err := h[1].LinkByName(port)
		must(port, err)
		must(port+" master", h[1].LinkSetMaster(l, br))
		must(port+" up", h[1].LinkSetUp(l))
	}
	must("bridge up", h[1].LinkSetUp(br))
	for i, ip := range map[int]string{0: barePathFrom, 2: barePathTo} {
		l, err := h[i].LinkByName("eth0")
		must("eth0", err)
		addr, _ := netlink.ParseAddr(ip + "/24")
		must("address", h[i].AddrAdd(l, addr))
		must("eth0 up", h[i].LinkSetUp(l))
	}
	for _, s := range []struct {
		h    *netlink.Handle
		link string
	}{{h[0], "eth0"}, {h[1], "out"}} {
		l, err := s.h.LinkByName(s.link)
		must(s.link, err)
		must("shape "+s.link, shape(s.h, l, rate))
	}
	ok = true
	return p
}

// shape puts a vnet line's HTB tree on a link: root 1:, class 1:1 at the
// rate, default leaf 1:10, buckets of plan.ClassBurst.
func shape(h *netlink.Handle, l netlink.Link, rate uint64) error {
	idx := l.Attrs().Index
	q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
	q.Defcls = 0x10
	if err := h.QdiscReplace(q); err != nil {
		return err
	}
	burst := plan.ClassBurst(rate)
	bucket := uint32(burst + rate/8/1e6 + 1)
	quantum := uint32(min(max(rate/8/10, 1514), 200000))
	for _, c := range [][2]uint32{{netlink.MakeHandle(1, 0), netlink.MakeHandle(1, 1)}, {netlink.MakeHandle(1, 1), netlink.MakeHandle(1, 0x10)}} {
		class := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: c[0], Handle: c[1]},
			netlink.HtbClassAttrs{Rate: rate, Ceil: rate, Quantum: quantum, Buffer: bucket, Cbuffer: bucket})
		if err := h.ClassReplace(class); err != nil {
			return err
		}
	}
	return nil
}

// newNamedNS makes a named namespace. netns.NewNamed moves the calling
// thread into it, so it runs on a thread that goes back after (nsthread.Run).
func newNamedNS(name string) (netns.NsHandle, error) {
	var h netns.NsHandle
	err := nsthread.Run(func() (err error) {
		h, err = netns.NewNamed(name)
		return err
	})
	return h, err
}

func (p *barePath) remove(t testing.TB) {
	for _, name := range p.ns {
		if name == "" {
			continue
		}
		if err := netns.DeleteNamed(name); err != nil && !os.IsNotExist(err) && !strings.Contains(err.Error(), "no such file") {
			t.Errorf("bare path: delete namespace %s: %v", name, err)
		}
	}
}

// CarriesAsMuch checks that a vnet path shaped to rate carries at least
// fraction of what a bare path shaped to rate carries on this machine now,
// and returns the best of each. measure streams once through vnet's path.
// What a slow host carries swings from one second to the next, so on a
// shortfall both are measured again, up to three times in all, and the
// best of each compared: a path that is really slower stays slower.
func CarriesAsMuch(t testing.TB, rate, fraction float64, what string, measure func() float64) (got, capacity float64) {
	t.Helper()
	for try := 1; try <= 3; try++ {
		capacity = max(capacity, Capacity(t, rate))
		g := measure()
		t.Logf("%s: %.1f Mbit/s (try %d)", what, g/1e6, try)
		got = max(got, g)
		if got >= fraction*capacity {
			return got, capacity
		}
	}
	t.Errorf("%s: %.1f Mbit/s at best, under %.0f%% of the %.1f Mbit/s a bare path shaped to %s carries on this machine now",
		what, got/1e6, 100*fraction, capacity/1e6, units.Rate(rate))
	return got, capacity
}
