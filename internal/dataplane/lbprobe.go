package dataplane

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/bpflb"
	"github.com/vnet-project/vnet/internal/plan"
)

// Health probes are frames written straight into a backend's vNIC from its
// switch port, and its answer read there, from a VIP of its load balancer:
// the backend answers the VIP as it answers a client, through its own
// port, where its load balancer's program answers ARP and neighbour
// discovery for the VIP and drops the answer once read. So a probe needs
// no address on the network, reaches a QEMU guest's TAP as well as a VM's
// namespace, and crosses nothing but the vNIC.

// ErrBackendDown is what every probe failure is (errors.Is), whatever its
// text says.
var ErrBackendDown = errors.New("backend down")

// probeFailure is why a probe found a backend unhealthy, as status shows
// it beside the word down.
type probeFailure string

func (p probeFailure) Error() string        { return string(p) }
func (p probeFailure) Is(target error) bool { return target == ErrBackendDown }

func failed(format string, args ...any) error { return probeFailure(fmt.Sprintf(format, args...)) }

// ProbeBackend sends one probe and waits for the answer, at most the
// probe's timeout: nil when the backend is healthy. A TCP probe is a SYN,
// healthy when a SYN-ACK answers (the half-open connection is reset at
// once), down on a reset, an ICMP unreachable or no answer. A UDP probe is
// a datagram, down only on an ICMP port unreachable: a UDP server need not
// answer.
func (l *Linux) ProbeBackend(p plan.BackendProbe) error {
	if p.Port == "" {
		return failed("its vNIC is disconnected")
	}
	_, link, err := l.linkIn(p.NS, p.Port)
	if err != nil {
		return err
	}
	var fd int
	err = inNS(p.NS, func() (err error) {
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		return err
	})
	if err != nil {
		return fmt.Errorf("probe %s: packet socket in %s: %w", p.Dst, p.NS, err)
	}
	defer unix.Close(fd)
	ifindex := link.Attrs().Index
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		return fmt.Errorf("probe %s: bind to %s: %w", p.Dst, p.Port, err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1) // our own frame is skipped by its MAC anyway
	pr, err := newProbeFrame(p)
	if err != nil {
		return err
	}
	if err := unix.Sendto(fd, pr.frame, 0, &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: htons(pr.etherType)}); err != nil {
		return fmt.Errorf("probe %s: send on %s: %w", p.Dst, p.Port, err)
	}
	deadline := time.Now().Add(p.Timeout)
	buf := make([]byte, 2048)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			if p.Proto == "udp" {
				return nil // no port unreachable
			}
			return failed("no answer to a TCP SYN to port %d within %s", p.DstPort, p.Timeout)
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("probe %s: read on %s: %w", p.Dst, p.Port, err)
		}
		done, verdict := pr.judge(buf[:n])
		if !done {
			continue
		}
		if verdict == nil && p.Proto == "tcp" {
			// Reset the half-open connection, so the backend forgets it.
			_ = unix.Sendto(fd, pr.reset, 0, &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: htons(pr.etherType)})
		}
		return verdict
	}
}

// probeFrame is a probe as sent, and what it takes to know its answer.
type probeFrame struct {
	p         plan.BackendProbe
	frame     []byte
	reset     []byte // a TCP probe's reset, sent after the SYN-ACK
	etherType uint16
	sport     uint16
	seq       uint32
	src, dst  netip.Addr
}

func newProbeFrame(p plan.BackendProbe) (*probeFrame, error) {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	pr := &probeFrame{p: p, src: p.Src, dst: p.Dst, seq: binary.BigEndian.Uint32(rnd[:4])}
	// An ephemeral port that is no listener's.
	pr.sport = 32768 + binary.BigEndian.Uint16(rnd[4:])%28000
	for slices.Contains(p.Avoid, int(pr.sport)) {
		pr.sport++
	}
	var err error
	if p.Proto == "udp" {
		pr.frame, err = pr.build(udpSegment(pr.sport, uint16(p.DstPort), []byte("vnet health check")), unix.IPPROTO_UDP)
		return pr, err
	}
	if pr.frame, err = pr.build(tcpSegment(pr.sport, uint16(p.DstPort), pr.seq, 0, tcpSYN), unix.IPPROTO_TCP); err != nil {
		return nil, err
	}
	pr.reset, err = pr.build(tcpSegment(pr.sport, uint16(p.DstPort), pr.seq+1, 0, tcpRST), unix.IPPROTO_TCP)
	return pr, err
}

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

func tcpSegment(sport, dport uint16, seq, ack uint32, flags byte) []byte {
	t := make([]byte, 20)
	binary.BigEndian.PutUint16(t[0:], sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	binary.BigEndian.PutUint32(t[4:], seq)
	binary.BigEndian.PutUint32(t[8:], ack)
	t[12], t[13] = 5<<4, flags
	binary.BigEndian.PutUint16(t[14:], 64240)
	return t
}

func udpSegment(sport, dport uint16, payload []byte) []byte {
	u := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	copy(u[8:], payload)
	return u
}

// build puts a TCP or UDP segment in an IP packet and an Ethernet frame
// from the VIP to the backend, with its checksums.
func (pr *probeFrame) build(l4 []byte, proto byte) ([]byte, error) {
	srcMAC, err1 := net.ParseMAC(pr.p.SrcMAC)
	dstMAC, err2 := net.ParseMAC(pr.p.DstMAC)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("probe %s: bad MAC", pr.dst)
	}
	frame := append(append(append([]byte{}, dstMAC...), srcMAC...), 0, 0)
	var pseudo []byte
	csumAt := 16
	if proto == unix.IPPROTO_UDP {
		csumAt = 6
	}
	if pr.src.Is4() {
		pr.etherType = unix.ETH_P_IP
		ip := make([]byte, 20)
		ip[0], ip[6], ip[8], ip[9] = 0x45, 0x40, 64, proto // don't fragment
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
		s, d := pr.src.As4(), pr.dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], bpflb.Checksum(ip))
		pseudo = append(append(append([]byte{}, s[:]...), d[:]...), 0, proto, byte(len(l4)>>8), byte(len(l4)))
		frame = append(frame, ip...)
	} else {
		pr.etherType = unix.ETH_P_IPV6
		ip := make([]byte, 40)
		ip[0], ip[6], ip[7] = 0x60, proto, 64
		binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
		s, d := pr.src.As16(), pr.dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		pseudo = append(append(append([]byte{}, s[:]...), d[:]...), 0, 0, byte(len(l4)>>8), byte(len(l4)), 0, 0, 0, proto)
		frame = append(frame, ip...)
	}
	binary.BigEndian.PutUint16(frame[12:], pr.etherType)
	sum := bpflb.Checksum(pseudo, l4)
	if sum == 0 && proto == unix.IPPROTO_UDP {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(l4[csumAt:], sum)
	return append(frame, l4...), nil
}

// judge reads a frame the backend's port received: done when it answers
// the probe, with nil for healthy.
func (pr *probeFrame) judge(f []byte) (done bool, verdict error) {
	if len(f) < 14 {
		return false, nil
	}
	var proto byte
	var src, dst netip.Addr
	var l4 []byte
	switch binary.BigEndian.Uint16(f[12:]) {
	case unix.ETH_P_IP:
		if len(f) < 34 || f[14]>>4 != 4 {
			return false, nil
		}
		ihl := int(f[14]&0xf) * 4
		if len(f) < 14+ihl {
			return false, nil
		}
		proto = f[23]
		src, dst = netip.AddrFrom4([4]byte(f[26:30])), netip.AddrFrom4([4]byte(f[30:34]))
		l4 = f[14+ihl:]
	case unix.ETH_P_IPV6:
		if len(f) < 54 {
			return false, nil
		}
		proto = f[20]
		src, dst = netip.AddrFrom16([16]byte(f[22:38])), netip.AddrFrom16([16]byte(f[38:54]))
		l4 = f[54:]
	default:
		return false, nil
	}
	if dst != pr.src {
		return false, nil
	}
	switch {
	case proto == unix.IPPROTO_ICMP && len(l4) >= 8 && l4[0] == 3,
		proto == unix.IPPROTO_ICMPV6 && len(l4) >= 8 && l4[0] == 1:
		if !pr.quotes(l4[8:]) {
			return false, nil
		}
		return true, failed("%s answered port %d with an ICMP unreachable (type %d code %d)", src, pr.p.DstPort, l4[0], l4[1])
	case src != pr.dst || len(l4) < 4 || binary.BigEndian.Uint16(l4[0:]) != uint16(pr.p.DstPort) || binary.BigEndian.Uint16(l4[2:]) != pr.sport:
		return false, nil
	case proto == unix.IPPROTO_UDP && pr.p.Proto == "udp":
		return true, nil
	case proto == unix.IPPROTO_TCP && pr.p.Proto == "tcp" && len(l4) >= 14:
		flags := l4[13]
		switch {
		case flags&tcpRST != 0:
			return true, failed("connection refused on port %d", pr.p.DstPort)
		case flags&(tcpSYN|tcpACK) == tcpSYN|tcpACK && binary.BigEndian.Uint32(l4[8:]) == pr.seq+1:
			return true, nil
		}
	}
	return false, nil
}

// quotes reports whether an ICMP error's quoted packet is the probe: from
// its source port to the backend's port.
func (pr *probeFrame) quotes(inner []byte) bool {
	var l4 []byte
	switch {
	case pr.src.Is4() && len(inner) >= 20 && inner[0]>>4 == 4:
		ihl := int(inner[0]&0xf) * 4
		if len(inner) < ihl+4 {
			return false
		}
		l4 = inner[ihl:]
	case pr.src.Is6() && len(inner) >= 44 && inner[0]>>4 == 6:
		l4 = inner[40:]
	default:
		return false
	}
	return binary.BigEndian.Uint16(l4[0:]) == pr.sport && binary.BigEndian.Uint16(l4[2:]) == uint16(pr.p.DstPort)
}
