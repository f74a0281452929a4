package nstest

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// Echo answers UDP datagrams in a namespace until the test ends: the far
// end of a ping that needs no ping binary.
func Echo(t testing.TB, ns string) {
	t.Helper()
	var pc net.PacketConn
	if err := Do(t, ns, func() (err error) { pc, err = net.ListenPacket("udp", ":7"); return }); err != nil {
		t.Fatalf("echo in %s: %v", ns, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
}

// UDPPing sends a numbered datagram every interval for count rounds from a
// namespace to an echo at to, and returns how many came back within a
// second of the last one sent.
func UDPPing(t testing.TB, ns, to string, interval time.Duration, count int) (sent, got int) {
	t.Helper()
	var conn net.Conn
	if err := Do(t, ns, func() (err error) { conn, err = net.Dial("udp", net.JoinHostPort(to, "7")); return }); err != nil {
		t.Fatalf("ping %s from %s: %v", to, ns, err)
	}
	defer conn.Close()
	answered := CollectEchoes(conn)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	buf := make([]byte, 4)
	for i := 0; i < count; i++ {
		<-tick.C
		binary.BigEndian.PutUint32(buf, uint32(i))
		_, _ = conn.Write(buf) // a refused send counts as lost
		sent++
	}
	return sent, answered()
}

// CollectEchoes reads the echoes of numbered datagrams on conn. answered
// waits a second more for late ones and says how many distinct numbers
// came back.
func CollectEchoes(conn net.Conn) (answered func() int) {
	var mu sync.Mutex
	seen := map[uint32]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if n >= 4 {
				mu.Lock()
				seen[binary.BigEndian.Uint32(buf)] = true
				mu.Unlock()
			}
		}
	}()
	return func() int {
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		<-done
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
}

// FirstEcho sends a datagram every millisecond from a namespace to an echo
// at to while action runs and after, and returns when the first answer
// came; the test fails when none comes within limit of action's start. It
// times what brings a path back (a resume): before action nothing may
// answer.
func FirstEcho(t testing.TB, ns, to string, limit time.Duration, action func()) time.Time {
	t.Helper()
	var conn net.Conn
	if err := Do(t, ns, func() (err error) { conn, err = net.Dial("udp", net.JoinHostPort(to, "7")); return }); err != nil {
		t.Fatalf("first echo of %s from %s: %v", to, ns, err)
	}
	defer conn.Close()
	answered := make(chan time.Time, 1)
	go func() {
		buf := make([]byte, 16)
		_ = conn.SetReadDeadline(time.Now().Add(limit))
		for {
			_, err := conn.Read(buf)
			if err == nil {
				answered <- time.Now()
				return
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				close(answered)
				return
			}
			// A refused send's error (ICMP) is read here too: read on.
		}
	}()
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_, _ = conn.Write([]byte("first")) // a refused send counts as lost
			}
		}
	}()
	defer close(stop)
	action()
	at, ok := <-answered
	if !ok {
		t.Fatalf("no echo of %s from %s within %s", to, ns, limit)
	}
	return at
}

// MAC is the MAC of a namespace's eth0.
func MAC(t testing.TB, ns string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	if err := Do(t, ns, func() error {
		ifc, err := net.InterfaceByName("eth0")
		if err == nil {
			mac = ifc.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return mac
}

// Neighbour pins, in a namespace, ip's MAC on eth0 for good, so that what
// a test times is the path, not ARP: a VM whose ARP went unanswered (its
// port paused) asks again only at its next retry, a second by Linux's
// default.
func Neighbour(t testing.TB, ns, ip string, mac net.HardwareAddr) {
	t.Helper()
	h := Netlink(t, ns)
	l, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	err = h.NeighSet(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: net.ParseIP(ip), HardwareAddr: mac})
	if err != nil {
		t.Fatalf("neighbour %s in %s: %v", ip, ns, err)
	}
}
