package netperf

import (
	"context"
	"fmt"
	"github.com/vnet-project/vnet/internal/netperf/wire"
	"io"
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
	send := func(frames ...[]byte) string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, f := range frames {
			c.Write(f)
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		var got string
		for {
			m, err := wire.Read(c)
			if err != nil {
				return got + "closed: " + err.Error()
			}
			if m.Aux == 0 {
				got += fmt.Sprintf("type %d; ", m.Type)
				continue
			}
			return got + reason(c, m)
		}
	}
	msg := func(typ int32) []byte { return (&wire.Message{Type: typ}).Encode() }
	omni := func(edit func(*wire.OmniRequest), plain bool) []byte {
		m := omniMessage(&Request{Test: TCPStream, Duration: time.Second}, true)
		o, err := wire.DecodeOmniRequest(m)
		if err != nil {
			t.Fatal(err)
		}
		edit(o)
		m = o.Encode(wire.NoAffinity)
		if !plain {
			wire.PutExt(m, wire.Ext{Flags: wire.ExtErrors, Duration: time.Second})
		}
		return m.Encode()
	}
	chatter := make([][]byte, maxChatter+1)
	for i := range chatter {
		chatter[i] = msg(wire.DebugOn)
	}
	cases := []struct {
		name string
		in   [][]byte
		want string
	}{
		{"garbage", [][]byte{[]byte("GET / HTTP/1.0\r\n\r\n")}, "closed"}, // less than a message: cut after RequestWait
		{"unknown request", [][]byte{msg(12345)}, "errno 998"},
		{"protocol", [][]byte{omni(func(o *wire.OmniRequest) { o.Protocol = 132 }, false)}, "protocol 132"},
		{"absurd sizes", [][]byte{omni(func(o *wire.OmniRequest) { o.RecvSize = 999999999 }, false)}, "out of range"},
		{"absurd sizes from netperf", [][]byte{omni(func(o *wire.OmniRequest) { o.RecvSize = 999999999 }, true)}, "errno 22"},
		{"no end", [][]byte{omni(func(o *wire.OmniRequest) { o.TestLength = 0 }, true)}, "errno 22"},
		{"chatter", chatter, "type 3; closed"},
		{"calibrate", [][]byte{msg(wire.CPUCalibrate)}, "type 5; closed"},
		{"silent", nil, "closed"}, // says nothing: dropped after RequestWait
	}
	for _, c := range cases {
		if got := send(c.in...); !strings.Contains(got, c.want) {
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
		m, err := ask(c, &Request{Test: test, Duration: time.Hour, ReqSize: 1, RespSize: 1})
		if err != nil {
			t.Fatalf("%s: %v", test, err)
		}
		proto := "tcp"
		if strings.HasPrefix(test, "UDP") {
			proto = "udp"
		}
		d, err := net.Dial(proto, net.JoinHostPort(host, strconv.Itoa(int(m.DataPort))))
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
	s := &Server{MaxTests: 1}
	_, port := startServer(t, s)
	held := make(chan error, 1)
	go func() { held <- rrFrom("127.0.0.2", port, 1500*time.Millisecond) }()
	waitFor(t, "the first test to start", func() bool { return s.Tests() == 1 })
	c, _ := ParseArgs([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "0.2"})
	if _, err := Run(context.Background(), c, c.Targets[0], 0, nil); err == nil || !strings.Contains(err.Error(), "netserver: server busy: 1 tests already running (netserver --max-tests)") {
		t.Errorf("got %v, want a busy error", err)
	}
	if err := <-held; err != nil {
		t.Errorf("the running test: %v", err)
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
			if _, err := wire.Read(c); err != nil {
				c.Close()
				continue
			}
			wire.Write(c, (&wire.OmniResponse{DataPort: uint32(data.Addr().(*net.TCPAddr).Port)}).Encode(0))
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dialFrom connects from a loopback source address: each of 127.0.0.x is
// another client to the netserver's per-client limits.
func dialFrom(from string, port int) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	return d.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// rrFrom runs a TCP_RR test of length d from a source address, speaking
// the protocol by hand (the client has no option for that address).
func rrFrom(from string, port int, d time.Duration) error {
	c, err := dialFrom(from, port)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d + 5*time.Second))
	m, err := ask(c, &Request{Test: TCPRR, Duration: d, ReqSize: 1, RespSize: 1})
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	data, err := dialFrom(from, int(m.DataPort))
	if err != nil {
		return err
	}
	defer data.Close()
	data.SetDeadline(time.Now().Add(d + 5*time.Second))
	b := make([]byte, 1)
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		if _, err := data.Write(b); err != nil {
			return err
		}
		if _, err := io.ReadFull(data, b); err != nil {
			return err
		}
	}
	data.(*net.TCPConn).CloseWrite()
	o, res, err := finish(c)
	if err != nil {
		return err
	}
	if res.Transactions != int64(n) || o.TransReceived != uint32(n) {
		return fmt.Errorf("got results of %d (%d) transactions, want %d", res.Transactions, o.TransReceived, n)
	}
	return nil
}

// openIdle opens n control connections from a source address that never
// send a request.
func openIdle(t *testing.T, from string, port, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	for i := 0; i < n; i++ {
		c, err := dialFrom(from, port)
		if err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
		cs = append(cs, c)
	}
	return cs
}

// Idle control connections, however many, take no test's place: clients
// on the same address and on others are served while they are open, and
// the server keeps only a few of them.
func TestIdleConnectionsDoNotStarveClients(t *testing.T) {
	// RequestWait is long so that only the caps, never the connections'
	// own deadline, can bring the count down, however slow the host.
	s := &Server{RequestWait: 30 * time.Second, MaxIdlePerClient: 4, MaxIdle: 16, MaxTests: 8}
	_, port := startServer(t, s)
	idle := openIdle(t, "127.0.0.1", port, 300)
	if err := rrFrom("127.0.0.2", port, 100*time.Millisecond); err != nil {
		t.Errorf("another client: %v", err)
	}
	quick(t, port, TCPRR) // the same address as the idle ones
	// Past a second's grace (the most idleAfter allows) the oldest
	// beyond the cap are cut and told why.
	waitFor(t, "the idle cap", func() bool { return s.Waiting() <= 4 })
	if got := cutReason(idle[0]); got != "errno 16" {
		t.Errorf("the oldest idle connection was told %q", got)
	}
	quick(t, port, TCPRR)
}

// The global cap holds when each client stays under its own: the clients
// with the most idle connections lose them first.
func TestGlobalIdleCap(t *testing.T) {
	// With a short RequestWait a slow host let the first client's
	// connections reach their own deadline before the cap took the others'.
	s := &Server{RequestWait: 30 * time.Second, MaxIdlePerClient: 8, MaxIdle: 12}
	_, port := startServer(t, s)
	for i := 2; i <= 5; i++ {
		openIdle(t, fmt.Sprintf("127.0.0.%d", i), port, 4+i) // 6..9, 30 in all
	}
	waitFor(t, "the global idle cap", func() bool { return s.Waiting() <= 12 })
	s.lim.mu.Lock()
	for key, cl := range s.lim.clients {
		if n := len(cl.waiting); n < 3 || n > 4 {
			t.Errorf("%s keeps %d idle connections, want 3 or 4 (the heaviest lose first)", key, n)
		}
	}
	s.lim.mu.Unlock()
	if err := rrFrom("127.0.0.6", port, 100*time.Millisecond); err != nil {
		t.Errorf("another client: %v", err)
	}
	if err := rrFrom("127.0.0.2", port, 100*time.Millisecond); err != nil {
		t.Errorf("a client with idle connections: %v", err)
	}
}

// silentTest is an admitted test whose data connection is open; first
// bytes are sent on it, then nothing.
func silentTest(from string, port int, test string, first int) (ctl, data net.Conn, err error) {
	ctl, err = dialFrom(from, port)
	if err != nil {
		return nil, nil, err
	}
	m, err := ask(ctl, &Request{Test: test, Duration: time.Hour, ReqSize: 1 << 20, RespSize: 1})
	if err != nil {
		ctl.Close()
		return nil, nil, err
	}
	data, err = dialFrom(from, int(m.DataPort))
	if err != nil {
		ctl.Close()
		return nil, nil, err
	}
	data.Write(make([]byte, first))
	return ctl, data, nil
}

// Tests whose data connections move nothing give their place to a client
// that needs it at once, and are cut after the start or stall timeout.
func TestSilentTestsAreCut(t *testing.T) {
	s := &Server{MaxTests: 20, StartTimeout: 800 * time.Millisecond, StallTimeout: 1200 * time.Millisecond}
	_, port := startServer(t, s)
	var ctls []net.Conn
	for i := 0; i < 20; i++ {
		first := 0
		if i%2 == 1 {
			first = 100 // moves a little, then stalls
		}
		ctl, data, err := silentTest("127.0.0.1", port, []string{TCPStream, TCPRR}[i%4/2], first)
		if err != nil {
			t.Fatalf("silent test %d: %v", i, err)
		}
		defer ctl.Close()
		defer data.Close()
		ctls = append(ctls, ctl)
	}
	if n := s.Tests(); n != 20 {
		t.Fatalf("%d tests admitted, want 20", n)
	}
	// Every place is taken; one that has moved nothing for a while
	// (here 200 ms) is cut for a client that asks.
	time.Sleep(250 * time.Millisecond)
	if err := rrFrom("127.0.0.2", port, 100*time.Millisecond); err != nil {
		t.Errorf("a client while the silent tests hold every place: %v", err)
	}
	start := time.Now()
	waitFor(t, "the silent tests to be cut", func() bool { return s.Tests() == 0 })
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("cut after %v", took)
	}
	reasons := map[string]int{}
	for _, c := range ctls {
		reasons[cutReason(c)]++
	}
	for _, want := range []string{"no data moved within 800ms of the request (netserver --start-timeout)", "no data moved for 1.2s (netserver --stall-timeout)"} {
		if reasons[want] == 0 {
			t.Errorf("no test was told %q; told %v", want, reasons)
		}
	}
	quick(t, port, TCPStream)
	waitIdle(t, s)
}

// One client may hold at most its share of the places; a quiet test of
// its own gives way to its next request, another client's does not.
func TestPerClientTestCap(t *testing.T) {
	s := &Server{MaxTestsPerClient: 2, StartTimeout: 4 * time.Second} // a test quiet for 1 s may be cut
	_, port := startServer(t, s)
	start := time.Now()
	for i := 0; i < 2; i++ {
		ctl, data, err := silentTest("127.0.0.3", port, TCPStream, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer ctl.Close()
		defer data.Close()
	}
	ctl, data, err := silentTest("127.0.0.3", port, TCPStream, 0)
	if err == nil {
		ctl.Close()
		data.Close()
	}
	// On a slow host the first two may already count as quiet.
	if time.Since(start) < s.lim.evictAfter() && (err == nil || err.Error() != "error: server busy: 2 tests from 127.0.0.3 already running (netserver --max-tests-per-client)") {
		t.Errorf("a third test from the same address: got %v", err)
	}
	if err := rrFrom("127.0.0.4", port, 100*time.Millisecond); err != nil {
		t.Errorf("another client: %v", err)
	}
	time.Sleep(time.Until(start.Add(s.lim.evictAfter() + 100*time.Millisecond)))
	if err := rrFrom("127.0.0.3", port, 100*time.Millisecond); err != nil {
		t.Errorf("the same client once its tests are quiet: %v", err)
	}
}

// Large-message requests are admitted while their buffers fit the budget
// and refused with a clear error beyond it; the budget is never exceeded.
func TestMemoryBudget(t *testing.T) {
	const budget = 100 << 20
	s := &Server{MaxMemory: budget}
	_, port := startServer(t, s)
	var admitted, refused int
	start := time.Now()
	for i := 0; i < 30; i++ {
		c, err := dialFrom("127.0.0.1", port)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = ask(c, &Request{Test: TCPRR, Duration: time.Hour, ReqSize: 16 << 20, RespSize: 16 << 20})
		switch {
		case err == nil:
			admitted++
		case strings.Contains(err.Error(), "server busy: this test's buffers take 32.0 MiB and only 4.0 MiB of 100.0 MiB are free (netserver --max-memory)"):
			refused++
		default:
			t.Fatalf("request %d: %v", i, err)
		}
		if m := s.MemoryInUse(); m > budget {
			t.Fatalf("%d bytes of buffers admitted, budget %d", m, budget)
		}
	}
	// A request that finds the budget spent may cut a test that has held
	// its place for a second without moving data; these came faster.
	if time.Since(start) < s.lim.evictAfter() && (admitted != 3 || refused != 27 || s.MemoryInUse() != 96<<20) {
		t.Errorf("admitted %d, refused %d, %d bytes in use; want 3, 27, 96 MiB", admitted, refused, s.MemoryInUse())
	}
	// The client prints the server's reason.
	c, err := ParseArgs([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "0.2", "-t", TCPRR, "--", "-r", "16M,16M"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Execute(context.Background(), c, nil); err == nil || !strings.Contains(err.Error(), "netserver: server busy: this test's buffers take 32.0 MiB") {
		t.Errorf("the client: %v", err)
	}
	// A request larger than the whole budget is told so.
	small := &Server{MaxMemory: 16 << 20}
	_, port2 := startServer(t, small)
	c, _ = ParseArgs([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port2), "-l", "0.2", "-t", TCPRR, "--", "-r", "16M,1"})
	if _, err := Execute(context.Background(), c, nil); err == nil || !strings.Contains(err.Error(), "test needs more buffer memory than the netserver allows: its buffers take 16.0 MiB, all tests together may hold 16.0 MiB") {
		t.Errorf("too large for the budget: %v", err)
	}
}

// The two timeouts tell a test that never started from one that paused: a
// test that moved nothing is cut after --start-timeout, while one that
// moved data and then paused for longer than that (a relink stalls a
// stream for seconds) is kept until --stall-timeout.
func TestPausedTestOutlivesTheStartTimeout(t *testing.T) {
	s := &Server{StartTimeout: 300 * time.Millisecond, StallTimeout: 3 * time.Second}
	_, port := startServer(t, s)
	silentCtl, silentData, err := silentTest("127.0.0.5", port, TCPStream, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer silentCtl.Close()
	defer silentData.Close()
	pausedCtl, pausedData, err := silentTest("127.0.0.6", port, TCPStream, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer pausedCtl.Close()
	defer pausedData.Close()
	start := time.Now()
	if why := cutReason(silentCtl); why != "no data moved within 300ms of the request (netserver --start-timeout)" {
		t.Errorf("the test that moved nothing: %q", why)
	}
	// Paused for more than three start timeouts, well within the stall timeout.
	time.Sleep(time.Until(start.Add(time.Second)))
	if n := s.Tests(); n != 1 {
		t.Fatalf("%d tests held after a 1s pause, want the paused one", n)
	}
	if why := cutReason(pausedCtl); why != "no data moved for 3s (netserver --stall-timeout)" {
		t.Errorf("the paused test: %q", why)
	}
	waitIdle(t, s)
}

// netperf's own client never marks its request, and never gets vnet's
// extension: a response and results without its mark, and nothing after
// them but the next request's answer.
func TestPlainClientSeesNoExtension(t *testing.T) {
	s := &Server{}
	host, port := startServer(t, s)
	c, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for i := 0; i < 2; i++ { // two iterations on one connection, as netperf's -i runs them
		if err := wire.Write(c, omniMessage(&Request{Test: TCPRR, Duration: time.Second, ReqSize: 1, RespSize: 1}, true)); err != nil {
			t.Fatal(err)
		}
		m, err := wire.Read(c)
		if err != nil || m.Aux != 0 {
			t.Fatalf("response: %v %+v", err, m)
		}
		if _, marked, _ := wire.GetExt(m); marked {
			t.Fatal("the response carries the extension's mark")
		}
		resp, err := wire.DecodeOmniResponse(m)
		if err != nil {
			t.Fatal(err)
		}
		d, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(int(resp.DataPort))))
		if err != nil {
			t.Fatal(err)
		}
		b := []byte{1}
		for j := 0; j < 10; j++ {
			d.Write(b)
			io.ReadFull(d, b)
		}
		d.(*net.TCPConn).CloseWrite()
		m, err = wire.Read(c)
		d.Close()
		if err != nil || m.Aux != 0 {
			t.Fatalf("results: %v %+v", err, m)
		}
		res, err := wire.DecodeOmniResults(m)
		if err != nil || res.TransReceived != 10 || res.BytesReceived != 10 || res.BytesSent != 10 {
			t.Fatalf("results %+v %v", res, err)
		}
		if _, marked, _ := wire.GetExt(m); marked {
			t.Fatal("the results carry the extension's mark")
		}
	}
	c.(*net.TCPConn).CloseWrite()
	if rest, _ := io.ReadAll(c); len(rest) != 0 {
		t.Errorf("%d bytes more after the results", len(rest))
	}
}

// A client cannot make the netserver bind a data port below 1024 (which
// as root it could) unless the netserver was started to allow it.
func TestPrivilegedDataPortsOnlyWhenAllowed(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	for _, p := range []string{"1", "80", "1023"} {
		c, err := ParseArgs([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "0.3", "-t", TCPStream, "--", "-P", "," + p})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Execute(context.Background(), c, nil)
		if err == nil || !strings.Contains(err.Error(), "data port "+p+" is privileged") || !strings.Contains(err.Error(), "--privileged-data-ports") {
			t.Errorf("data port %s: %v", p, err)
		}
	}
	quick(t, port, TCPStream, "--", "-P", ",0") // any port: as ever
	waitIdle(t, s)

	allowed := &Server{PrivilegedDataPorts: true}
	_, port = startServer(t, allowed)
	c, err := ParseArgs([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "0.3", "-t", TCPStream, "--", "-P", ",1023"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Execute(context.Background(), c, nil); err != nil && strings.Contains(err.Error(), "privileged") {
		t.Errorf("allowed, data port 1023: %v", err)
	}
	waitIdle(t, allowed)
}

// Options that reach the netserver in the request: its socket buffers,
// TOS, priority, no-delay, keep-alive, congestion control, alignment, and
// a UDP socket connected once it heard from the client (-N).
func TestRemoteOptions(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	for _, tt := range []struct {
		test string
		args []string
	}{
		{TCPStream, []string{"-Y", "CS1", "-y", "1", "-S", "-A", "64", "-O", "8", "--", "-D", "-K", "cubic", "-S", "64K", "-m", "8K,8K"}},
		{UDPRR, []string{"--", "-N", "-e", "1"}},
		{TCPMaerts, []string{"--", "-m", ",4K", "-M", ",4K"}},
	} {
		rep := quick(t, port, tt.test, tt.args...)
		r := rep.Results[0]
		if r.Throughput <= 0 && r.TransRate <= 0 {
			t.Errorf("%s %v: %+v", tt.test, tt.args, r)
		}
		if tt.test == TCPMaerts && r.Params.SendSize != 4096 {
			t.Errorf("MAERTS: the netserver sent %d-byte messages, want 4096", r.Params.SendSize)
		}
		if tt.test == TCPStream && r.Remote.CongControl != "cubic" {
			t.Errorf("the netserver's congestion control %q", r.Remote.CongControl)
		}
	}
	waitIdle(t, s)
}
