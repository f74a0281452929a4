package clustertest

import (
	"encoding/binary"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// inNS runs fn on a thread inside the namespace and brings the thread
// back. A thread left there (as a goroutine that ends while locked leaves
// it) can be the test's main thread, which the runtime parks instead of
// ending; the process then counts as one inside the namespace, and an
// agent that removes the namespace kills whatever runs in it.
func inNS(ns string, fn func() error) error {
	target, err := netns.GetFromName(ns)
	if err != nil {
		return err
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return // the thread stays locked and ends with the goroutine
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- err
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// echo answers UDP datagrams in a namespace until the test ends: the far
// end of a ping that needs no ping binary.
func echo(t *testing.T, ns string) {
	t.Helper()
	var pc net.PacketConn
	if err := inNS(ns, func() (err error) { pc, err = net.ListenPacket("udp", ":7"); return }); err != nil {
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
	if err := inNS(ns, func() (err error) { conn, err = net.Dial("udp", net.JoinHostPort(to, "7")); return }); err != nil {
		t.Fatalf("ping %s from %s: %v", to, ns, err)
	}
	defer conn.Close()
	answered := collectEchoes(conn)
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

// collectEchoes reads the echoes of numbered datagrams on conn. answered
// waits a second more for late ones and says how many distinct numbers
// came back.
func collectEchoes(conn net.Conn) (answered func() int) {
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
