package bpfpolicy

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"

	"github.com/vnet-project/vnet/internal/dataplane/nsthread"
	"github.com/vnet-project/vnet/internal/plan"
)

const (
	vmMAC           = "02:00:00:00:00:01"
	peerMAC         = "02:00:00:00:00:02"
	verdictPass     = 0xffffffff // TC_ACT_UNSPEC: on to the next filter
	verdictShot     = 2
	verdictRedirect = 7
	// The kernel's test runs hand a program its frame on lo, index 1, of
	// the namespace they run in: the port under test. Other ports are
	// only settings.
	testPort = 1
)

var (
	vmIP   = netip.MustParseAddr("10.0.0.1")
	peerIP = netip.MustParseAddr("10.1.1.1")
	vmIP6  = netip.MustParseAddr("fd00::1")
)

// frame builds an Ethernet frame.
func frame(dst, src string, etype uint16, payload []byte) []byte {
	d, _ := net.ParseMAC(dst)
	s, _ := net.ParseMAC(src)
	b := append(append(append([]byte{}, d...), s...), byte(etype>>8), byte(etype))
	return append(b, payload...)
}

// ipv4 builds an IPv4 packet (no options) around a transport payload.
func ipv4(src, dst netip.Addr, proto byte, l4 []byte) []byte {
	h := make([]byte, 20)
	h[0], h[8], h[9] = 0x45, 64, proto
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(l4)))
	copy(h[12:], src.AsSlice())
	copy(h[16:], dst.AsSlice())
	return append(h, l4...)
}

// fragment sets an IPv4 packet's fragment field (flags and offset) and,
// optionally, its id (7 otherwise).
func fragment(ip []byte, field uint16, id ...uint16) []byte {
	binary.BigEndian.PutUint16(ip[6:], field)
	binary.BigEndian.PutUint16(ip[4:], 7)
	if len(id) > 0 {
		binary.BigEndian.PutUint16(ip[4:], id[0])
	}
	return ip
}

func ipv6(src, dst netip.Addr, next byte, l4 []byte) []byte {
	h := make([]byte, 40)
	h[0], h[6], h[7] = 0x60, next, 255
	binary.BigEndian.PutUint16(h[4:], uint16(len(l4)))
	copy(h[8:], src.AsSlice())
	copy(h[24:], dst.AsSlice())
	return append(h, l4...)
}

func ports(sport, dport uint16, flags byte) []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint16(b, sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	b[12], b[13] = 5<<4, flags
	return b
}

func icmp(typ byte, id uint16, rest []byte) []byte {
	b := make([]byte, 8)
	b[0] = typ
	binary.BigEndian.PutUint16(b[4:], id)
	return append(b, rest...)
}

func arp(senderMAC string, senderIP netip.Addr) []byte {
	b := make([]byte, 28)
	binary.BigEndian.PutUint16(b, 1)
	binary.BigEndian.PutUint16(b[2:], 0x0800)
	b[4], b[5], b[7] = 6, 4, 1
	m, _ := net.ParseMAC(senderMAC)
	copy(b[8:], m)
	copy(b[14:], senderIP.AsSlice())
	return b
}

func TestCompileExpandsRulesByFamilyAndPrefix(t *testing.T) {
	p := plan.PortPolicy{MAC: vmMAC, Default: plan.ActionDeny, Rules: []plan.PolicyRule{
		{Allow: true, In: true, Proto: "tcp", DPort: 443},
		{Allow: true, In: true, Src: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("192.0.2.1/32")}},
		{Allow: true, In: false, Proto: "icmp"},
		{Allow: true, In: true, Src: []netip.Prefix{}}, // a port group without members
	}}
	c, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	// part returns the entries one part holds: counter/family/proto each.
	part := func(in bool, proto int) []string {
		k := proto
		if in {
			k += parts
		}
		var out []string
		start, n := c.Port.Part[k][0], c.Port.Part[k][1]
		for _, e := range c.Rules[start : start+n] {
			out = append(out, fmt.Sprintf("%d/%d/%d", e.Counter, e.Family, e.Proto))
		}
		return out
	}
	for _, want := range []struct {
		in      bool
		proto   int // index in partProtos
		entries []string
	}{
		{true, 0, []string{"8/0/6", "9/4/0", "9/4/0", "9/6/0"}}, // tcp in: rule 0, then rule 1 by family and prefix
		{true, 1, []string{"9/4/0", "9/4/0", "9/6/0"}},          // udp in: rule 1 only
		{true, 4, []string{"9/4/0", "9/4/0", "9/6/0"}},          // other protocols in
		{false, 2, []string{"10/4/1"}},                          // icmp out: rule 2
		{false, 0, nil},                                         // tcp out: nothing
		{false, 3, nil},                                         // icmpv6 out: rule 2 is IPv4's
	} {
		if got := part(want.in, want.proto); !slices.Equal(got, want.entries) {
			t.Errorf("part in=%v proto %d: %v, want %v", want.in, partProtos[want.proto], got, want.entries)
		}
	}
	if c.Counters != 12 || c.Port.Flags != flagACL|flagDeny {
		t.Errorf("%d counters, flags %b", c.Counters, c.Port.Flags)
	}
	if m := c.Rules[c.Port.Part[parts][0]+1].Smask[0]; m != ne32([4]byte{255, 0, 0, 0}) {
		t.Errorf("10.0.0.0/8's mask %08x", m)
	}
}

func TestLabels(t *testing.T) {
	for i, want := range map[int]string{0: "forged-mac", 6: "not-for-mac", 7: "acl-default", 8: "acl[0]", 11: "acl[3]"} {
		if got := Label(i); got != want {
			t.Errorf("Label(%d) = %s, want %s", i, got, want)
		}
	}
}

// testPrograms loads the programs for a test, or skips without root. Its
// test runs go on in a namespace of their own (see run), whose lo stays
// down: what a program sends on (the bridge's copy to learn from) goes
// nowhere.
func testPrograms(t testing.TB) *Programs {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: loading BPF programs needs root; CI runs these as root")
	}
	progs, err := Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(progs.Close)
	ns, err := nsthread.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	testNS[progs] = ns
	return progs
}

var testNS = map[*Programs]netns.NsHandle{}

// setPort compiles a policy and sets it on a port.
func setPort(t testing.TB, progs *Programs, port uint32, p plan.PortPolicy, bridge uint32) {
	t.Helper()
	c, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := progs.Set(port, c, bridge, nil); err != nil {
		t.Fatal(err)
	}
}

// load loads the programs with one port's policy on the test port.
func load(t testing.TB, p plan.PortPolicy) *Programs {
	t.Helper()
	progs := testPrograms(t)
	setPort(t, progs, testPort, p, 0)
	return progs
}

// run runs a program on a frame, n times, in the test's namespace.
func run(t testing.TB, progs *Programs, prog *ebpf.Program, frame []byte, n int) uint32 {
	t.Helper()
	// Test runs need a frame of at least an Ethernet header's length.
	for len(frame) < 60 {
		frame = append(frame, 0)
	}
	var got uint32
	err := nsthread.In("test", testNS[progs], func() (err error) {
		got, err = prog.Run(&ebpf.RunOptions{Data: frame, Repeat: uint32(n)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func counters(t testing.TB, progs *Programs, port uint32) map[string]uint64 {
	t.Helper()
	c, err := progs.Counters(port)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The programs judged by the kernel's test runs of crafted frames.
func TestProgramsJudgeFrames(t *testing.T) {
	ll, _ := plan.LinkLocal(vmMAC)
	port := load(t, plan.PortPolicy{MAC: vmMAC, GuardMAC: true, GuardIP: true, GuardRA: true, UnicastOnly: true,
		IPs:     []netip.Addr{vmIP, vmIP6, netip.IPv4Unspecified(), netip.IPv6Unspecified(), ll},
		Default: plan.ActionDeny, Rules: []plan.PolicyRule{
			{Allow: true, In: true, Proto: "tcp", DPort: 443, Src: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
			{Allow: false, In: true, Proto: "tcp", DPort: 22},
			{Allow: true, In: true, Proto: "icmp"},
		}})
	na := func(target netip.Addr) []byte {
		b := icmp(136, 0, append(target.AsSlice(), 2, 1, 2, 0, 0, 0, 0, 1))
		return ipv6(ll, netip.MustParseAddr("ff02::1"), 58, b)
	}
	quoted := ipv4(vmIP, peerIP, 6, ports(443, 1234, 0x12))[:28]
	cases := []struct {
		name    string
		fromVM  bool
		frame   []byte
		verdict uint32
		counted string
	}{
		{"forged source MAC", true, frame(peerMAC, peerMAC, 0x0800, ipv4(vmIP, peerIP, 17, ports(1, 2, 0))), verdictShot, "forged-mac"},
		{"spoofed IPv4 source", true, frame(peerMAC, vmMAC, 0x0800, ipv4(peerIP, vmIP, 17, ports(1, 2, 0))), verdictShot, "ip-spoof"},
		{"ARP for another address", true, frame("ff:ff:ff:ff:ff:ff", vmMAC, 0x0806, arp(vmMAC, peerIP)), verdictShot, "arp-spoof"},
		{"ARP with another MAC", true, frame("ff:ff:ff:ff:ff:ff", vmMAC, 0x0806, arp(peerMAC, vmIP)), verdictShot, "arp-spoof"},
		{"own ARP", true, frame("ff:ff:ff:ff:ff:ff", vmMAC, 0x0806, arp(vmMAC, vmIP)), verdictPass, ""},
		{"two VLAN tags", true, frame(peerMAC, vmMAC, 0x8100, make([]byte, 46)), verdictShot, "stacked-vlan"},
		{"spoofed IPv6 source", true, frame(peerMAC, vmMAC, 0x86dd, ipv6(netip.MustParseAddr("fd00::9"), vmIP6, 17, ports(1, 2, 0))), verdictShot, "ip-spoof"},
		{"router advertisement", true, frame("33:33:00:00:00:01", vmMAC, 0x86dd, ipv6(ll, netip.MustParseAddr("ff02::1"), 58, icmp(134, 0, make([]byte, 8)))), verdictShot, "ra-guard"},
		{"advertisement for another target", true, frame("33:33:00:00:00:01", vmMAC, 0x86dd, na(netip.MustParseAddr("fd00::9"))), verdictShot, "nd-spoof"},
		{"own advertisement", true, frame("33:33:00:00:00:01", vmMAC, 0x86dd, na(vmIP6)), verdictPass, ""},
		{"unicast for another MAC", false, frame(peerMAC, vmMAC, 0x0806, arp(vmMAC, vmIP)), verdictShot, "not-for-mac"},
		{"broadcast", false, frame("ff:ff:ff:ff:ff:ff", peerMAC, 0x0806, arp(peerMAC, peerIP)), verdictPass, ""},
		{"https from 10/8", false, frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 6, ports(1234, 443, 0x02))), verdictPass, "acl[0]"},
		{"its reply, though egress is default deny", true, frame(peerMAC, vmMAC, 0x0800, ipv4(vmIP, peerIP, 6, ports(443, 1234, 0x12))), verdictPass, ""},
		{"ICMP error about it", false, frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 1, icmp(3, 0, quoted))), verdictPass, ""},
		{"ssh, denied by rule", false, frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 6, ports(1234, 22, 0x02))), verdictShot, "acl[1]"},
		{"http, denied by default", false, frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 6, ports(1234, 80, 0x02))), verdictShot, "acl-default"},
		{"VM opens a connection, egress default deny", true, frame(peerMAC, vmMAC, 0x0800, ipv4(vmIP, peerIP, 6, ports(5555, 80, 0x02))), verdictShot, "acl-default"},
		{"ping", false, frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 1, icmp(8, 7, nil))), verdictPass, "acl[2]"},
		{"pong", true, frame(peerMAC, vmMAC, 0x0800, ipv4(vmIP, peerIP, 1, icmp(0, 7, nil))), verdictPass, ""},
		{"a first fragment of no connection", true, frame(peerMAC, vmMAC, 0x0800, fragment(ipv4(vmIP, peerIP, 6, ports(443, 4000, 0)), 0x2000)), verdictShot, "acl-default"},
		{"a request in, replied in fragments", false, frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 6, ports(4000, 443, 0x02))), verdictPass, "acl[0]"},
		{"the reply's first fragment", true, frame(peerMAC, vmMAC, 0x0800, fragment(ipv4(vmIP, peerIP, 6, ports(443, 4000, 0x10)), 0x2000)), verdictPass, ""},
		{"its second fragment", true, frame(peerMAC, vmMAC, 0x0800, fragment(ipv4(vmIP, peerIP, 6, make([]byte, 16)), 0x0002)), verdictPass, ""},
		{"another packet's later fragment", true, frame(peerMAC, vmMAC, 0x0800, fragment(ipv4(vmIP, peerIP, 6, make([]byte, 16)), 0x0002, 99)), verdictShot, "acl-default"},
		{"VM pings with the same id, egress default deny", true, frame(peerMAC, vmMAC, 0x0800, ipv4(vmIP, peerIP, 1, icmp(8, 7, nil))), verdictShot, "acl-default"},
	}
	for _, c := range cases {
		prog := port.ToVM
		if c.fromVM {
			prog = port.FromVM
		}
		before := counters(t, port, testPort)
		if got := run(t, port, prog, c.frame, 1); got != c.verdict {
			t.Errorf("%s: verdict %d, want %d", c.name, int32(got), int32(c.verdict))
		}
		after := counters(t, port, testPort)
		if c.counted != "" && after[c.counted] != before[c.counted]+1 {
			t.Errorf("%s: %s counted %d -> %d", c.name, c.counted, before[c.counted], after[c.counted])
		}
	}
	if got := counters(t, port, testPort); len(got) != 11 {
		t.Errorf("counters %v: want the 8 checks' and 3 rules'", got)
	}
}

// A large ACL loads, and its rules are walked by a connection's first
// packet only.
func TestThousandRulesLoad(t *testing.T) {
	p := plan.PortPolicy{MAC: vmMAC, Default: plan.ActionDeny}
	for i := 0; i < 1000; i++ {
		p.Rules = append(p.Rules, plan.PolicyRule{In: true, Proto: "udp", DPort: 20000 + i, Src: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
	}
	p.Rules = append(p.Rules, plan.PolicyRule{Allow: true, In: true})
	port := load(t, p)
	f := frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 17, ports(1, 2, 0)))
	for i := 0; i < 3; i++ {
		if got := run(t, port, port.ToVM, f, 1); got != verdictPass {
			t.Fatalf("run %d: %d", i, int32(got))
		}
	}
	if c := counters(t, port, testPort); c["acl[1000]"] != 1 {
		t.Errorf("the allow rule counted %d, want 1 (later packets pass as a known flow)", c["acl[1000]"])
	}
}

// A frame for another port of the same bridge that takes frames directly
// is judged by both ports' policies and handed over; anything else goes
// on to the bridge.
func TestFastPath(t *testing.T) {
	const bridge, otherBridge, peerPort = 9, 10, 1000
	progs := testPrograms(t)
	mine := plan.PortPolicy{MAC: vmMAC, GuardMAC: true, GuardRA: true, UnicastOnly: true}
	setPort(t, progs, testPort, mine, bridge)
	peer := plan.PortPolicy{MAC: peerMAC, GuardMAC: true, GuardRA: true, UnicastOnly: true, Direct: true, Default: plan.ActionDeny,
		Rules: []plan.PolicyRule{{Allow: true, In: true, Proto: "udp", DPort: 53}}}
	setPort(t, progs, peerPort, peer, bridge)
	dns := frame(peerMAC, vmMAC, 0x0800, ipv4(vmIP, peerIP, 17, ports(4000, 53, 0)))
	ssh := frame(peerMAC, vmMAC, 0x0800, ipv4(vmIP, peerIP, 6, ports(4000, 22, 0x02)))
	other := frame("02:00:00:00:00:99", vmMAC, 0x0800, ipv4(vmIP, peerIP, 17, ports(4000, 53, 0)))
	bcast := frame("ff:ff:ff:ff:ff:ff", vmMAC, 0x0806, arp(vmMAC, vmIP))
	forged := frame(peerMAC, "02:00:00:00:00:77", 0x0800, ipv4(vmIP, peerIP, 17, ports(4000, 53, 0)))
	if got := run(t, progs, progs.FromVM, dns, 1); got != verdictPass {
		t.Errorf("before the fast path is on: verdict %d, want the bridge's way", int32(got))
	}
	if err := progs.SetFastPath(true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		frame   []byte
		verdict uint32
	}{
		{"allowed by the receiver's ACL", dns, verdictRedirect},
		{"denied by the receiver's ACL", ssh, verdictShot},
		{"for a MAC no port takes directly", other, verdictPass},
		{"broadcast", bcast, verdictPass},
		{"forged", forged, verdictShot},
	} {
		if got := run(t, progs, progs.FromVM, c.frame, 1); got != c.verdict {
			t.Errorf("%s: verdict %d, want %d", c.name, int32(got), int32(c.verdict))
		}
	}
	if c := counters(t, progs, peerPort); c["acl[0]"] != 1 || c["acl-default"] != 1 {
		t.Errorf("the receiver counted %v: want its rule and its default once each", c)
	}
	if c := counters(t, progs, testPort); c["forged-mac"] != 1 {
		t.Errorf("the sender counted %v: want one forged frame", c)
	}
	// The receiver on another bridge, or taking no frames directly, or
	// gone: the bridge's way.
	setPort(t, progs, peerPort, peer, otherBridge)
	if got := run(t, progs, progs.FromVM, dns, 1); got != verdictPass {
		t.Errorf("receiver on another bridge: verdict %d", int32(got))
	}
	setPort(t, progs, peerPort, peer, bridge)
	if err := progs.Leave(peerPort); err != nil {
		t.Fatal(err)
	}
	if got := run(t, progs, progs.FromVM, dns, 1); got != verdictPass {
		t.Errorf("receiver off the fast path: verdict %d", int32(got))
	}
	setPort(t, progs, peerPort, peer, bridge)
	if err := progs.Remove(peerPort); err != nil {
		t.Fatal(err)
	}
	if got := run(t, progs, progs.FromVM, dns, 1); got != verdictPass {
		t.Errorf("receiver removed: verdict %d", int32(got))
	}
	if ports, err := progs.Ports(); err != nil || len(ports) != 1 {
		t.Errorf("ports %v, %v: want the sender's alone", ports, err)
	}
}

// A port without an ACL is handed frames on its listing alone; giving it
// an ACL, or taking it away, changes the listing with the settings, so
// the ACL judges every frame from the first.
func TestFastPathListingFollowsACL(t *testing.T) {
	const bridge, peerPort = 9, 1000
	progs := testPrograms(t)
	setPort(t, progs, testPort, plan.PortPolicy{MAC: vmMAC, GuardMAC: true, UnicastOnly: true}, bridge)
	open := plan.PortPolicy{MAC: peerMAC, GuardMAC: true, UnicastOnly: true, Direct: true}
	guarded := open
	guarded.Default = plan.ActionDeny
	guarded.Rules = []plan.PolicyRule{{Allow: true, In: true, Proto: "udp", DPort: 53}}
	if err := progs.SetFastPath(true); err != nil {
		t.Fatal(err)
	}
	ssh := frame(peerMAC, vmMAC, 0x0800, ipv4(vmIP, peerIP, 6, ports(4000, 22, 0x02)))
	for _, c := range []struct {
		name    string
		peer    plan.PortPolicy
		verdict uint32
	}{
		{"no ACL", open, verdictRedirect},
		{"ACL given", guarded, verdictShot},
		{"ACL taken away", open, verdictRedirect},
	} {
		setPort(t, progs, peerPort, c.peer, bridge)
		if got := run(t, progs, progs.FromVM, ssh, 1); got != c.verdict {
			t.Errorf("%s: verdict %d, want %d", c.name, int32(got), int32(c.verdict))
		}
		var l policyFdbPort
		if err := progs.fdb.Lookup(policyFdbKey{Bridge: bridge, Mac: mustMAC(t, peerMAC)}, &l); err != nil || l.Port != peerPort || (l.Acl == 1) != (c.peer.Default != "") {
			t.Errorf("%s: listing %+v, %v", c.name, l, err)
		}
	}
}

// On the fast path a receiver with an ACL judges a connection's first
// packet by its rules and settings; the connection's later packets, in
// either direction, pass by its flow table alone, uncounted, while a new
// connection is judged again.
func TestFastPathKnownConnection(t *testing.T) {
	const bridge, peerPort = 9, 1000
	progs := testPrograms(t)
	setPort(t, progs, testPort, plan.PortPolicy{MAC: vmMAC, GuardMAC: true, UnicastOnly: true}, bridge)
	setPort(t, progs, peerPort, plan.PortPolicy{MAC: peerMAC, GuardMAC: true, UnicastOnly: true, Direct: true, Default: plan.ActionDeny,
		Rules: []plan.PolicyRule{{Allow: true, In: true, Proto: "udp", DPort: 53}}}, bridge)
	if err := progs.SetFastPath(true); err != nil {
		t.Fatal(err)
	}
	dns := func(sport, dport uint16) []byte {
		return frame(peerMAC, vmMAC, 0x0800, ipv4(vmIP, peerIP, 17, ports(sport, dport, 0)))
	}
	for _, c := range []struct {
		name     string
		frame    []byte
		verdict  uint32
		allowed  uint64 // the allow rule's count after
		defaults uint64 // the default's
	}{
		{"a connection's first packet", dns(4000, 53), verdictRedirect, 1, 0},
		{"its later packets", dns(4000, 53), verdictRedirect, 1, 0},
		{"another connection the rules allow", dns(4001, 53), verdictRedirect, 2, 0},
		{"one they do not", dns(4000, 54), verdictShot, 2, 1},
		{"that one again", dns(4000, 54), verdictShot, 2, 2},
	} {
		if got := run(t, progs, progs.FromVM, c.frame, 1); got != c.verdict {
			t.Errorf("%s: verdict %d, want %d", c.name, int32(got), int32(c.verdict))
		}
		if n := counters(t, progs, peerPort); n["acl[0]"] != c.allowed || n["acl-default"] != c.defaults {
			t.Errorf("%s: the receiver counted %v, want acl[0] %d, acl-default %d", c.name, n, c.allowed, c.defaults)
		}
	}
}

// A changed policy keeps the port's flow table, so the connections it let
// through stay; its counters go on while its rules are the same.
func TestSetKeepsFlowsAndCounters(t *testing.T) {
	p := plan.PortPolicy{MAC: vmMAC, Default: plan.ActionDeny, Rules: []plan.PolicyRule{{Allow: true, In: true, Proto: "udp", DPort: 53}}}
	progs := load(t, p)
	in := frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 17, ports(4000, 53, 0)))
	if got := run(t, progs, progs.ToVM, in, 1); got != verdictPass {
		t.Fatalf("allowed datagram: %d", int32(got))
	}
	p.GuardRA = true // the same rules
	setPort(t, progs, testPort, p, 0)
	if c := counters(t, progs, testPort); c["acl[0]"] != 1 {
		t.Errorf("counters after a change that kept the rules: %v", c)
	}
	p.Rules[0].DPort = 54 // the connection's rule gone
	setPort(t, progs, testPort, p, 0)
	if c := counters(t, progs, testPort); c["acl[0]"] != 0 {
		t.Errorf("counters after the rules changed: %v, want new ones", c)
	}
	if got := run(t, progs, progs.ToVM, in, 1); got != verdictPass {
		t.Errorf("the connection after its rule went: %d, want it kept", int32(got))
	}
}

// Staged policies are read by no frame before their Set, which then
// writes no map of maps again; what a failed apply staged is taken back;
// rules a port leaves under Defer go at Flush.
func TestStageThenSet(t *testing.T) {
	progs := testPrograms(t)
	acl := plan.PortPolicy{MAC: vmMAC, Default: plan.ActionDeny, Rules: []plan.PolicyRule{{Allow: true, In: true, Proto: "udp", DPort: 53}}}
	c, err := Compile(acl)
	if err != nil {
		t.Fatal(err)
	}
	const other = testPort + 1
	if err := progs.Stage([]Staged{{Port: testPort, Policy: c}, {Port: other, Policy: c}}); err != nil {
		t.Fatal(err)
	}
	if ports, _ := progs.Ports(); len(ports) != 0 {
		t.Fatalf("staging set ports %v", ports)
	}
	for _, port := range []uint32{testPort, other} {
		if inner(progs.rulesOf, policyGenKey{Port: port, Gen: 1}) == nil || progs.Flows(port) == nil || inner(progs.fragsOf, port) == nil {
			t.Fatalf("port %d: rules or tables not staged", port)
		}
	}
	// Set finds what was staged and writes none of it again: the maps
	// the outer maps hold stay the ones staged.
	before := innerID(t, progs.rulesOf, policyGenKey{Port: testPort, Gen: 1})
	setPort(t, progs, testPort, acl, 0)
	if after := innerID(t, progs.rulesOf, policyGenKey{Port: testPort, Gen: 1}); after != before {
		t.Errorf("Set wrote the staged rules again: map %d, then %d", before, after)
	}
	in := frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 17, ports(4000, 53, 0)))
	if got := run(t, progs, progs.ToVM, in, 1); got != verdictPass {
		t.Errorf("allowed datagram after a staged Set: %d", int32(got))
	}
	// The other port's step never came: its staging is taken back.
	progs.Unstage()
	if inner(progs.rulesOf, policyGenKey{Port: other, Gen: 1}) != nil || progs.Flows(other) != nil || inner(progs.fragsOf, other) != nil {
		t.Error("Unstage left the unset port's rules or tables")
	}
	if progs.Flows(testPort) == nil || inner(progs.rulesOf, policyGenKey{Port: testPort, Gen: 1}) == nil {
		t.Error("Unstage took the set port's rules or tables")
	}
	// Under Defer, the rules a change leaves stay until Flush.
	progs.Defer()
	acl.Rules[0].DPort = 54
	setPort(t, progs, testPort, acl, 0)
	if inner(progs.rulesOf, policyGenKey{Port: testPort, Gen: 1}) == nil {
		t.Error("the left rules went before Flush")
	}
	progs.Flush()
	if inner(progs.rulesOf, policyGenKey{Port: testPort, Gen: 1}) != nil {
		t.Error("the left rules stayed after Flush")
	}
	if inner(progs.rulesOf, policyGenKey{Port: testPort, Gen: 2}) == nil {
		t.Error("the port's rules went")
	}
}

func innerID(t *testing.T, outer *ebpf.Map, key any) uint32 {
	t.Helper()
	var id uint32
	if err := outer.Lookup(key, &id); err != nil {
		t.Fatal(err)
	}
	return id
}

// What a command killed between Stage and Set, or between a Set under
// Defer and Flush, left in the maps of maps is what Sweep deletes: rules
// of a generation other than their port's and tables of a port without an
// ACL or without settings. What the ports' settings name stays, and the
// ports still judge frames by it.
func TestSweepDeletesWhatNoPortNames(t *testing.T) {
	progs := testPrograms(t)
	acl := plan.PortPolicy{MAC: vmMAC, Default: plan.ActionDeny, Rules: []plan.PolicyRule{{Allow: true, In: true, Proto: "udp", DPort: 53}}}
	setPort(t, progs, testPort, acl, 0)
	const plain, gone = testPort + 1, testPort + 2
	setPort(t, progs, plain, plan.PortPolicy{MAC: vmMAC}, 0)
	// The killed command: it staged a change of testPort's rules, an ACL
	// for plain and a new port, and set none of them; and it had changed
	// testPort's rules before under Defer, never flushed.
	progs.Defer()
	acl.Rules[0].DPort = 54
	setPort(t, progs, testPort, acl, 0)
	acl.Rules[0].DPort = 55
	c, err := Compile(acl)
	if err != nil {
		t.Fatal(err)
	}
	if err := progs.Stage([]Staged{{Port: testPort, Policy: c}, {Port: plain, Policy: c}, {Port: gone, Policy: c}}); err != nil {
		t.Fatal(err)
	}
	// The next command opens the programs afresh: it knows nothing of
	// what this one staged or deferred.
	next := &Programs{FromVM: progs.FromVM, ToVM: progs.ToVM, ports: progs.ports, fdb: progs.fdb, counts: progs.counts,
		rulesOf: progs.rulesOf, flowsOf: progs.flowsOf, fragsOf: progs.fragsOf, settings: progs.settings}
	if n, err := next.Unnamed(); err != nil || n != 6 {
		t.Errorf("before the sweep: %d unnamed, %v; want 6", n, err)
	}
	n, err := next.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	// testPort's generations 1 and 3, plain's rules and its tables, and
	// gone's rules and its tables.
	if n != 6 {
		t.Errorf("Sweep deleted %d entries, want 6", n)
	}
	rules, _ := keysOf[policyGenKey](progs.rulesOf)
	if want := []policyGenKey{{Port: testPort, Gen: 2}}; !slices.Equal(rules, want) {
		t.Errorf("rules left: %v, want %v", rules, want)
	}
	for _, outer := range []*ebpf.Map{progs.flowsOf, progs.fragsOf} {
		if ports, _ := keysOf[uint32](outer); !slices.Equal(ports, []uint32{testPort}) {
			t.Errorf("tables left for ports %v, want only %d's", ports, testPort)
		}
	}
	in := frame(vmMAC, peerMAC, 0x0800, ipv4(peerIP, vmIP, 17, ports(4000, 54, 0)))
	if got := run(t, progs, progs.ToVM, in, 1); got != verdictPass {
		t.Errorf("a datagram its rules allow after the sweep: %d", int32(got))
	}
	if n, err := next.Unnamed(); err != nil || n != 0 {
		t.Errorf("after the sweep: %d unnamed, %v; want none", n, err)
	}
	if n, err := next.Sweep(); err != nil || n != 0 {
		t.Errorf("a second sweep: %d, %v; want nothing to delete", n, err)
	}
}

func mustMAC(t testing.TB, s string) [6]uint8 {
	t.Helper()
	m, err := net.ParseMAC(s)
	if err != nil || len(m) != 6 {
		t.Fatalf("MAC %q: %v", s, err)
	}
	return [6]uint8(m)
}
