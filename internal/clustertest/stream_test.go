package clustertest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// pinger sends a numbered datagram every interval from a namespace to an
// echo (see echo) until stopped.
type pinger struct {
	stop chan struct{}
	done chan [2]int
}

func startPinger(t *testing.T, ns, to string, interval time.Duration) *pinger {
	t.Helper()
	var conn net.Conn
	if err := inNS(ns, func() (err error) { conn, err = net.Dial("udp", net.JoinHostPort(to, "7")); return }); err != nil {
		t.Fatalf("ping %s from %s: %v", to, ns, err)
	}
	p := &pinger{stop: make(chan struct{}), done: make(chan [2]int, 1)}
	answered := collectEchoes(conn)
	go func() {
		defer conn.Close()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		buf := make([]byte, 4)
		sent := 0
		for {
			select {
			case <-p.stop:
				p.done <- [2]int{sent, answered()}
				return
			case <-tick.C:
			}
			binary.BigEndian.PutUint32(buf, uint32(sent))
			_, _ = conn.Write(buf) // a refused send counts as lost
			sent++
		}
	}()
	return p
}

// Stop ends the pings and returns how many were sent and answered (within
// a second of the last).
func (p *pinger) Stop() (sent, got int) {
	close(p.stop)
	r := <-p.done
	return r[0], r[1]
}

// tcpStream writes a counting byte pattern from one namespace to a
// listener in another, chunk every interval, and the far end checks every
// byte: a connection that breaks, a byte out of order, or a pause longer
// than maxGap in what arrives is what it reports.
type tcpStream struct {
	stop   chan struct{}
	done   chan error
	mu     sync.Mutex
	bytes  int64
	maxGap time.Duration
}

func startTCPStream(t *testing.T, fromNS, toNS, toIP string, chunk int, interval time.Duration) *tcpStream {
	t.Helper()
	var l net.Listener
	if err := inNS(toNS, func() (err error) { l, err = net.Listen("tcp", ":7778"); return }); err != nil {
		t.Fatalf("listen in %s: %v", toNS, err)
	}
	var conn net.Conn
	err := inNS(fromNS, func() (err error) {
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(toIP, "7778"), 3*time.Second)
		return
	})
	if err != nil {
		l.Close()
		t.Fatalf("tcp stream %s -> %s: %v", fromNS, toIP, err)
	}
	peer, err := l.Accept()
	l.Close()
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	s := &tcpStream{stop: make(chan struct{}), done: make(chan error, 2)}
	go func() {
		defer peer.Close()
		buf := make([]byte, 64<<10)
		var want byte
		last := time.Now()
		for {
			n, err := peer.Read(buf)
			now := time.Now()
			if n > 0 {
				s.mu.Lock()
				if gap := now.Sub(last); gap > s.maxGap {
					s.maxGap = gap
				}
				s.bytes += int64(n)
				s.mu.Unlock()
				last = now
			}
			for _, b := range buf[:n] {
				if b != want {
					s.done <- fmt.Errorf("byte %d: got %d, want %d", s.bytes, b, want)
					return
				}
				want++
			}
			if errors.Is(err, io.EOF) {
				s.done <- nil
				return
			}
			if err != nil {
				s.done <- fmt.Errorf("read: %w", err)
				return
			}
		}
	}()
	go func() {
		buf := make([]byte, chunk)
		var next byte
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				_ = conn.(*net.TCPConn).CloseWrite()
				return
			case <-tick.C:
			}
			for i := range buf {
				buf[i] = next
				next++
			}
			_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write(buf); err != nil {
				s.done <- fmt.Errorf("write: %w", err)
				conn.Close()
				return
			}
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return s
}

// Stop ends the stream and returns what arrived, in order, and the
// longest pause in it; err says how the stream broke, if it did.
func (s *tcpStream) Stop() (bytes int64, maxGap time.Duration, err error) {
	close(s.stop)
	select {
	case err = <-s.done:
	case <-time.After(10 * time.Second):
		err = errors.New("the far end did not see the stream end within 10 s")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.maxGap, err
}

// tcpResent is the namespace's count of TCP segments sent again, and of
// those the receiver reported (by D-SACK) as duplicates of a segment it
// already had: a resend the network did not cause, as a tail loss probe
// or a timeout fired on a host too busy to take the ACK in time. The
// difference is what the network lost (or held too long).
func tcpResent(t *testing.T, ns string) (resent, duplicates int) {
	t.Helper()
	snmp, netstat := procCounters(t, ns, "/proc/net/snmp", "Tcp:"), procCounters(t, ns, "/proc/net/netstat", "TcpExt:")
	resent, ok := snmp["RetransSegs"]
	if !ok {
		t.Fatalf("no RetransSegs in %s's /proc/net/snmp", ns)
	}
	// Kernels before 5.10 count D-SACKs, not the segments they cover.
	if duplicates, ok = netstat["TCPDSACKRecvSegs"]; !ok {
		duplicates = netstat["TCPDSACKRecv"]
	}
	return resent, duplicates
}

// procCounters reads one group of a /proc/net table of the namespace,
// which comes as a line of names and a line of values.
func procCounters(t *testing.T, ns, file, group string) map[string]int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", file).Output()
	if err != nil {
		t.Fatalf("%s of %s: %v", file, ns, err)
	}
	counters := map[string]int{}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != group {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names[1:] {
			if i+1 < len(f) {
				counters[n], _ = strconv.Atoi(f[i+1])
			}
		}
		break
	}
	return counters
}
