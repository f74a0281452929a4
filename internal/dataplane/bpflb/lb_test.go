package bpflb

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/vnet-project/vnet/internal/plan"
)

// tc's verdicts as the programs return them.
const (
	verdictPass     = 0xffffffff // TC_ACT_UNSPEC: on to the next filter
	verdictShot     = 2
	verdictRedirect = 7
)

var (
	clientMAC = mustMAC("02:00:00:00:00:21")
	vipMAC    = "02:00:00:00:01:00"
	client    = netip.MustParseAddr("10.1.0.21")
	client6   = netip.MustParseAddr("fd00:1::21")
	vip       = netip.MustParseAddr("10.1.0.100")
	vip6      = netip.MustParseAddr("fd00:1::100")
)

func mustMAC(s string) net.HardwareAddr {
	hw, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return hw
}

func testBalancers(source bool) plan.PortBalancers {
	b := plan.Balancer{Name: "web", VIPs: []netip.Addr{vip, vip6}, MAC: vipMAC, Source: source, Affinity: time.Minute,
		Listeners: []plan.LBListener{{Proto: "tcp", Port: 80, BackendPort: 8080}, {Proto: "udp", Port: 53, BackendPort: 53}}}
	for i := 1; i <= 3; i++ {
		b.Backends = append(b.Backends, plan.LBBackend{
			IP:  netip.AddrFrom4([4]byte{10, 1, 0, byte(10 + i)}),
			IP6: netip.MustParseAddr("fd00:1::" + string(rune('0'+i))),
			MAC: "02:00:00:00:00:1" + string(rune('0'+i)),
		})
	}
	return plan.PortBalancers{b}
}

func load(t *testing.T, pb plan.PortBalancers) *Programs {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: loading BPF programs needs root")
	}
	p, err := Load(pb, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func run(t *testing.T, prog *ebpf.Program, frame []byte) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(frame)+256)
	ret, err := prog.Run(&ebpf.RunOptions{Data: frame, DataOut: out})
	if err != nil {
		t.Fatal(err)
	}
	// The kernel pads a test frame's output to its buffer: cut at the IP length.
	return ret, out
}

var csum = Checksum

// frame makes an Ethernet frame of a TCP SYN (or with ack, an ACK) or a
// UDP datagram from src:sport to dst:dport, with valid checksums.
func frame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, proto uint8, sport, dport uint16, ack bool) []byte {
	var l4 []byte
	if proto == 6 {
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
		l4[12] = 5 << 4
		l4[13] = 0x02
		if ack {
			l4[13] = 0x10
		}
		binary.BigEndian.PutUint16(l4[14:], 65535)
	} else {
		l4 = make([]byte, 12)
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
		copy(l4[8:], "ping")
	}
	eth := append(append(append([]byte{}, dstMAC...), srcMAC...), 0, 0)
	var ip, pseudo []byte
	if src.Is4() {
		binary.BigEndian.PutUint16(eth[12:], 0x0800)
		ip = make([]byte, 20)
		ip[0], ip[8], ip[9] = 0x45, 64, proto
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
		s, d := src.As4(), dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], csum(ip))
		pseudo = append(append(append([]byte{}, s[:]...), d[:]...), 0, proto, byte(len(l4)>>8), byte(len(l4)))
	} else {
		binary.BigEndian.PutUint16(eth[12:], 0x86dd)
		ip = make([]byte, 40)
		ip[0], ip[6], ip[7] = 0x60, proto, 64
		binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
		s, d := src.As16(), dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		pseudo = append(append(append([]byte{}, s[:]...), d[:]...), 0, 0, byte(len(l4)>>8), byte(len(l4)), 0, 0, 0, proto)
	}
	off := 16
	if proto == 17 {
		off = 6
	}
	binary.BigEndian.PutUint16(l4[off:], csum(pseudo, l4))
	return append(append(eth, ip...), l4...)
}

// parsed is what a test reads back of a frame the programs let through.
type parsed struct {
	dstMAC, srcMAC     net.HardwareAddr
	src, dst           netip.Addr
	sport, dport       uint16
	ipOK, l4OK         bool
	proto              uint8
	l4Len, l3, l4Start int
}

func parse(f []byte) parsed {
	p := parsed{dstMAC: net.HardwareAddr(f[0:6]), srcMAC: net.HardwareAddr(f[6:12])}
	var pseudo []byte
	if binary.BigEndian.Uint16(f[12:]) == 0x0800 {
		ip := f[14:34]
		p.proto = ip[9]
		p.src, p.dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		p.ipOK = csum(ip) == 0
		p.l4Len = int(binary.BigEndian.Uint16(ip[2:])) - 20
		p.l4Start = 34
		pseudo = append(append([]byte{}, ip[12:20]...), 0, p.proto, byte(p.l4Len>>8), byte(p.l4Len))
	} else {
		ip := f[14:54]
		p.proto = ip[6]
		p.src, p.dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		p.ipOK = true
		p.l4Len = int(binary.BigEndian.Uint16(ip[4:]))
		p.l4Start = 54
		pseudo = append(append([]byte{}, ip[8:40]...), 0, 0, byte(p.l4Len>>8), byte(p.l4Len), 0, 0, 0, p.proto)
	}
	l4 := f[p.l4Start : p.l4Start+p.l4Len]
	p.sport, p.dport = binary.BigEndian.Uint16(l4[0:]), binary.BigEndian.Uint16(l4[2:])
	p.l4OK = csum(pseudo, l4) == 0
	return p
}

// A connection to a VIP's listener goes to a backend's address, port and
// MAC, with valid checksums, IPv4 and IPv6, TCP and UDP; its later packets
// to the same backend; the backend's reply comes back from the VIP.
func TestTranslation(t *testing.T) {
	p := load(t, testBalancers(false))
	backendMACs := map[string]bool{"02:00:00:00:00:11": true, "02:00:00:00:00:12": true, "02:00:00:00:00:13": true}
	for _, c := range []struct {
		name       string
		src, dst   netip.Addr
		proto      uint8
		port, back uint16
	}{{"tcp4", client, vip, 6, 80, 8080}, {"udp4", client, vip, 17, 53, 53}, {"tcp6", client6, vip6, 6, 80, 8080}, {"udp6", client6, vip6, 17, 53, 53}} {
		t.Run(c.name, func(t *testing.T) {
			syn := frame(mustMAC(vipMAC), clientMAC, c.src, c.dst, c.proto, 40000, c.port, false)
			ret, out := run(t, p.FromVM, syn)
			if ret != verdictPass {
				t.Fatalf("verdict %d", ret)
			}
			got := parse(out)
			if !got.ipOK || !got.l4OK {
				t.Errorf("checksums: ip %v, l4 %v", got.ipOK, got.l4OK)
			}
			if got.dport != c.back || got.sport != 40000 || got.src != c.src || !backendMACs[got.dstMAC.String()] {
				t.Errorf("translated to %s:%d (%s) from %s:%d", got.dst, got.dport, got.dstMAC, got.src, got.sport)
			}
			backend := got.dst
			// Later packets of the connection: the same backend.
			for range 3 {
				_, out := run(t, p.FromVM, frame(mustMAC(vipMAC), clientMAC, c.src, c.dst, c.proto, 40000, c.port, true))
				if b := parse(out).dst; b != backend {
					t.Errorf("the connection moved from %s to %s", backend, b)
				}
			}
			reply := frame(clientMAC, mustMAC("02:00:00:00:00:11"), backend, c.src, c.proto, c.back, 40000, true)
			ret, out = run(t, p.ToVM, reply)
			got = parse(out)
			if ret != verdictPass || got.src != c.dst || got.sport != c.port || got.srcMAC.String() != vipMAC || !got.ipOK || !got.l4OK {
				t.Errorf("reply: verdict %d from %s:%d (%s), checksums %v %v", ret, got.src, got.sport, got.srcMAC, got.ipOK, got.l4OK)
			}
			// A packet of another connection from the backend is no reply.
			_, out = run(t, p.ToVM, frame(clientMAC, mustMAC("02:00:00:00:00:11"), backend, c.src, c.proto, c.back, 40001, true))
			if got := parse(out); got.src != backend {
				t.Errorf("a packet of no translated connection came from %s", got.src)
			}
			// A TCP connection straight to the backend from the same port
			// (a client reusing its ports): its replies stay the backend's.
			if c.proto == 6 {
				run(t, p.FromVM, frame(mustMAC("02:00:00:00:00:11"), clientMAC, c.src, backend, 6, 40000, c.back, false))
				_, out = run(t, p.ToVM, reply)
				if got := parse(out); got.src != backend {
					t.Errorf("a direct connection's reply came from %s", got.src)
				}
			}
		})
	}
	counts, err := p.Conns()
	if err != nil || len(counts) == 0 {
		t.Errorf("conns %v %v", counts, err)
	}
}

// Connections spread over the backends; a backend down gets none, and one
// already made with it keeps it; with source affinity a client keeps one
// backend.
func TestSpreadHealthAffinity(t *testing.T) {
	pb := testBalancers(false)
	p := load(t, pb)
	spread := func(prog *Programs, n int, sport0 uint16) map[netip.Addr]int {
		out := map[netip.Addr]int{}
		for i := range n {
			_, f := run(t, prog.FromVM, frame(mustMAC(vipMAC), clientMAC, client, vip, 6, sport0+uint16(i), 80, false))
			out[parse(f).dst]++
		}
		return out
	}
	got := spread(p, 300, 10000)
	for _, n := range got {
		if n < 60 || n > 140 {
			t.Errorf("300 connections: %v", got)
			break
		}
	}
	// An established connection to backend 2, then backend 2 goes down.
	var sport uint16
	b2 := netip.MustParseAddr("10.1.0.12")
	for s := uint16(20000); ; s++ {
		_, f := run(t, p.FromVM, frame(mustMAC(vipMAC), clientMAC, client, vip, 6, s, 80, false))
		if parse(f).dst == b2 {
			sport = s
			break
		}
	}
	pb[0].Backends[1].Down = true
	if err := p.SetHealth(pb); err != nil {
		t.Fatal(err)
	}
	if down, err := p.Down(); err != nil || down != pb.DownText() {
		t.Errorf("down %q %v, want %q", down, err, pb.DownText())
	}
	if got := spread(p, 300, 30000); got[b2] != 0 || len(got) != 2 {
		t.Errorf("with 10.1.0.12 down: %v", got)
	}
	_, f := run(t, p.FromVM, frame(mustMAC(vipMAC), clientMAC, client, vip, 6, sport, 80, true))
	if parse(f).dst != b2 {
		t.Errorf("the established connection moved to %s", parse(f).dst)
	}
	// New programs for a changed text keep the connections of the old.
	pb[0].Backends[1].Down = false
	pb[0].Listeners = append(pb[0].Listeners, plan.LBListener{Proto: "tcp", Port: 443, BackendPort: 8443})
	next, err := Load(pb, p)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	_, f = run(t, next.FromVM, frame(mustMAC(vipMAC), clientMAC, client, vip, 6, sport, 80, true))
	if parse(f).dst != b2 {
		t.Errorf("after a reload the connection moved to %s", parse(f).dst)
	}
	// Every backend down: a new connection is dropped.
	for i := range pb[0].Backends {
		pb[0].Backends[i].Down = true
	}
	if err := next.SetHealth(pb); err != nil {
		t.Fatal(err)
	}
	if ret, _ := run(t, next.FromVM, frame(mustMAC(vipMAC), clientMAC, client, vip, 6, 50000, 80, false)); ret != verdictShot {
		t.Errorf("no backend up: verdict %d", ret)
	}
	// Source affinity: one client, one backend, whatever its ports.
	sp := load(t, testBalancers(true))
	if got := spread(sp, 50, 10000); len(got) != 1 {
		t.Errorf("source affinity: %v", got)
	}
}

// ARP requests and neighbour solicitations for a VIP are answered on the
// port; other traffic to a VIP is dropped; traffic to others passes.
func TestAnswersAndDrops(t *testing.T) {
	p := load(t, testBalancers(false))
	arp := make([]byte, 42)
	copy(arp, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(arp[6:], clientMAC)
	copy(arp[12:], []byte{0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1})
	copy(arp[22:], clientMAC)
	c4, v4 := client.As4(), vip.As4()
	copy(arp[28:], c4[:])
	copy(arp[38:], v4[:])
	ret, out := run(t, p.FromVM, arp)
	if ret != verdictRedirect || binary.BigEndian.Uint16(out[20:]) != 2 || net.HardwareAddr(out[22:28]).String() != vipMAC ||
		!bytes.Equal(out[28:32], v4[:]) || !bytes.Equal(out[0:6], clientMAC) || !bytes.Equal(out[38:42], c4[:]) {
		t.Errorf("ARP: verdict %d, reply % x", ret, out[:42])
	}
	other := append([]byte{}, arp...)
	other[41]++
	if ret, _ := run(t, p.FromVM, other); ret != verdictPass {
		t.Errorf("ARP for another address: verdict %d", ret)
	}
	// A neighbour solicitation with the source link-layer address option.
	ns := make([]byte, 14+40+32)
	copy(ns, []byte{0x33, 0x33, 0xff, 0, 1, 0})
	copy(ns[6:], clientMAC)
	ns[12], ns[13] = 0x86, 0xdd
	ip := ns[14:54]
	ip[0], ip[6], ip[7] = 0x60, 58, 255
	binary.BigEndian.PutUint16(ip[4:], 32)
	c6, v6 := client6.As16(), vip6.As16()
	copy(ip[8:], c6[:])
	copy(ip[24:], []byte{0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 1, 0})
	icmp := ns[54:]
	icmp[0] = 135
	copy(icmp[8:], v6[:])
	icmp[24], icmp[25] = 1, 1
	copy(icmp[26:], clientMAC)
	ret, out = run(t, p.FromVM, ns)
	na := out[:86]
	pseudo := append(append([]byte{}, na[22:54]...), 0, 0, 0, 32, 0, 0, 0, 58)
	if ret != verdictRedirect || na[54] != 136 || !bytes.Equal(na[22:38], v6[:]) || !bytes.Equal(na[38:54], c6[:]) ||
		net.HardwareAddr(na[80:86]).String() != vipMAC || csum(pseudo, na[54:86]) != 0 || !bytes.Equal(na[0:6], clientMAC) {
		t.Errorf("ND: verdict %d, reply % x", ret, na)
	}
	// Traffic to the VIP on no listener is dropped; to others it passes.
	if ret, _ := run(t, p.FromVM, frame(mustMAC(vipMAC), clientMAC, client, vip, 6, 40000, 22, false)); ret != verdictShot {
		t.Errorf("to a VIP's other port: verdict %d", ret)
	}
	f := frame(mustMAC("02:00:00:00:00:12"), clientMAC, client, netip.MustParseAddr("10.1.0.12"), 6, 40000, 80, false)
	if ret, out := run(t, p.FromVM, f); ret != verdictPass || !bytes.Equal(out[:len(f)], f) {
		t.Errorf("to a backend directly: verdict %d, changed", ret)
	}
}

// A client that is itself a backend is never sent to itself.
func TestNoHairpin(t *testing.T) {
	p := load(t, testBalancers(false))
	self := netip.MustParseAddr("10.1.0.11")
	for s := range uint16(200) {
		_, out := run(t, p.FromVM, frame(mustMAC(vipMAC), mustMAC("02:00:00:00:00:11"), self, vip, 6, 30000+s, 80, false))
		if parse(out).dst == self {
			t.Fatalf("port %d: sent to itself", 30000+s)
		}
	}
}

// What a port's maps hold in kernel memory (memlock, as /proc reports
// each map's), for docs/loadbalancers.md.
func TestMapMemory(t *testing.T) {
	p := load(t, testBalancers(true))
	var total int
	for name, m := range p.maps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", m.FD()))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "memlock:"); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				total += n
				t.Logf("%s: %d bytes", name, n)
			}
		}
	}
	t.Logf("a port's maps: %d KiB", total/1024)
	if total == 0 || total > 4<<20 {
		t.Errorf("a port's maps hold %d bytes", total)
	}
}
