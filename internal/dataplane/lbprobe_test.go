package dataplane

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/bpflb"
	"github.com/vnet-project/vnet/internal/plan"
)

// A probe's frame is a valid SYN (or datagram) from the VIP to the
// backend, and judge tells its answers apart: a SYN-ACK for it is healthy,
// a reset or an ICMP unreachable quoting it is down, anything else is no
// answer yet.
func TestProbeFrames(t *testing.T) {
	for _, fam := range []struct{ vip, backend string }{{"10.1.0.100", "10.1.0.12"}, {"fd00:1::100", "fd00:1::12"}} {
		p := plan.BackendProbe{Proto: "tcp", Src: netip.MustParseAddr(fam.vip), Dst: netip.MustParseAddr(fam.backend),
			SrcMAC: "02:00:00:00:01:00", DstMAC: "02:00:00:00:00:12", DstPort: 8080, Avoid: []int{80}, Timeout: time.Second}
		pr, err := newProbeFrame(p)
		if err != nil {
			t.Fatal(err)
		}
		ipLen := 20
		if p.Src.Is6() {
			ipLen = 40
		}
		l4 := pr.frame[14+ipLen:]
		if l4[13] != tcpSYN || binary.BigEndian.Uint16(l4[2:]) != 8080 || pr.sport < 32768 || pr.sport == 80 {
			t.Errorf("%s: probe % x", fam.vip, pr.frame)
		}
		if p.Src.Is4() && bpflb.Checksum(pr.frame[14:34]) != 0 {
			t.Errorf("%s: IPv4 checksum", fam.vip)
		}
		answer := func(flags byte, ack uint32) []byte {
			back := &probeFrame{p: plan.BackendProbe{SrcMAC: p.DstMAC, DstMAC: p.SrcMAC}, src: p.Dst, dst: p.Src}
			f, err := back.build(tcpSegment(8080, pr.sport, 7, ack, flags), unix.IPPROTO_TCP)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		for _, c := range []struct {
			name    string
			frame   []byte
			done    bool
			healthy bool
		}{
			{"syn-ack", answer(tcpSYN|tcpACK, pr.seq+1), true, true},
			{"syn-ack of another probe", answer(tcpSYN|tcpACK, pr.seq+2), false, false},
			{"reset", answer(tcpRST|tcpACK, pr.seq+1), true, false},
			{"our own frame", pr.frame, false, false},
		} {
			done, verdict := pr.judge(c.frame)
			if done != c.done || done && (verdict == nil) != c.healthy || verdict != nil && !errors.Is(verdict, ErrBackendDown) {
				t.Errorf("%s %s: done %v, verdict %v", fam.vip, c.name, done, verdict)
			}
		}
	}
	// An ICMP port unreachable quoting a UDP probe: down, saying why.
	p := plan.BackendProbe{Proto: "udp", Src: netip.MustParseAddr("10.1.0.100"), Dst: netip.MustParseAddr("10.1.0.12"),
		SrcMAC: "02:00:00:00:01:00", DstMAC: "02:00:00:00:00:12", DstPort: 53, Timeout: time.Second}
	pr, err := newProbeFrame(p)
	if err != nil {
		t.Fatal(err)
	}
	icmp := append([]byte{3, 3, 0, 0, 0, 0, 0, 0}, pr.frame[14:]...)
	back := &probeFrame{p: plan.BackendProbe{SrcMAC: p.DstMAC, DstMAC: p.SrcMAC}, src: p.Dst, dst: p.Src}
	f, err := back.build(icmp, unix.IPPROTO_ICMP)
	if err != nil {
		t.Fatal(err)
	}
	if done, verdict := pr.judge(f); !done || !errors.Is(verdict, ErrBackendDown) {
		t.Errorf("port unreachable: done %v, verdict %v", done, verdict)
	}
}
