package netperf

import (
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// phase is the shared state of one end's data phase.
type phase struct {
	stop  atomic.Bool  // abort: the peer vanished or the test ran out of time
	over  atomic.Bool  // this end has sent what it was asked to
	count atomic.Int64 // bytes or transactions so far, read by interim reports
	// locked: the data loop's goroutine is locked to a bound thread (the
	// netserver's -T). A yield there hands the thread off and back, two
	// context switches, so raw loops leave it to the runtime's preemption
	// every 10 ms instead of yielding every few milliseconds.
	locked bool
	// bufs: how the data loop's buffers are laid out and filled (-a,
	// -o, -F); the zero value is Go's own allocation, zeroed.
	bufs bufLayout
	// lossAfter is how long a UDP_RR response may take before it counts
	// as lost (-e); 0 is one poll interval.
	lossAfter time.Duration
}

// bufLayout is netperf's buffer alignment, offset and fill.
type bufLayout struct {
	sendAlign, sendOffset, recvAlign, recvOffset int
	fill                                         []byte
}

// maxAlign bounds -a and -o, as netperf's MAXALIGNMENT and MAXOFFSET.
const (
	maxAlign  = 16384
	maxOffset = 4096
)

// aligned is an n-byte buffer whose start is offset bytes past a
// multiple of align.
func aligned(n, align, offset int) []byte {
	if align <= 1 && offset == 0 {
		return make([]byte, n)
	}
	align = max(align, 1)
	raw := make([]byte, n+align+offset)
	skip := (align - int(uintptr(unsafe.Pointer(&raw[0]))%uintptr(align))) % align
	return raw[skip+offset : skip+offset+n : skip+offset+n]
}

// sendBuf is a buffer to send from, filled from -F's file if given.
func (p *phase) sendBuf(n int) []byte {
	b := aligned(n, p.bufs.sendAlign, p.bufs.sendOffset)
	for i := 0; len(p.bufs.fill) > 0 && i < n; i += len(p.bufs.fill) {
		copy(b[i:], p.bufs.fill)
	}
	return b
}

// recvBuf is a buffer to receive into.
func (p *phase) recvBuf(n int) []byte { return aligned(n, p.bufs.recvAlign, p.bufs.recvOffset) }

// endAfter marks the phase over after d (0: never by time).
func (p *phase) endAfter(d time.Duration) func() {
	if d <= 0 {
		return func() {}
	}
	t := time.AfterFunc(d, func() { p.over.Store(true) })
	return func() { t.Stop() }
}

// tally is what a data loop did.
type tally struct {
	Bytes, Messages, Transactions, Lost int64
	Start, End                          time.Time
	Latencies                           []time.Duration
}

func (t *tally) elapsed() float64 { return t.End.Sub(t.Start).Seconds() }

// transaction records one completed request/response of size bytes.
func (t *tally) transaction(size int, latency time.Duration, keep bool, p *phase) {
	if keep && len(t.Latencies) < maxLatencySamples {
		t.Latencies = append(t.Latencies, latency)
	}
	t.Transactions++
	t.Bytes += int64(size)
	p.count.Store(t.Transactions)
}

// errMidTransaction is a peer that closed between a request and its response.
var errMidTransaction = errors.New("server closed the connection mid-transaction")

// maxLatencySamples bounds memory for very long RR tests (8 bytes each).
const maxLatencySamples = 20_000_000

// streamSend writes size-byte messages until the duration passes or count
// bytes are sent, then sends FIN.
func streamSend(s *sock, size int, d time.Duration, count int64, p *phase) (tally, error) {
	buf := p.sendBuf(size)
	t := tally{Start: time.Now()}
	cancel := p.endAfter(d)
	defer cancel()
	defer s.useRaw(rawForCPU)()
	for !p.over.Load() {
		chunk := buf
		if count > 0 {
			if left := count - t.Bytes; left <= 0 {
				break
			} else if left < int64(len(chunk)) {
				chunk = chunk[:left]
			}
		}
		// The end of the test also ends a write that waits for room: a
		// receiver that stopped reading must not hold the sender past it.
		n, err := s.write(chunk, &p.stop, &p.over)
		t.Bytes += int64(n)
		if errors.Is(err, errStopped) && p.over.Load() && !p.stop.Load() {
			break
		}
		if err != nil {
			t.End = time.Now()
			return t, err
		}
		t.Messages++
		p.count.Store(t.Bytes)
	}
	t.End = time.Now()
	return t, s.CloseWrite()
}

// streamRecv reads size-byte chunks until the sender's FIN. Its clock runs
// from the first byte to the last.
func streamRecv(s *sock, size int, p *phase) (tally, error) {
	buf := p.recvBuf(size)
	var t tally
	defer s.useRaw(rawForCPU)()
	for {
		n, err := s.read(buf, &p.stop)
		if err != nil {
			t.End = time.Now()
			return t, err
		}
		if n == 0 {
			t.End = time.Now()
			if t.Start.IsZero() {
				t.Start = t.End
			}
			return t, nil
		}
		if t.Start.IsZero() {
			t.Start = time.Now()
		}
		t.Bytes += int64(n)
		t.Messages++
		p.count.Store(t.Bytes)
	}
}

// rrClient runs request/response transactions on one connection, timing each.
func rrClient(s *sock, req, resp int, d time.Duration, count int64, p *phase, keep bool) (tally, error) {
	rq, rs := p.sendBuf(req), p.recvBuf(resp)
	t := tally{Start: time.Now()}
	if keep {
		t.Latencies = make([]time.Duration, 0, expectedSamples(d, count))
	}
	defer s.useRaw(rawForLatency)()
	deadline := deadlineOf(t.Start, d)
	begin := t.Start
	for !p.over.Load() && (count == 0 || t.Transactions < count) && begin.Before(deadline) {
		if _, err := s.write(rq, &p.stop); err != nil {
			t.End = time.Now()
			return t, err
		}
		n, err := s.readFull(rs, &p.stop)
		if err != nil || n < resp {
			t.End = time.Now()
			if err == nil {
				err = errMidTransaction
			}
			return t, err
		}
		end := time.Now()
		t.transaction(req+resp, end.Sub(begin), keep, p)
		begin = end
	}
	t.End = time.Now()
	return t, s.CloseWrite()
}

// expectedSamples sizes the latency buffer up front, so that it does not
// grow (copying, and waking the garbage collector) in the middle of a test.
func expectedSamples(d time.Duration, count int64) int {
	n := int64(d.Seconds() * 150_000) // a generous transaction rate
	if count > 0 {
		n = count
	}
	return int(min(max(n, 1<<12), maxLatencySamples))
}

// deadlineOf is when a timed loop ends; a count-bound loop has none.
func deadlineOf(start time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return start.Add(100 * 365 * 24 * time.Hour)
	}
	return start.Add(d)
}

// rrServer answers requests until the client's FIN.
func rrServer(s *sock, req, resp int, p *phase) (tally, error) {
	rq, rs := p.recvBuf(req), p.sendBuf(resp)
	defer s.useRaw(rawForLatency)()
	t := tally{Start: time.Now()}
	for {
		n, err := s.readFull(rq, &p.stop)
		if err != nil || n < req {
			t.End = time.Now()
			return t, err // n < req with no error: the client is done
		}
		if _, err := s.write(rs, &p.stop); err != nil {
			t.End = time.Now()
			return t, err
		}
		t.transaction(req+resp, 0, false, p)
	}
}

// crrClient opens a connection per transaction: connect, request, response, close.
func crrClient(dial func() (*sock, error), req, resp int, d time.Duration, count int64, p *phase, keep bool) (tally, error) {
	rq, rs := p.sendBuf(req), p.recvBuf(resp)
	t := tally{Start: time.Now()}
	cancel := p.endAfter(d)
	defer cancel()
	for !p.over.Load() && !p.stop.Load() && (count == 0 || t.Transactions < count) {
		begin := time.Now()
		s, err := dial()
		if err != nil {
			t.End = time.Now()
			return t, err
		}
		_, err = s.write(rq, &p.stop)
		var n int
		if err == nil {
			n, err = s.readFull(rs, &p.stop)
		}
		s.Close()
		if err != nil || n < resp {
			t.End = time.Now()
			if err == nil {
				err = errMidTransaction
			}
			return t, err
		}
		t.transaction(req+resp, time.Since(begin), keep, p)
	}
	t.End = time.Now()
	return t, nil
}

// udpSend sends size-byte datagrams until the duration passes or count
// bytes are sent. A full queue (ENOBUFS) or a refused port loses the
// datagram, as on a real network.
func udpSend(s *sock, size int, d time.Duration, count int64, p *phase) (tally, error) {
	buf := p.sendBuf(size)
	t := tally{Start: time.Now()}
	cancel := p.endAfter(d)
	defer cancel()
	for !p.over.Load() && !p.stop.Load() && (count == 0 || t.Bytes < count) {
		n, err := unix.Write(s.fd, buf)
		switch err {
		case nil:
			t.Bytes += int64(n)
			t.Messages++
			p.count.Store(t.Bytes)
		case unix.ENOBUFS, unix.ECONNREFUSED, unix.EAGAIN, unix.EINTR:
			t.Lost++
		default:
			t.End = time.Now()
			return t, err
		}
	}
	t.End = time.Now()
	return t, nil
}

// udpRecv counts datagrams until the phase is marked over, or a
// zero-length datagram, netperf's end of a UDP test, arrives.
func udpRecv(s *sock, size int, p *phase) (tally, error) {
	buf := p.recvBuf(max(size, 65536))
	var t tally
	for {
		n, _, err := s.recvfrom(buf, &p.over)
		if errors.Is(err, errStopped) || err == nil && n == 0 {
			break
		}
		if err != nil {
			return t, err
		}
		now := time.Now()
		if t.Start.IsZero() {
			t.Start = now
		}
		t.End = now
		t.Bytes += int64(n)
		t.Messages++
		p.count.Store(t.Bytes)
	}
	return t, nil
}

// udpRRClient sends a request datagram and waits for the response; a lost
// one is counted after the socket's receive timeout and the test goes on.
func udpRRClient(s *sock, req, resp int, d time.Duration, count int64, p *phase, keep bool) (tally, error) {
	rq, rs := p.sendBuf(req), p.recvBuf(max(resp, 65536))
	t := tally{Start: time.Now()}
	cancel := p.endAfter(d)
	defer cancel()
	for !p.over.Load() && !p.stop.Load() && (count == 0 || t.Transactions < count) {
		begin := time.Now()
		if _, err := unix.Write(s.fd, rq); err != nil && err != unix.ENOBUFS && err != unix.ECONNREFUSED {
			t.End = time.Now()
			return t, err
		}
		_, err := unix.Read(s.fd, rs)
		// A signal is not an answer, and a poll's timeout is a chance to
		// stop, not yet a loss: the response is lost once -e's time (or
		// one poll) has passed.
		for (err == unix.EINTR || err == unix.EAGAIN && time.Since(begin) < p.lossAfter) && !p.stop.Load() && !p.over.Load() {
			_, err = unix.Read(s.fd, rs)
		}
		if err == unix.EAGAIN || err == unix.ECONNREFUSED || err == unix.EINTR {
			if p.over.Load() || p.stop.Load() {
				break // the test ended while the response was on its way
			}
			t.Lost++
			continue
		}
		if err != nil {
			t.End = time.Now()
			return t, err
		}
		t.transaction(req+resp, time.Since(begin), keep, p)
	}
	t.End = time.Now()
	return t, nil
}

// udpRRServer answers each request datagram with a response until over.
// connect: netperf's -N.
func udpRRServer(s *sock, req, resp int, connect bool, p *phase) (tally, error) {
	rq, rs := p.recvBuf(max(req, 65536)), p.sendBuf(resp)
	t := tally{Start: time.Now()}
	for {
		n, from, err := s.recvfrom(rq, &p.over)
		if errors.Is(err, errStopped) || err == nil && n == 0 {
			break // stopped, or netperf's zero-length end of the test
		}
		if connect && err == nil {
			// netperf's -N: the socket is connected to the client once it
			// has heard from it.
			if err := unix.Connect(s.fd, from); err != nil {
				t.End = time.Now()
				return t, err
			}
			connect = false
		}
		if err != nil {
			t.End = time.Now()
			return t, err
		}
		if err := unix.Sendto(s.fd, rs, 0, from); err != nil && err != unix.ENOBUFS {
			t.End = time.Now()
			return t, err
		}
		t.transaction(req+resp, 0, false, p)
	}
	t.End = time.Now()
	return t, nil
}
