package nstest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A FrameCounter counts, on one link inside a namespace, the frames that
// carry a tag anywhere in them, and the ARP requests for an address: a
// proof by counting that something did or did not arrive.
type FrameCounter struct {
	fd   int
	mu   sync.Mutex
	tags map[string]int
	arp  map[string]int // ARP requests received, by target address
	ns6  map[string]int // IPv6 neighbour solicitations received, by target address
	done chan struct{}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// CountFrames opens a packet socket on link in ns and counts until the
// test ends.
func CountFrames(t testing.TB, ns, link string, tags ...string) *FrameCounter {
	t.Helper()
	fc := &FrameCounter{tags: map[string]int{}, arp: map[string]int{}, ns6: map[string]int{}, done: make(chan struct{})}
	for _, tag := range tags {
		fc.tags[tag] = 0
	}
	err := Do(t, ns, func() error {
		ifi, err := net.InterfaceByName(link)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		// Room for a whole storm of frames: with the default buffer a
		// busy host's reader fell behind and the kernel dropped half.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20); err != nil {
			unix.Close(fd)
			return fmt.Errorf("packet socket buffer: %w", err)
		}
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		fc.fd = fd
		return nil
	})
	if err != nil {
		t.Fatalf("packet socket on %s in %s: %v", link, ns, err)
	}
	stop := make(chan struct{})
	go fc.run(stop)
	t.Cleanup(func() { close(stop); <-fc.done; unix.Close(fc.fd) })
	return fc
}

func (fc *FrameCounter) run(stop chan struct{}) {
	defer close(fc.done)
	buf := make([]byte, 65536)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, from, err := unix.Recvfrom(fc.fd, buf, 0)
		if err != nil || n < 14 {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue // the namespace's own sends
		}
		frame := buf[:n]
		fc.mu.Lock()
		for tag := range fc.tags {
			if bytes.Contains(frame, []byte(tag)) {
				fc.tags[tag]++
			}
		}
		if binary.BigEndian.Uint16(frame[12:14]) == unix.ETH_P_ARP && n >= 42 && binary.BigEndian.Uint16(frame[20:22]) == 1 {
			fc.arp[net.IP(frame[38:42]).String()]++
		}
		// IPv6 (untagged), next header ICMPv6, type 135: a solicitation.
		if binary.BigEndian.Uint16(frame[12:14]) == unix.ETH_P_IPV6 && n >= 78 && frame[20] == unix.IPPROTO_ICMPV6 && frame[54] == 135 {
			fc.ns6[net.IP(frame[62:78]).String()]++
		}
		fc.mu.Unlock()
	}
}

// Tagged is how many frames carrying the tag arrived.
func (fc *FrameCounter) Tagged(tag string) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.tags[tag]
}

// SolicitationsFor is how many IPv6 neighbour solicitations for ip arrived.
func (fc *FrameCounter) SolicitationsFor(ip string) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.ns6[ip]
}

// ARPFor is how many ARP requests for ip arrived.
func (fc *FrameCounter) ARPFor(ip string) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.arp[ip]
}

// SendFrames sends raw Ethernet frames on link inside ns, count times each.
func SendFrames(t testing.TB, ns, link string, count int, frames ...[]byte) {
	t.Helper()
	err := Do(t, ns, func() error {
		ifi, err := net.InterfaceByName(link)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
		for i := 0; i < count; i++ {
			for _, f := range frames {
				if err := unix.Sendto(fd, f, 0, to); err != nil && err != unix.ENOBUFS {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send frames on %s in %s: %v", link, ns, err)
	}
}

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// EthFrame is an Ethernet frame: dst, src, type, payload.
func EthFrame(dst, src string, etherType uint16, payload []byte) []byte {
	f := append(append([]byte{}, mustMAC(dst)...), mustMAC(src)...)
	f = binary.BigEndian.AppendUint16(f, etherType)
	return append(f, payload...)
}

// IPv4UDP is an IPv4 packet carrying a UDP datagram (checksums: the IP
// header's computed, UDP's zero, which IPv4 allows).
func IPv4UDP(src, dst string, sport, dport uint16, payload []byte) []byte {
	udp := binary.BigEndian.AppendUint16(nil, sport)
	udp = binary.BigEndian.AppendUint16(udp, dport)
	udp = binary.BigEndian.AppendUint16(udp, uint16(8+len(payload)))
	udp = append(udp, 0, 0)
	udp = append(udp, payload...)
	h := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, unix.IPPROTO_UDP, 0, 0}
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(udp)))
	h = append(h, net.ParseIP(src).To4()...)
	h = append(h, net.ParseIP(dst).To4()...)
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(h[10:], ^uint16(sum))
	return append(h, udp...)
}

// VXLANHeader is a VXLAN header for a VNI.
func VXLANHeader(vni int) []byte {
	return []byte{0x08, 0, 0, 0, byte(vni >> 16), byte(vni >> 8), byte(vni), 0}
}

// ARPRequest is an ARP request from (mac, ip) for target.
func ARPRequest(mac, ip, target string) []byte {
	p := []byte{0, 1, 8, 0, 6, 4, 0, 1}
	p = append(p, mustMAC(mac)...)
	p = append(p, net.ParseIP(ip).To4()...)
	p = append(p, make([]byte, 6)...)
	p = append(p, net.ParseIP(target).To4()...)
	return EthFrame("ff:ff:ff:ff:ff:ff", mac, unix.ETH_P_ARP, p)
}

// LinkStats reads a link's counters inside a namespace (through netlink:
// /sys shows the namespace it was mounted in, not the thread's).
func LinkStats(t testing.TB, ns, link string) netlink.LinkStatistics {
	t.Helper()
	var st netlink.LinkStatistics
	err := Do(t, ns, func() error {
		l, err := netlink.LinkByName(link)
		if err != nil {
			return err
		}
		if l.Attrs().Statistics != nil {
			st = netlink.LinkStatistics(*l.Attrs().Statistics)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("counters of %s in %s: %v", link, ns, err)
	}
	return st
}
