package nstest

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"
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
