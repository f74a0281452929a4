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
// neither crash the server nor hold a test's resources past its deadlines.
type Server struct {
	Log           *log.Logger
	MaxConcurrent int           // tests at once; more are refused (default 256)
	RequestWait   time.Duration // how long a new connection may take to ask (default 10s)

	once    sync.Once
	slots   chan struct{}
	active  sync.WaitGroup
	running atomic.Int64
}

// Running is how many control connections are being served.
func (s *Server) Running() int { return int(s.running.Load()) }

// How long a client may take to open the data connection.
const acceptWait = 10 * time.Second

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
		if s.MaxConcurrent <= 0 {
			s.MaxConcurrent = 256
		}
		if s.RequestWait <= 0 {
			s.RequestWait = 10 * time.Second
		}
		if s.Log == nil {
			s.Log = log.New(io.Discard, "", 0)
		}
		s.slots = make(chan struct{}, s.MaxConcurrent)
	})
}

// Serve accepts control connections until ctx ends, then waits for the
// running tests to finish.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.init()
	go func() { <-ctx.Done(); ln.Close() }()
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
		select {
		case s.slots <- struct{}{}:
		default:
			s.Log.Printf("%s: refused: %d tests already running", c.RemoteAddr(), s.MaxConcurrent)
			c.SetDeadline(time.Now().Add(time.Second))
			WriteMsg(c, &Message{Type: MsgError, Error: "server busy: too many tests at once"})
			c.Close()
			continue
		}
		s.active.Add(1)
		s.running.Add(1)
		go func() {
			defer func() { <-s.slots; s.running.Add(-1); s.active.Done() }()
			s.handle(c)
		}()
	}
}

func (s *Server) handle(c net.Conn) {
	peer := c.RemoteAddr().String()
	defer c.Close()
	defer func() {
		if r := recover(); r != nil {
			s.Log.Printf("%s: internal error (test dropped): %v\n%s", peer, r, debug.Stack())
		}
	}()
	c.SetDeadline(time.Now().Add(s.RequestWait))
	m, err := ReadMsg(c)
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
	if err := s.run(c, req); err != nil {
		s.Log.Printf("%s: %s: %v", peer, req.Test, err)
		c.SetDeadline(time.Now().Add(time.Second))
		WriteMsg(c, &Message{Type: MsgError, Error: err.Error()})
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
func (s *Server) run(c net.Conn, req *Request) error {
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
	if err := WriteMsg(c, &Message{Type: MsgReady, Ready: &Ready{DataPort: data.port, SndBuf: data.snd, RcvBuf: data.rcv}}); err != nil {
		return err
	}

	p := phase{locked: req.BindCPU != nil}
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
	if err != nil {
		return err
	}
	if derr := waitDone(doneCh, &p); derr != nil {
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

// accept takes the data connection, giving up after acceptWait or when the
// client is gone.
func (d *serverData) accept(p *phase) (*sock, error) {
	deadline := time.Now().Add(acceptWait)
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
	s.noYield = p.locked
	switch req.Test {
	case TCPStream:
		return streamRecv(s, orDefault(req.RecvSize, d.rcv), p)
	case TCPMaerts:
		return streamSend(s, orDefault(req.SendSize, d.snd), req.Duration, req.Count, p)
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
