package netperf

import (
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startServer runs a netserver on loopback for one test.
func startServer(t *testing.T, s *Server) (host string, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
}

func quick(t *testing.T, port int, test string, extra ...string) *Report {
	t.Helper()
	args := append([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "0.3", "-t", test, "-c", "-C"}, extra...)
	c, err := ParseArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Execute(context.Background(), c, nil)
	if err != nil {
		t.Fatalf("%s: %v", test, err)
	}
	return rep
}

func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.Running() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("server still holds %d tests", s.Running())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEveryTestOnLoopback(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	for _, test := range Tests {
		rep := quick(t, port, test, "--", "-m", "8K")
		r := rep.Results[0]
		if r.Throughput <= 0 && r.TransRate <= 0 {
			t.Errorf("%s: no throughput or transactions: %+v", test, r)
		}
		for _, side := range []SideResults{r.Local, r.Remote} {
			if side.CPU == nil || side.CPU.Util < 0 || side.CPU.Util > 100 {
				t.Errorf("%s: CPU %+v", test, side.CPU)
			}
		}
		if r.LocalSD <= 0 || r.RemoteSD <= 0 {
			t.Errorf("%s: service demand %v %v", test, r.LocalSD, r.RemoteSD)
		}
		// The server's CPU and interface figures are rates over its own
		// window; idle time after the client stopped would dilute them.
		if tail := r.Remote.CPU.Elapsed - r.Local.CPU.Elapsed; tail > 0.15 {
			t.Errorf("%s: the server measured %.3f s after the client's %.3f s", test, r.Remote.CPU.Elapsed, r.Local.CPU.Elapsed)
		}
	}
	waitIdle(t, s)
}

func TestHostilePeers(t *testing.T) {
	s := &Server{RequestWait: 300 * time.Millisecond}
	host, port := startServer(t, s)
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	send := func(frame []byte) string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(frame)
		c.SetDeadline(time.Now().Add(2 * time.Second))
		m, err := ReadMsg(c)
		if err != nil {
			return "closed: " + err.Error()
		}
		return m.Type + ": " + m.Error
	}
	frame := func(body string) []byte {
		b := make([]byte, 4+len(body))
		binary.BigEndian.PutUint32(b, uint32(len(body)))
		copy(b[4:], body)
		return b
	}
	huge := []byte{0x7f, 0xff, 0xff, 0xff}
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"garbage", []byte("GET / HTTP/1.0\r\n\r\n"), "error"},
		{"oversized", huge, "too large"},
		{"bad json", frame("{"), "malformed"},
		{"wrong first message", frame(`{"type":"done"}`), "expected a request"},
		{"old version", frame(`{"type":"request","version":99,"request":{"test":"TCP_RR","duration_ns":1,"req_size":1,"resp_size":1}}`), "protocol version"},
		{"absurd sizes", frame(`{"type":"request","version":1,"request":{"test":"TCP_STREAM","duration_ns":1000000,"send_size":999999999}}`), "out of range"},
		{"silent", nil, "closed"}, // says nothing: dropped after RequestWait
	}
	for _, c := range cases {
		if got := send(c.in); !strings.Contains(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	// A port scan: connect and leave at once, many times.
	for i := 0; i < 50; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
		}
	}
	waitIdle(t, s)
	quick(t, port, TCPRR) // still serving
}

// A client that vanishes mid-test frees what the test held.
func TestVanishingClient(t *testing.T) {
	s := &Server{}
	host, port := startServer(t, s)
	for _, test := range []string{TCPStream, TCPMaerts, TCPRR, UDPStream, UDPRR, TCPCRR} {
		c, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		req := &Request{Test: test, Duration: time.Hour, ReqSize: 1, RespSize: 1}
		WriteMsg(c, &Message{Type: MsgRequest, Version: ProtocolVersion, Request: req})
		m, err := ReadMsg(c)
		if err != nil || m.Type != MsgReady {
			t.Fatalf("%s: %v %+v", test, err, m)
		}
		proto := "tcp"
		if strings.HasPrefix(test, "UDP") {
			proto = "udp"
		}
		d, err := net.Dial(proto, net.JoinHostPort(host, strconv.Itoa(m.Ready.DataPort)))
		if err == nil {
			d.Write([]byte("x"))
		}
		time.Sleep(50 * time.Millisecond)
		c.Close() // gone without a word, data connection still open
		waitIdle(t, s)
		if d != nil {
			d.Close()
		}
	}
}

func TestHundredClientsAtOnce(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	c, err := ParseArgs([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "0.5", "-t", "TCP_RR"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := Run(context.Background(), c, c.Targets[0], i, nil); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitIdle(t, s)
}

func TestBusyServerRefusesClearly(t *testing.T) {
	s := &Server{MaxConcurrent: 1, RequestWait: 2 * time.Second}
	host, port := startServer(t, s)
	hold, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	time.Sleep(50 * time.Millisecond)
	c, _ := ParseArgs([]string{"-H", host, "-p", strconv.Itoa(port), "-l", "0.2"})
	if _, err := Run(context.Background(), c, c.Targets[0], 0, nil); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("got %v, want a busy error", err)
	}
}

func TestCountAndConfidence(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	c, _ := ParseArgs([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-t", "TCP_RR", "-l", "-500"})
	rep, err := Execute(context.Background(), c, nil)
	if err != nil || rep.Results[0].Transactions != 500 {
		t.Fatalf("-l -500: %v %+v", err, rep)
	}
	c, _ = ParseArgs([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "-1000000"})
	rep, err = Execute(context.Background(), c, nil)
	if err != nil || rep.Results[0].Remote.Bytes != 1000000 {
		t.Fatalf("-l -1000000: %v, received %d", err, rep.Results[0].Remote.Bytes)
	}
	c, _ = ParseArgs([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-t", "TCP_RR", "-l", "-300", "-I", "99,50", "-i", "4,2"})
	rep, err = Execute(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf := rep.Confidence
	if cf.Iterations < 2 || cf.Iterations > 4 || len(cf.Values) != cf.Iterations || (cf.Achieved && cf.Width > 50) {
		t.Errorf("confidence %+v", cf)
	}
}

// -T binds each end's data loop; a CPU the server does not have is refused
// in answer to the request, a CPU this end does not have before anything is sent.
func TestCPUBinding(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	rep := quick(t, port, TCPRR, "-T", "0,0")
	if p := rep.Results[0].Params; p.LocalBind == nil || *p.LocalBind != 0 || p.RemoteBind == nil || *p.RemoteBind != 0 {
		t.Errorf("params %+v, want both ends on CPU 0", p)
	}
	for _, tt := range []struct{ bind, want string }{
		{",1000", "netserver: bind to CPU 1000: not one of this process's CPUs"},
		{"1000,", "bind to CPU 1000: not one of this process's CPUs"},
	} {
		c, err := ParseArgs([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "0.2", "-t", TCPRR, "-T", tt.bind})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Execute(context.Background(), c, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("-T %s: got %v, want %q", tt.bind, err, tt.want)
		}
	}
	waitIdle(t, s)
}

// silentServer answers a request with a data port, takes the data
// connection and then says and reads nothing more.
func silentServer(t *testing.T) (port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	data, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		data.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if _, err := ReadMsg(c); err != nil {
				c.Close()
				continue
			}
			WriteMsg(c, &Message{Type: MsgReady, Ready: &Ready{DataPort: data.Addr().(*net.TCPAddr).Port}})
			d, err := data.Accept()
			mu.Lock()
			held = append(held, c)
			if err == nil {
				held = append(held, d)
			}
			mu.Unlock()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// A netserver that stops answering cannot hold a request/response client
// past the point where a netserver would have cut the test off. (Before,
// it waited for the response until interrupted.)
func TestClientCutsOffASilentServer(t *testing.T) {
	was := overrun
	overrun = 300 * time.Millisecond
	t.Cleanup(func() { overrun = was })
	port := silentServer(t)
	c, err := ParseArgs([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "0.2", "-t", TCPRR})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Execute(context.Background(), c, nil)
	if err == nil || !strings.Contains(err.Error(), "TCP_RR data phase: the netserver stopped answering; cut off after 500ms") {
		t.Errorf("got %v, want a cut-off error", err)
	}
	// The loop notices at its next receive timeout.
	if took := time.Since(start); took > 500*time.Millisecond+2*pollInterval {
		t.Errorf("took %v", took)
	}
}
