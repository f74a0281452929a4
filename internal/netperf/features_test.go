package netperf

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/netperf/netperftest"
)

// The netserver sets a test's socket options on its listener: the socket
// a connection is accepted on must have inherited them, and the
// listener's bound on each call, all but the TOS and the priority, which
// it sets again (the priority is not inherited, and setting the TOS
// resets it).
func TestAcceptedSocketsInheritOptions(t *testing.T) {
	o := sockOpts{snd: 96 << 10, rcv: 80 << 10, tos: 0x28, cong: "cubic", noDelay: true, prio: 3, keep: true}
	ln, port, err := listenData(unix.SOCK_STREAM, "4", netip.MustParseAddr("127.0.0.1"), 0, o)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ln)
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := &sock{fd: -1}
	fd, err := s.acceptFrom(ln)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := o.applyMarks(fd, false); err != nil {
		t.Fatal(err)
	}
	if prio, _ := unix.GetsockoptInt(ln, unix.SOL_SOCKET, unix.SO_PRIORITY); prio != 3 {
		t.Errorf("the listener's priority %d, want 3 (set after the TOS)", prio)
	}
	get := func(fd, level, opt int) int {
		v, err := unix.GetsockoptInt(fd, level, opt)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, o := range []struct {
		name         string
		level, name2 int
	}{{"SO_SNDBUF", unix.SOL_SOCKET, unix.SO_SNDBUF}, {"SO_RCVBUF", unix.SOL_SOCKET, unix.SO_RCVBUF}, {"IP_TOS", unix.IPPROTO_IP, unix.IP_TOS},
		{"TCP_NODELAY", unix.IPPROTO_TCP, unix.TCP_NODELAY}, {"SO_PRIORITY", unix.SOL_SOCKET, unix.SO_PRIORITY},
		{"SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE}} {
		if got, want := get(fd, o.level, o.name2), get(ln, o.level, o.name2); got != want {
			t.Errorf("%s: accepted %d, listener %d", o.name, got, want)
		}
	}
	if cc, _ := unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION); strings.TrimRight(cc, "\x00") != "cubic" {
		t.Errorf("congestion control %q", cc)
	}
	for _, opt := range []int{unix.SO_RCVTIMEO, unix.SO_SNDTIMEO} {
		tv, err := unix.GetsockoptTimeval(fd, unix.SOL_SOCKET, opt)
		if err != nil || time.Duration(tv.Nano()) != pollInterval {
			t.Errorf("call bound %d: %v %v, want %v", opt, tv, err, pollInterval)
		}
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_NONBLOCK != 0 {
		t.Error("the accepted socket is non-blocking")
	}
}

func run(t *testing.T, args ...string) *Report {
	t.Helper()
	c, err := ParseArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Execute(context.Background(), c, nil)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return rep
}

// -N: no netserver; each test against the service its side would be.
func TestNoControl(t *testing.T) {
	tcp := map[string]int{"discard": netperftest.TCP(t, netperftest.Discard), "echo": netperftest.TCP(t, netperftest.Echo),
		"chargen": netperftest.TCP(t, netperftest.Chargen)}
	udpEcho, udpDiscard := netperftest.UDP(t, netperftest.UDPEcho), netperftest.UDP(t, netperftest.UDPDiscard)
	for _, tt := range []struct {
		test string
		port int
	}{{TCPStream, tcp["discard"]}, {TCPMaerts, tcp["chargen"]}, {TCPRR, tcp["echo"]}, {TCPCRR, tcp["echo"]}, {UDPStream, udpDiscard}, {UDPRR, udpEcho}} {
		rep := run(t, "-N", "-H", "127.0.0.1", "-l", "0.3", "-t", tt.test, "-c", "-C", "--", "-P", ","+strconv.Itoa(tt.port))
		r := rep.Results[0]
		if r.Throughput <= 0 && r.TransRate <= 0 || r.Peer != "none" || r.Remote.CPU != nil || r.Local.CPU == nil {
			t.Errorf("%s: %+v", tt.test, r)
		}
		var out bytes.Buffer
		WriteText(&out, rep)
		if first := strings.SplitN(out.String(), "\n", 2)[0]; !strings.Contains(first, "port "+strconv.Itoa(tt.port)+" AF_INET : no control : demo") {
			t.Errorf("%s: heading %q", tt.test, first)
		}
		v := view{rep: rep, c: rep.Config, r: r}
		if v.text(selectorIndex["REMOTE_CPU_UTIL"]) != "-1.00" || v.text(selectorIndex["RSR_SIZE_END"]) != "-1" {
			t.Errorf("%s: the remote side was measured: %s %s", tt.test, v.text(selectorIndex["REMOTE_CPU_UTIL"]), v.text(selectorIndex["RSR_SIZE_END"]))
		}
	}
}

// -b keeps that many requests outstanding beyond the one awaited: a
// service that answers nothing until five requests have come lets a
// TCP_RR or UDP_RR test with -b 4 run, and would hold one without it.
func TestFirstBurstKeepsRequestsOutstanding(t *testing.T) {
	const burst = 4
	held := netperftest.TCP(t, func(c net.Conn) {
		b := make([]byte, burst+1)
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		c.Write(b)
		netperftest.Echo(c)
	})
	var mu sync.Mutex
	var pending [][]byte
	udpHeld := netperftest.UDP(t, func(b []byte) [][]byte {
		mu.Lock()
		defer mu.Unlock()
		pending = append(pending, append([]byte(nil), b...))
		if len(pending) <= burst {
			return nil
		}
		out := pending
		pending = nil
		return out
	})
	for _, tt := range []struct {
		test string
		port int
	}{{TCPRR, held}, {UDPRR, udpHeld}} {
		rep := run(t, "-N", "-H", "127.0.0.1", "-l", "0.3", "-t", tt.test, "--", "-b", strconv.Itoa(burst), "-P", ","+strconv.Itoa(tt.port))
		r := rep.Results[0]
		if r.Transactions < 10 || r.Latency == nil {
			t.Errorf("%s -b %d: %d transactions", tt.test, burst, r.Transactions)
		}
		v := view{rep: rep, c: rep.Config, r: r}
		if v.text(selectorIndex["BURST_SIZE"]) != strconv.Itoa(burst) {
			t.Errorf("BURST_SIZE %s", v.text(selectorIndex["BURST_SIZE"]))
		}
	}
}

// Pacing (-w, -b) bounds what a test does: at most a burst per interval,
// here and, asked for with ",r", at the netserver.
func TestPacing(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	p := strconv.Itoa(port)
	rep := run(t, "-H", "127.0.0.1", "-p", p, "-l", "0.5", "-t", TCPRR, "-w", "10", "-b", "2")
	if n := rep.Results[0].Transactions; n < 10 || n > 2*(50+2) {
		t.Errorf("TCP_RR paced at 2 per 10 ms for 0.5 s: %d transactions", n)
	}
	rep = run(t, "-H", "127.0.0.1", "-p", p, "-l", "0.5", "-t", TCPMaerts, "-w", ",10", "-b", ",1", "--", "-m", ",1K")
	r := rep.Results[0]
	if r.Local.Bytes <= 0 || r.Local.Bytes > 1024*(50+2) {
		t.Errorf("TCP_MAERTS paced at the netserver to 1 KiB per 10 ms for 0.5 s: %d bytes", r.Local.Bytes)
	}
	if r.Params.RemoteIntervalUsecs != 10000 || r.Params.RemoteIntervalBurst != 1 {
		t.Errorf("the netserver's pacing: %d us, burst %d", r.Params.RemoteIntervalUsecs, r.Params.RemoteIntervalBurst)
	}
	waitIdle(t, s)
}

// The buffer rings: netperf's default widths, -W's, and the netserver's
// as it reports them.
func TestWidths(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	p := strconv.Itoa(port)
	r := run(t, "-H", "127.0.0.1", "-p", p, "-l", "0.2", "-W", "3,5", "-t", TCPStream, "--", "-m", "8K").Results[0].Params
	if r.LocalSendWidth != 3 || r.RemoteRecvWidth != 5 {
		t.Errorf("-W 3,5: local send %d, remote receive %d", r.LocalSendWidth, r.RemoteRecvWidth)
	}
	r = run(t, "-H", "127.0.0.1", "-p", p, "-l", "0.2", "-t", TCPStream, "--", "-m", "8K").Results[0].Params
	if want := r.LocalSndBuf/8192 + 1; r.LocalSendWidth != max(want, 2) || r.RemoteRecvWidth != 2 {
		t.Errorf("default: local send %d (socket %d), remote receive %d", r.LocalSendWidth, r.LocalSndBuf, r.RemoteRecvWidth)
	}
	r = run(t, "-H", "127.0.0.1", "-p", p, "-l", "0.2", "-t", TCPRR).Results[0].Params
	if r.LocalSendWidth != 1 || r.LocalRecvWidth != 1 || r.RemoteSendWidth != 1 || r.RemoteRecvWidth != 1 {
		t.Errorf("TCP_RR: %+v", r)
	}
	waitIdle(t, s)
}

// OMNI's UDP receive test: the netserver sends, to the host that asked
// alone.
func TestUDPReceive(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	rep := run(t, "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "0.3", "-c", "-C", "-t", "OMNI", "--", "-d", "recv", "-T", "udp", "-m", ",1000")
	r := rep.Results[0]
	if r.Test != UDPMaerts || r.Throughput <= 0 || r.Local.Bytes <= 0 || r.Remote.Bytes < r.Local.Bytes || r.Params.SendSize != 1000 {
		t.Errorf("%+v", r)
	}
	c, err := dialFrom("127.0.0.1", port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = ask(c, &Request{Test: UDPMaerts, Duration: time.Second, SendSize: 100, PeerIP: netip.MustParseAddr("192.0.2.1"), PeerPort: 9})
	if err == nil || !strings.Contains(err.Error(), "sends datagrams only to the host that asked for the test") {
		t.Errorf("datagrams to another host: %v", err)
	}
	waitIdle(t, s)
}

// TCP_CORK and fast open reach the sockets and the tests run.
func TestCorkAndFastOpen(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	p := strconv.Itoa(port)
	for _, args := range [][]string{{"-t", TCPStream, "--", "-C"}, {"-t", TCPRR, "--", "-F"}, {"-t", TCPCRR, "--", "-F"}, {"-t", TCPStream, "--", "-F"}} {
		rep := run(t, append([]string{"-H", "127.0.0.1", "-p", p, "-l", "0.2"}, args...)...)
		if r := rep.Results[0]; r.Throughput <= 0 && r.TransRate <= 0 {
			t.Errorf("%v: %+v", args, r)
		}
	}
	waitIdle(t, s)
}

// -d prints what happens, and -d -d (or DUMP_TCP_INFO) the data
// connection's TCP_INFO as netperf prints it, on the diagnostics writer.
func TestDebugAndTCPInfo(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	c, err := ParseArgs([]string{"-d", "-d", "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "0.2", "-t", TCPStream})
	if err != nil {
		t.Fatal(err)
	}
	var diag bytes.Buffer
	c.Diag = &diag
	if _, err := Execute(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	out := diag.String()
	for _, want := range []string{"netperf: debug: control connection from ", "netperf: debug: netserver: data port ", "netperf: debug: data connection from ",
		"\ntcpi_rto ", "\ntcpi_rtt ", " tpci_snd_cwnd ", "\ntcpi_reordering "} {
		if !strings.Contains("\n"+out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	waitIdle(t, s)
}

// -v 2 adds netperf's blocks under the classic tables.
func TestVerboseTwo(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	for test, want := range map[string]string{TCPStream: "Alignment      Offset         Bytes    Bytes       Sends   Bytes    Recvs\n",
		TCPMaerts: "Maximum\nSegment\nSize (bytes)\n", TCPRR: "Send   Recv    Send   Recv    usec/Tran  per sec  Outbound   Inbound\n",
		TCPCRR: "\nAlignment      Offset\nLocal  Remote  Local  Remote\nSend   Recv    Send   Recv\n"} {
		rep := run(t, "-v", "2", "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-l", "0.2", "-t", test)
		var out bytes.Buffer
		WriteText(&out, rep)
		if !strings.Contains(out.String(), want) {
			t.Errorf("%s -v 2: no %q in\n%s", test, want, out.String())
		}
	}
	waitIdle(t, s)
}

// The CPU's time by kind, at each end: each kind is a share of the
// CPUs' time, and together they are at most what was busy.
func TestCPUBreakdown(t *testing.T) {
	s := &Server{}
	_, port := startServer(t, s)
	rep := quick(t, port, TCPStream)
	r := rep.Results[0]
	for _, side := range []SideResults{r.Local, r.Remote} {
		u := side.CPU
		if u == nil || u.User < 0 || u.System < 0 || u.IRQ < 0 || u.SoftIRQ < 0 || u.User+u.System+u.IRQ+u.SoftIRQ > u.Util+0.01 {
			t.Errorf("breakdown %+v", u)
		}
	}
	v := view{rep: rep, c: rep.Config, r: r}
	if got := v.text(selectorIndex["REMOTE_CPU_PERCENT_SYSTEM"]); got == "-1.00" {
		t.Errorf("REMOTE_CPU_PERCENT_SYSTEM %s", got)
	}
	waitIdle(t, s)
}
