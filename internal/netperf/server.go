package netperf

import (
	"context"
	"errors"
	"fmt"
	"github.com/vnet-project/vnet/internal/netperf/wire"
	"golang.org/x/sys/unix"
	"io"
	"log"
	"math"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vnet-project/vnet/internal/cpustat"
)

// Server is netserver: it answers control connections, one test each, many
// at once. A malformed or hostile peer gets an error and is dropped; it can
// neither crash the server nor hold a test's resources past its deadlines,
// and the limits below keep one client from taking every test's place.
// Zero fields take the Default values.
type Server struct {
	Log *log.Logger

	MaxTests          int   // tests at once; more are refused
	MaxTestsPerClient int   // tests at once from one client address (an IPv6 /64)
	MaxMemory         int64 // bytes of data buffers all tests may hold together

	// A control connection that has not sent its request after a second
	// is idle: each client may keep MaxIdlePerClient of them, all clients
	// MaxIdle; the oldest beyond are cut.
	MaxIdle          int
	MaxIdlePerClient int

	RequestWait  time.Duration // how long a new connection may take to ask
	StartTimeout time.Duration // from the request to the test's first byte of data
	StallTimeout time.Duration // a test that moved data and then none for this long is cut

	once    sync.Once
	lim     *limits
	active  sync.WaitGroup
	running atomic.Int64
}

// The netserver's default limits.
const (
	DefaultMaxTests          = 256
	DefaultMaxTestsPerClient = 128
	DefaultMaxMemory         = 512 << 20
	DefaultMaxIdle           = 64
	DefaultMaxIdlePerClient  = 8
	DefaultRequestWait       = 5 * time.Second
	DefaultStartTimeout      = 5 * time.Second
	DefaultStallTimeout      = 30 * time.Second
)

// Running is how many control connections are being served.
func (s *Server) Running() int { return int(s.running.Load()) }

// Tests is how many tests hold a slot.
func (s *Server) Tests() int {
	s.init()
	s.lim.mu.Lock()
	defer s.lim.mu.Unlock()
	return s.lim.tests
}

// Waiting is how many control connections have not yet sent their request.
func (s *Server) Waiting() int {
	s.init()
	s.lim.mu.Lock()
	defer s.lim.mu.Unlock()
	return s.lim.waiting
}

// MemoryInUse is the buffer memory the admitted tests hold.
func (s *Server) MemoryInUse() int64 {
	s.init()
	s.lim.mu.Lock()
	defer s.lim.mu.Unlock()
	return s.lim.mem
}

// overrun is how long past its announced duration a test may run before
// either end cuts it off. A variable so that tests need not wait a minute.
var overrun = 60 * time.Second

// cutOffAfter is how long a test of duration d may run at all. A test
// bounded by a count has no duration: a day, the longest the protocol
// allows a timed test.
func cutOffAfter(d time.Duration) time.Duration {
	if d == 0 {
		return 24 * time.Hour
	}
	return d + overrun
}

func (s *Server) init() {
	s.once.Do(func() {
		orInt := func(v *int, def int) {
			if *v <= 0 {
				*v = def
			}
		}
		orDur := func(v *time.Duration, def time.Duration) {
			if *v <= 0 {
				*v = def
			}
		}
		orInt(&s.MaxTests, DefaultMaxTests)
		orInt(&s.MaxTestsPerClient, min(DefaultMaxTestsPerClient, s.MaxTests))
		orInt(&s.MaxIdle, DefaultMaxIdle)
		orInt(&s.MaxIdlePerClient, min(DefaultMaxIdlePerClient, s.MaxIdle))
		orDur(&s.RequestWait, DefaultRequestWait)
		orDur(&s.StartTimeout, DefaultStartTimeout)
		orDur(&s.StallTimeout, DefaultStallTimeout)
		if s.MaxMemory <= 0 {
			s.MaxMemory = DefaultMaxMemory
		}
		if s.Log == nil {
			s.Log = log.New(io.Discard, "", 0)
		}
		s.lim = newLimits(s)
	})
}

// Serve accepts control connections until ctx ends, then waits for the
// running tests to finish.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.init()
	go func() { <-ctx.Done(); ln.Close() }()
	quit := make(chan struct{})
	go s.lim.sweep(quit)
	defer close(quit) // after the tests: it cuts those that stall
	defer s.active.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			s.Log.Printf("accept: %v", err)
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		c.SetDeadline(time.Now().Add(s.RequestWait))
		w := s.lim.wait(c)
		s.active.Add(1)
		s.running.Add(1)
		go func() {
			defer func() { s.running.Add(-1); s.active.Done() }()
			s.handle(c, w)
		}()
	}
}

// maxChatter bounds the messages a control connection may send that are
// not tests (debug toggles, passphrases, CPU rate and system queries): a
// peer that only chats is cut.
const maxChatter = 16

// handle serves one control connection: netperf's messages until the
// client closes it, each test (DO_OMNI) in turn, as netserver does (netperf
// runs each iteration of -i on the same connection).
func (s *Server) handle(c net.Conn, w *waiter) {
	peer := c.RemoteAddr().String()
	defer c.Close()
	defer func() {
		if r := recover(); r != nil {
			s.Log.Printf("%s: internal error (test dropped): %v\n%s", peer, r, debug.Stack())
		}
	}()
	m, err := wire.Read(c)
	if why := s.lim.asked(w); why != "" && err != nil {
		// Nothing was asked, so nothing says whether the client would
		// take the reason in words: netperf's refusal only.
		s.Log.Printf("%s: %s", peer, why)
		c.SetDeadline(time.Now().Add(time.Second))
		wire.Write(c, wire.ErrorResponse(wire.OmniResponseType, int32(unix.EBUSY)))
		return
	}
	for chatter := 0; ; {
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.Log.Printf("%s: %v", peer, err)
			}
			return
		}
		if m.Type == wire.DoOmni {
			if !s.serveOmni(c, m, w.key, peer) {
				return
			}
		} else {
			if chatter++; chatter > maxChatter {
				s.Log.Printf("%s: %d messages and no test; dropped", peer, chatter)
				return
			}
			if err := answer(c, m); err != nil {
				s.Log.Printf("%s: %v", peer, err)
				return
			}
		}
		c.SetDeadline(time.Now().Add(s.RequestWait))
		m, err = wire.Read(c)
	}
}

// answer replies to a message that is not a test, as netserver does.
func answer(c net.Conn, m *wire.Message) error {
	switch m.Type {
	case wire.DebugOn, wire.DebugOff:
		return wire.Write(c, &wire.Message{Type: wire.DebugOK})
	case wire.Passphrase:
		return nil // netserver takes a passphrase only when started with one, and answers nothing
	case wire.CPUCalibrate:
		// /proc/stat's method needs no calibration; netserver sends its
		// clock's ticks per second.
		return wire.Write(c, wire.CPURateResponse(100, int32(hostInfo().CPUs)))
	case wire.DoSysinfo:
		return wire.Write(c, wire.SysinfoResponseMessage())
	}
	return wire.Write(c, wire.ErrorResponse(m.Type, wire.UnknownTestErrno))
}

// session is one test's control connection, and what its client offered.
type session struct {
	c   net.Conn
	ext uint32 // the extension flags both ends took up
	// stage is the type of the message due next: a refusal is that type
	// with an errno.
	stage int32
}

// refuse tells the client the test cannot go on: netperf's way (an errno
// in the response due), and the reason in words when the client offered
// to take it.
func (ss *session) refuse(errno unix.Errno, why string) {
	ss.c.SetDeadline(time.Now().Add(time.Second))
	m := wire.ErrorResponse(ss.stage, int32(errno))
	if ss.ext != 0 {
		wire.PutExt(m, wire.Ext{Flags: ss.ext})
	}
	if wire.Write(ss.c, m) == nil && ss.ext&wire.ExtErrors != 0 {
		WriteMsg(ss.c, &Message{Type: MsgError, Error: why})
	}
}

// serveOmni runs one DO_OMNI test; it reports whether the connection may
// carry another.
func (s *Server) serveOmni(c net.Conn, m *wire.Message, key, peer string) bool {
	ss := &session{c: c, stage: wire.OmniResponseType}
	ext, hasExt, eerr := wire.GetExt(m)
	if hasExt {
		ss.ext = ext.Flags & (wire.ExtResults | wire.ExtDone | wire.ExtErrors)
	}
	req, err := decodeRequest(m, ext, hasExt)
	if err == nil {
		err = eerr
	}
	if err != nil {
		s.Log.Printf("%s: bad request: %v", peer, err)
		ss.refuse(unix.EINVAL, err.Error())
		return false
	}
	t, err := s.lim.admit(key, bufferBytes(req))
	if err != nil {
		s.Log.Printf("%s: %s refused: %v", peer, req.Test, err)
		ss.refuse(unix.EBUSY, err.Error())
		return false
	}
	defer t.release()
	if err := s.run(ss, req, t); err != nil {
		s.Log.Printf("%s: %s: %v", peer, req.Test, err)
		ss.refuse(errnoOf(err), err.Error())
		return false
	}
	s.Log.Printf("%s: %s done", peer, req.Test)
	return true
}

func decodeRequest(m *wire.Message, ext wire.Ext, hasExt bool) (*Request, error) {
	o, err := wire.DecodeOmniRequest(m)
	if err != nil {
		return nil, err
	}
	req, err := requestFromOmni(o, ext, hasExt, m.Aux)
	if err != nil {
		return nil, err
	}
	return req, req.Validate()
}

// errnoOf is the errno a failed test reports to netperf: the system
// call's, or EIO.
func errnoOf(err error) unix.Errno {
	var en unix.Errno
	if errors.As(err, &en) {
		return en
	}
	return unix.EIO
}

// run opens the data socket, serves the test and reports the results.
func (s *Server) run(ss *session, req *Request, sl *slot) error {
	c := ss.c
	limit := cutOffAfter(req.Duration)
	c.SetDeadline(time.Now().Add(limit))
	// Bound before the data socket opens, so that a bad CPU is the answer
	// to the request. The data loop runs on this goroutine.
	if req.BindCPU != nil {
		release, err := bindThread(*req.BindCPU)
		if err != nil {
			return err
		}
		defer release()
	}
	ip := localIP(c.LocalAddr())
	if req.BindIP.IsValid() {
		ip = net.IP(req.BindIP.AsSlice())
	}
	data, err := openServerData(req, ip)
	if err != nil {
		return fmt.Errorf("data socket: %w", err)
	}
	defer data.close()
	data.slot, data.startWait = sl, s.StartTimeout
	data.doneByClient = ss.ext&wire.ExtDone != 0
	if req.Test == UDPMaerts {
		if err := data.sendTo(req, localIP(c.RemoteAddr())); err != nil {
			return err
		}
	}

	p := phase{locked: req.BindCPU != nil, bufs: req.bufs, pace: newPacer(req.Interval, req.Burst)}
	p.bufs.sendWidth, p.bufs.recvWidth = req.SendWidth, req.RecvWidth
	// A cut ends the data loop, whatever it waits for, and the wait for
	// the client's next message.
	sl.onCut(func() {
		p.stop.Store(true)
		p.over.Store(true)
		data.wake()
		c.SetReadDeadline(time.Now())
	})
	resp := omniResponse(req, data)
	m := resp.Encode(0)
	if ss.ext != 0 {
		wire.PutExt(m, wire.Ext{Flags: ss.ext})
	}
	if err := wire.Write(c, m); err != nil {
		return err
	}
	ss.stage = wire.OmniResultsType
	// The watcher reads the control connection during the test. A client
	// that took up ExtDone says "done" when its loop ends, which ends the
	// passive loops (UDP, CRR); netperf says nothing until the results,
	// so for it anything read, or the connection dropping, means the
	// client is gone and the test is abandoned.
	doneCh := make(chan error, 1)
	go func() {
		err := watchControl(c, data.doneByClient)
		if err != nil && !errors.Is(err, errWatchEnded) {
			p.stop.Store(true)
		}
		doneCh <- err
	}()
	timer := time.AfterFunc(limit, func() { p.stop.Store(true) })
	defer timer.Stop()

	ifname := ifaceFor(ip)
	ifA, _ := ReadIface(ifname)
	cpuA, _ := cpustat.Take()
	t, err := data.serve(req, &p, doneCh)
	cpuB, _ := cpustat.Take()
	ifB, _ := ReadIface(ifname)
	if why := sl.cutWhy(); why != "" {
		return errors.New(why)
	}
	if err != nil {
		return err
	}
	var derr error
	if data.doneByClient {
		// The client says done as soon as its loop ends.
		c.SetReadDeadline(time.Now().Add(s.RequestWait))
		derr = <-doneCh
	} else {
		derr = endWatch(c, doneCh)
	}
	if why := sl.cutWhy(); why != "" {
		return errors.New(why)
	}
	if derr != nil {
		return fmt.Errorf("client vanished: %w", derr)
	}
	res := &SideResults{Bytes: t.Bytes, Messages: t.Messages, Transactions: t.Transactions, Elapsed: t.elapsed(),
		SndBuf: data.snd, RcvBuf: data.rcv, Host: hostInfo(), Retrans: data.retrans, CongControl: data.cong}
	if req.RecordCPU {
		u := cpustat.Between(cpuA, cpuB)
		res.CPU = &u
	}
	if ifname != "" {
		res.Iface = ifaceDelta(ifname, ifA, ifB, cpuB.At.Sub(cpuA.At).Seconds())
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := wire.Write(c, omniResults(req, res, t, int32(data.retrans), data.cong).Encode()); err != nil {
		return err
	}
	if ss.ext&wire.ExtResults != 0 {
		return WriteMsg(c, &Message{Type: MsgResults, Results: res})
	}
	return nil
}

// errWatchEnded is the watcher's end when the server stopped it.
var errWatchEnded = errors.New("watch ended")

// watchControl waits for the client's done (doneByClient) or for anything
// at all from a client that says nothing during a test.
func watchControl(c net.Conn, doneByClient bool) error {
	if doneByClient {
		m, err := ReadMsg(c)
		if err == nil && m.Type != MsgDone {
			err = fmt.Errorf("expected done, got %q", m.Type)
		}
		return err
	}
	var b [1]byte
	n, err := c.Read(b[:])
	var ne net.Error
	switch {
	case n > 0:
		return errors.New("the client sent a message in the middle of the test")
	case errors.As(err, &ne) && ne.Timeout():
		return errWatchEnded
	}
	return err
}

// endWatch stops the watcher of a client that says nothing during a test;
// an error is the client gone before it.
func endWatch(c net.Conn, doneCh chan error) error {
	c.SetReadDeadline(time.Now())
	err := <-doneCh
	c.SetReadDeadline(time.Time{})
	if errors.Is(err, errWatchEnded) {
		return nil
	}
	return err
}

// omniResponse is the answer to the request: where the data socket is and
// what the netserver granted.
func omniResponse(req *Request, d *serverData) *wire.OmniResponse {
	r := &wire.OmniResponse{RecvBufSize: int32(d.rcv), SendBufSize: int32(d.snd), DataPort: uint32(d.port), SocketPrio: -1, SocketTOS: int32(req.TOS),
		RecvSize: int32(req.RecvSize), SendSize: int32(req.SendSize), RecvWidth: int32(rrWidth(req.RecvWidth, 1)), SendWidth: int32(rrWidth(req.SendWidth, 1))}
	switch req.Test {
	case TCPStream:
		r.RecvSize = int32(orDefault(req.RecvSize, d.rcv))
		r.RecvWidth = int32(streamWidth(req.RecvWidth, 0, int(r.RecvSize)))
	case TCPMaerts:
		r.SendSize = int32(orDefault(req.SendSize, d.snd))
		r.SendWidth = int32(streamWidth(req.SendWidth, 0, int(r.SendSize)))
	case UDPMaerts:
		r.SendWidth = int32(streamWidth(req.SendWidth, 0, req.SendSize))
	case TCPRR, TCPCRR, UDPRR:
		r.RecvSize, r.SendSize = int32(req.ReqSize), int32(req.RespSize)
	}
	if req.Burst > 0 {
		r.IntervalBurst, r.IntervalUsecs = uint32(req.Burst), uint32(req.Interval.Microseconds())
	}
	if req.RecordCPU {
		r.Flags |= wire.FlagMeasureCPU
		r.CPURate = 100
	}
	if req.NoDelay {
		r.Flags |= wire.FlagNoDelay
	}
	if req.Duration > 0 {
		r.TestLength = uint32(math.Ceil(req.Duration.Seconds()))
	}
	return r
}

// serverData is the server's end of the data path.
type serverData struct {
	ln   int   // the TCP listener, -1 for UDP
	udp  *sock // the UDP socket
	port int
	opts sockOpts
	v6   bool
	// The data socket's buffers: the listener's, which an accepted
	// socket inherits, and then the accepted socket's.
	snd, rcv int

	slot      *slot
	startWait time.Duration // for the data connection
	// doneByClient: the client says done on the control connection (the
	// extension); netperf's own client does not, and the passive loops
	// end by themselves (a zero-length datagram, or time).
	doneByClient bool
	// What the data connection reported at its end.
	retrans int64
	cong    string

	// mu orders wake against close: once closed, a descriptor's number
	// may already belong to another test's socket.
	mu     sync.Mutex
	closed bool
}

// openServerData makes the data socket. Its options are set on the
// listener, and the socket the client's connection is accepted on inherits
// them (TestAcceptedSocketsInheritOptions), so a TCP_CRR test sets none
// per connection.
func openServerData(req *Request, ip net.IP) (*serverData, error) {
	o := sockOpts{snd: req.SndBuf, rcv: req.RcvBuf, tos: req.TOS, cong: req.CongControl, noDelay: req.NoDelay, family: req.Family,
		prio: req.Prio, keep: req.KeepAlive, fastOpen: req.FastOpen}
	d := &serverData{ln: -1, retrans: -1, opts: o}
	addr, _ := netip.AddrFromSlice(ip)
	typ := unix.SOCK_STREAM
	if isUDP(req.Test) {
		typ = unix.SOCK_DGRAM
	}
	fd, port, err := listenData(typ, req.Family, addr.Unmap(), req.DataPort, o)
	if err != nil {
		return nil, err
	}
	d.port = port
	if sa, err := unix.Getsockname(fd); err == nil {
		_, d.v6 = sa.(*unix.SockaddrInet6)
	}
	if typ == unix.SOCK_DGRAM {
		d.udp = &sock{fd: fd}
		d.snd, d.rcv = d.udp.bufSizes()
		return d, nil
	}
	d.ln = fd
	d.snd, d.rcv = (&sock{fd: fd}).bufSizes()
	return d, nil
}

// sendTo connects the UDP socket of a test where the netserver sends to
// the client's data socket. The datagrams go only to the host that asked
// for the test (netperf's netserver sends wherever the request says, and
// so can be made to flood a third party): the request's address must be
// the control connection's, or none.
func (d *serverData) sendTo(req *Request, ctlPeer net.IP) error {
	peer, _ := netip.AddrFromSlice(ctlPeer)
	peer = peer.Unmap()
	if req.PeerIP.IsValid() && !req.PeerIP.IsUnspecified() && req.PeerIP.Unmap() != peer {
		return fmt.Errorf("%w: the netserver sends datagrams only to the host that asked for the test (%s, not %s)", unix.EPERM, peer, req.PeerIP)
	}
	if req.PeerPort == 0 {
		return fmt.Errorf("%w: the request names no port to send datagrams to", unix.EINVAL)
	}
	sa, _ := unix.Getsockname(d.udp.fd)
	domain := unix.AF_INET
	if _, v6 := sa.(*unix.SockaddrInet6); v6 {
		domain = unix.AF_INET6
	}
	if err := d.udp.connect(newEndpoint(netip.AddrPortFrom(peer, uint16(req.PeerPort)), domain), connectTimeout, nil); err != nil {
		return fmt.Errorf("data socket: connect to %s port %d: %w", peer, req.PeerPort, err)
	}
	return nil
}

func (d *serverData) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.ln >= 0 {
		unix.Close(d.ln)
	}
	if d.udp != nil {
		d.udp.Close()
	}
}

// wake ends a passive loop's blocked call at once: a receive on the UDP
// socket returns nothing, an accept on the listener fails (a listener
// shut down stops listening).
func (d *serverData) wake() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if d.udp != nil {
		d.udp.wakeReader()
	}
	if d.ln >= 0 {
		_ = unix.Shutdown(d.ln, unix.SHUT_RD)
	}
}

// accept takes the data connection, giving up after startWait or when the
// client is gone.
func (d *serverData) accept(p *phase) (*sock, error) {
	deadline := time.Now().Add(d.startWait)
	s := &sock{fd: -1}
	for {
		fd, err := s.acceptFrom(d.ln)
		if err == nil {
			s.fd = fd
			if err := d.opts.applyMarks(fd, d.v6); err != nil {
				s.Close()
				return nil, err
			}
			d.snd, d.rcv = s.bufSizes()
			return s, nil
		}
		if !interrupted(err) {
			return nil, os.NewSyscallError("accept", err)
		}
		if p.stop.Load() || time.Now().After(deadline) {
			return nil, errors.New("the client never opened the data connection")
		}
	}
}

func (d *serverData) serve(req *Request, p *phase, doneCh chan error) (tally, error) {
	// For the passive loops, the client's done message is the end when
	// it sends one. The loop is woken at once rather than at its next
	// poll: the server's CPU and interface rates are taken over its own
	// window, and up to a poll interval of idle time in it would dilute
	// them. netperf's own client ends a UDP test with zero-length
	// datagrams, which the loops watch for, and a TCP_CRR test by time.
	endOnDone := func(drain time.Duration) {
		go func() {
			err := <-doneCh
			if drain > 0 && err == nil {
				time.Sleep(drain) // datagrams still in flight
			}
			p.over.Store(true)
			d.wake()
			doneCh <- err // hand it on to run
		}()
	}
	if !d.doneByClient {
		endOnDone = func(time.Duration) {}
		if req.Duration > 0 && (req.Test == UDPStream || req.Test == UDPRR) {
			// Should netperf's zero-length datagrams be lost, netserver's
			// own bound.
			t := time.AfterFunc(req.Duration+padTime, func() { p.over.Store(true); d.wake() })
			defer t.Stop()
		}
	}
	switch req.Test {
	case UDPStream, UDPRR, TCPCRR, UDPMaerts:
		d.slot.watch(p.count.Load)
	}
	switch req.Test {
	case UDPStream:
		endOnDone(50 * time.Millisecond)
		return udpRecv(d.udp, req.RecvSize, p)
	case UDPRR:
		endOnDone(0)
		return udpRRServer(d.udp, req.ReqSize, req.RespSize, req.Connected, p)
	case TCPCRR:
		endOnDone(0)
		return d.serveCRR(req, p)
	case UDPMaerts:
		t, err := udpSend(d.udp, req.SendSize, streamWidth(req.SendWidth, 0, req.SendSize), req.Duration, req.Count, p)
		d.udp.endUDP()
		return t, err
	}
	s, err := d.accept(p)
	if err != nil {
		return tally{}, err
	}
	defer func() {
		d.retrans, d.cong = s.tcpInfo()
		s.Close()
	}()
	d.slot.watch(tcpMoved(s.fd, p.count.Load))
	defer d.slot.unwatch() // before the descriptor closes
	s.noYield = p.locked
	switch req.Test {
	case TCPStream:
		size := orDefault(req.RecvSize, d.rcv)
		width := streamWidth(req.RecvWidth, 0, size)
		d.slot.resize(int64(size * width))
		return streamRecv(s, size, width, p)
	case TCPMaerts:
		size := orDefault(req.SendSize, d.snd)
		width := streamWidth(req.SendWidth, 0, size)
		d.slot.resize(int64(size * width))
		return streamSend(s, size, width, req.Duration, req.Count, p)
	case TCPRR:
		return rrServer(s, req.ReqSize, req.RespSize, p)
	}
	return tally{}, fmt.Errorf("test %s not served", req.Test)
}

// crrIdle is how long a TCP_CRR netserver whose client says nothing at
// the end waits, once the test's length has passed, for one more
// connection before it takes the test as over. netserver itself waits
// until the length and PAD_TIME have passed.
const crrIdle = 250 * time.Millisecond

// serveCRR answers one connection at a time until the client is done.
// The calls are raw, as in the other request/response loops: one sock
// holds the slot and each connection's descriptor in turn.
func (d *serverData) serveCRR(req *Request, p *phase) (tally, error) {
	rq, rs := p.recvRing(req.ReqSize, rrWidth(req.RecvWidth, req.ReqSize)), p.sendRing(req.RespSize, rrWidth(req.SendWidth, req.RespSize))
	t := tally{Start: time.Now()}
	end := time.Time{}
	if !d.doneByClient && req.Duration > 0 {
		end = t.Start.Add(req.Duration)
	}
	s := &sock{fd: -1}
	defer s.useRaw(rawForLatency)()
	s.noYield = p.locked
	timeout := pollInterval // the listener's, which bounds each accept
	lastConn := t.Start
	for !p.over.Load() && !p.stop.Load() && (req.Count == 0 || t.Transactions < req.Count) {
		wait := pollInterval
		if !end.IsZero() && time.Now().After(end) {
			wait = crrIdle
		}
		if wait != timeout {
			tv := unix.NsecToTimeval(wait.Nanoseconds())
			_ = unix.SetsockoptTimeval(d.ln, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
			timeout = wait
		}
		fd, err := s.acceptFrom(d.ln)
		if err != nil {
			// A timeout, or a signal: the runtime signals a goroutine in
			// a raw call every 10 ms or so, so an accept may never see
			// its timeout; the clock says whether netperf has stopped.
			if interrupted(err) {
				now := time.Now()
				if !end.IsZero() && (now.After(end.Add(padTime)) || now.After(end) && now.Sub(lastConn) >= crrIdle) {
					break // netperf's client has stopped connecting
				}
				continue
			}
			if p.over.Load() {
				continue // the listener was shut down to end the test
			}
			t.End = time.Now()
			return t, os.NewSyscallError("accept", err)
		}
		lastConn = time.Now()
		s.fd = fd
		if err := d.opts.applyMarks(fd, d.v6); err != nil {
			s.closeFD()
			t.End = time.Now()
			return t, err
		}
		if n, err := s.readFull(rq.next(), &p.stop); err == nil && n == req.ReqSize {
			if _, err := s.write(rs.next(), &p.stop); err == nil {
				t.transaction(req.ReqSize+req.RespSize, 0, false, p)
				t.End = time.Now()
			}
		}
		s.closeFD()
		p.pace.wait()
	}
	if t.End.IsZero() {
		t.End = time.Now()
	}
	return t, nil
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	if def <= 0 || def > 1<<20 {
		return 64 << 10
	}
	return def
}
