package clustertest

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
)

// echo answers UDP datagrams in a namespace until the test ends: the far
// end of a ping that needs no ping binary.
func echo(t *testing.T, ns string) {
	t.Helper()
	var pc net.PacketConn
	if err := nstest.Do(t, ns, func() (err error) { pc, err = net.ListenPacket("udp", ":7"); return }); err != nil {
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

// udpPing sends a numbered datagram every interval for count rounds from a
// namespace to an echo at to, and returns how many came back within a
// second of the last one sent.
func udpPing(t *testing.T, ns, to string, interval time.Duration, count int) (sent, got int) {
	t.Helper()
	var conn net.Conn
	if err := nstest.Do(t, ns, func() (err error) { conn, err = net.Dial("udp", net.JoinHostPort(to, "7")); return }); err != nil {
		t.Fatalf("ping %s from %s: %v", to, ns, err)
	}
	defer conn.Close()
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
	tick := time.NewTicker(interval)
	defer tick.Stop()
	buf := make([]byte, 4)
	for i := 0; i < count; i++ {
		<-tick.C
		binary.BigEndian.PutUint32(buf, uint32(i))
		_, _ = conn.Write(buf) // a refused send counts as lost
		sent++
	}
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	<-done
	mu.Lock()
	defer mu.Unlock()
	return sent, len(seen)
}
