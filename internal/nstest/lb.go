package nstest

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/dataplane/nsthread"
)

// LBServer is a load balancer's backend for tests: a TCP server in a
// namespace that answers each line a client sends with its name and the
// client's address as it sees it.
type LBServer struct {
	Name, NS string
	Port     int
	mu       sync.Mutex
	l        net.Listener
}

// Start listens and serves until Stop or the test's end.
func (s *LBServer) Start(t testing.TB) {
	t.Helper()
	var l net.Listener
	if err := nsthread.InNamed(s.NS, func() (err error) { l, err = net.Listen("tcp", fmt.Sprintf(":%d", s.Port)); return }); err != nil {
		t.Fatalf("listen in %s: %v", s.NS, err)
	}
	s.mu.Lock()
	s.l = l
	s.mu.Unlock()
	t.Cleanup(s.Stop)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go s.serve(conn)
		}
	}()
}

func (s *LBServer) serve(conn net.Conn) {
	defer conn.Close()
	peer, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
	r := bufio.NewScanner(conn)
	for r.Scan() {
		if _, err := fmt.Fprintf(conn, "%s %s\n", s.Name, peer); err != nil {
			return
		}
	}
}

// Stop closes the listener: new connections are refused, those made stay.
func (s *LBServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.l != nil {
		s.l.Close()
		s.l = nil
	}
}

// LBAsk connects from a namespace to addr (host:port), sends a line and
// returns the answering LBServer's name and the client address it saw.
func LBAsk(ns, addr string) (server, seen string, err error) {
	conn, err := LBDial(ns, addr)
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	return LBConverse(conn)
}

// LBDial connects from a namespace to addr.
func LBDial(ns, addr string) (net.Conn, error) {
	var conn net.Conn
	err := nsthread.InNamed(ns, func() (err error) { conn, err = net.DialTimeout("tcp", addr, time.Second); return })
	return conn, err
}

// LBConverse sends a line on a connection to an LBServer and returns its
// answer: the server's name and the client address it saw.
func LBConverse(conn net.Conn) (server, seen string, err error) {
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("hi\n")); err != nil {
		return "", "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", "", err
	}
	f := strings.Fields(line)
	if len(f) != 2 {
		return "", "", fmt.Errorf("answer %q", line)
	}
	return f[0], f[1], nil
}
