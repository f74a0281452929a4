package netperf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"runtime/debug"
	"strconv"
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

func (s *Server) handle(c net.Conn, w *waiter) {
	peer := c.RemoteAddr().String()
	defer c.Close()
	defer func() {
		if r := recover(); r != nil {
			s.Log.Printf("%s: internal error (test dropped): %v\n%s", peer, r, debug.Stack())
		}
	}()
	refuse := func(msg string) {
		c.SetDeadline(time.Now().Add(time.Second))
		WriteMsg(c, &Message{Type: MsgError, Error: msg})
	}
	m, err := ReadMsg(c)
	if why := s.lim.asked(w); why != "" && err != nil {
		s.Log.Printf("%s: %s", peer, why)
		refuse(why)
		return
	}
	if err != nil {
		if !errors.Is(err, io.EOF) {
			s.Log.Printf("%s: %v", peer, err)
			WriteMsg(c, &Message{Type: MsgError, Error: err.Error()})
		}
		return
	}
	if err := checkRequest(m); err != nil {
		s.Log.Printf("%s: bad request: %v", peer, err)
		WriteMsg(c, &Message{Type: MsgError, Error: err.Error()})
		return
	}
	req := m.Request
	t, err := s.lim.admit(w.key, bufferBytes(req))
	if err != nil {
		s.Log.Printf("%s: %s refused: %v", peer, req.Test, err)
		refuse(err.Error())
		return
	}
	defer t.release()
	if err := s.run(c, req, t); err != nil {
		s.Log.Printf("%s: %s: %v", peer, req.Test, err)
		refuse(err.Error())
		return
	}
	s.Log.Printf("%s: %s done", peer, req.Test)
}

func checkRequest(m *Message) error {
	if m.Type != MsgRequest {
		return fmt.Errorf("expected a request, got %q", m.Type)
	}
	if m.Version != ProtocolVersion {
		return fmt.Errorf("protocol version %d, this server speaks %d", m.Version, ProtocolVersion)
	}
	return m.Request.Validate()
}

// run opens the data socket, serves the test and reports the results.
func (s *Server) run(c net.Conn, req *Request, sl *slot) error {
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
	data, err := openServerData(req, ip)
	if err != nil {
		return fmt.Errorf("data socket: %w", err)
	}
	defer data.close()
	data.slot, data.startWait = sl, s.StartTimeout

	p := phase{locked: req.BindCPU != nil}
	// A cut ends the data loop, whatever it waits for, and the wait for
	// the client's next message.
	sl.onCut(func() {
		p.stop.Store(true)
		p.over.Store(true)
		data.wake()
		c.SetReadDeadline(time.Now())
	})
	if err := WriteMsg(c, &Message{Type: MsgReady, Ready: &Ready{DataPort: data.port, SndBuf: data.snd, RcvBuf: data.rcv}}); err != nil {
		return err
	}
	// The watcher reads the client's next control message. "done" ends the
	// passive loops (UDP, CRR); anything else, or the connection dropping,
	// means the client is gone and the test is abandoned.
	doneCh := make(chan error, 1)
	go func() {
		m, err := ReadMsg(c)
		if err == nil && m.Type != MsgDone {
			err = fmt.Errorf("expected done, got %q", m.Type)
		}
		if err != nil {
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
	// The client says done as soon as its loop ends.
	c.SetReadDeadline(time.Now().Add(s.RequestWait))
	derr := waitDone(doneCh, &p)
	if why := sl.cutWhy(); why != "" {
		return errors.New(why)
	}
	if derr != nil {
		return fmt.Errorf("client vanished: %w", derr)
	}
	res := &SideResults{Bytes: t.Bytes, Messages: t.Messages, Transactions: t.Transactions, Elapsed: t.elapsed(),
		SndBuf: data.snd, RcvBuf: data.rcv, Host: hostInfo()}
	if req.RecordCPU {
		u := cpustat.Between(cpuA, cpuB)
		res.CPU = &u
	}
	if ifname != "" {
		res.Iface = ifaceDelta(ifname, ifA, ifB, cpuB.At.Sub(cpuA.At).Seconds())
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return WriteMsg(c, &Message{Type: MsgResults, Results: res})
}

// waitDone waits for the client's done message. (The passive loops take it
// first and hand it on.)
func waitDone(doneCh chan error, _ *phase) error { return <-doneCh }

// serverData is the server's end of the data path.
type serverData struct {
	ln       *net.TCPListener
	udp      *sock
	port     int
	snd, rcv int

	slot      *slot
	startWait time.Duration // for the data connection

	// mu orders wake against close: once closed, the UDP socket's
	// descriptor number may already belong to another test's socket.
	mu     sync.Mutex
	closed bool
}

func openServerData(req *Request, ip net.IP) (*serverData, error) {
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(req.DataPort))
	lc := net.ListenConfig{Control: setBuffers(req.SndBuf, req.RcvBuf)}
	d := &serverData{}
	if req.Test == UDPStream || req.Test == UDPRR {
		pc, err := lc.ListenPacket(context.Background(), network("udp", req.Family), addr)
		if err != nil {
			return nil, err
		}
		uc := pc.(*net.UDPConn)
		d.port = uc.LocalAddr().(*net.UDPAddr).Port
		if d.udp, err = blocking(uc, uc); err != nil {
			return nil, err
		}
		d.snd, d.rcv = d.udp.bufSizes()
		return d, nil
	}
	ln, err := lc.Listen(context.Background(), network("tcp", req.Family), addr)
	if err != nil {
		return nil, err
	}
	d.ln = ln.(*net.TCPListener)
	d.port = d.ln.Addr().(*net.TCPAddr).Port
	d.snd, d.rcv = req.SndBuf, req.RcvBuf // replaced by the accepted socket's
	return d, nil
}

func (d *serverData) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.ln != nil {
		d.ln.Close()
	}
	if d.udp != nil {
		d.udp.Close()
	}
}

// wake ends a passive loop's blocked call at once: a receive on the UDP
// socket returns nothing, an accept on the listener fails.
func (d *serverData) wake() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if d.udp != nil {
		d.udp.wakeReader()
	}
	if d.ln != nil {
		d.ln.Close()
	}
}

// accept takes the data connection, giving up after startWait or when the
// client is gone.
func (d *serverData) accept(p *phase) (*sock, error) {
	deadline := time.Now().Add(d.startWait)
	for {
		d.ln.SetDeadline(time.Now().Add(pollInterval))
		c, err := d.ln.AcceptTCP()
		if err == nil {
			s, err := blocking(c, c)
			if err == nil {
				d.snd, d.rcv = s.bufSizes()
			}
			return s, err
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return nil, err
		}
		if p.stop.Load() || time.Now().After(deadline) {
			return nil, errors.New("the client never opened the data connection")
		}
	}
}

func (d *serverData) serve(req *Request, p *phase, doneCh chan error) (tally, error) {
	// For the passive loops, the client's done message is the end. The
	// loop is woken at once rather than at its next poll: the server's CPU
	// and interface rates are taken over its own window, and up to a poll
	// interval of idle time in it would dilute them.
	endOnDone := func(drain time.Duration) {
		go func() {
			err := <-doneCh
			if drain > 0 && err == nil {
				time.Sleep(drain) // datagrams still in flight
			}
			p.over.Store(true)
			d.wake()
			doneCh <- err // hand it on to waitDone
		}()
	}
	switch req.Test {
	case UDPStream, UDPRR, TCPCRR:
		d.slot.watch(p.count.Load)
	}
	switch req.Test {
	case UDPStream:
		endOnDone(50 * time.Millisecond)
		return udpRecv(d.udp, req.RecvSize, p)
	case UDPRR:
		endOnDone(0)
		return udpRRServer(d.udp, req.ReqSize, req.RespSize, p)
	case TCPCRR:
		endOnDone(0)
		return d.serveCRR(req, p)
	}
	s, err := d.accept(p)
	if err != nil {
		return tally{}, err
	}
	defer s.Close()
	d.slot.watch(tcpMoved(s.fd, p.count.Load))
	defer d.slot.unwatch() // before the descriptor closes
	s.noYield = p.locked
	switch req.Test {
	case TCPStream:
		size := orDefault(req.RecvSize, d.rcv)
		d.slot.resize(int64(size))
		return streamRecv(s, size, p)
	case TCPMaerts:
		size := orDefault(req.SendSize, d.snd)
		d.slot.resize(int64(size))
		return streamSend(s, size, req.Duration, req.Count, p)
	case TCPRR:
		return rrServer(s, req.ReqSize, req.RespSize, p)
	}
	return tally{}, fmt.Errorf("test %s not served", req.Test)
}

// serveCRR answers one connection at a time until the client is done.
func (d *serverData) serveCRR(req *Request, p *phase) (tally, error) {
	rq, rs := make([]byte, req.ReqSize), make([]byte, req.RespSize)
	t := tally{Start: time.Now()}
	for !p.over.Load() && !p.stop.Load() {
		d.ln.SetDeadline(time.Now().Add(pollInterval))
		c, err := d.ln.AcceptTCP()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || p.over.Load() {
				continue // over: the listener was closed to end the test
			}
			t.End = time.Now()
			return t, err
		}
		s, err := blocking(c, c)
		if err != nil {
			continue
		}
		if n, err := s.readFull(rq, &p.stop); err == nil && n == len(rq) {
			if _, err := s.write(rs, &p.stop); err == nil {
				t.transaction(len(rq)+len(rs), 0, false, p)
			}
		}
		s.Close()
	}
	t.End = time.Now()
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
