// Package netperftest has the stand-in services a test without a control
// connection (netperf's -N) meets: discard, echo and chargen over TCP,
// and UDP services that answer as a test says, on loopback, each for one
// test.
package netperftest

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
)

// Serve is what a TCP service does with one connection.
type Serve func(c net.Conn)

// Discard reads everything and answers nothing.
func Discard(c net.Conn) { io.Copy(io.Discard, c) }

// Echo answers with what it reads.
func Echo(c net.Conn) { io.Copy(c, c) }

// Chargen sends until the connection closes.
func Chargen(c net.Conn) {
	b := bytes.Repeat([]byte("chargen "), 8192)
	for {
		if _, err := c.Write(b); err != nil {
			return
		}
	}
}

// TCP runs a TCP service on 127.0.0.1 until the test ends and returns its
// port.
func TCP(t testing.TB, serve Serve) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); serve(c) }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// UDP runs a UDP service on 127.0.0.1 that sends, to each datagram's
// sender, what reply returns for it; it returns its port.
func UDP(t testing.TB, reply func(b []byte) [][]byte) int {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		b := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			for _, r := range reply(b[:n]) {
				pc.WriteTo(r, from)
			}
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

// UDPEcho answers each datagram with itself.
func UDPEcho(b []byte) [][]byte { return [][]byte{append([]byte(nil), b...)} }

// UDPDiscard answers nothing.
func UDPDiscard([]byte) [][]byte { return nil }
