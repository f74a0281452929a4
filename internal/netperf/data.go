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
	// pace: netperf's paced operation (-w, -b): burst sends, then a wait
	// for the next interval.
	pace pacer
}

// bufLayout is netperf's buffer alignment, offset, fill and the widths of
// its buffer rings (-W; 0: netperf's default).
type bufLayout struct {
	sendAlign, sendOffset, recvAlign, recvOffset int
	sendWidth, recvWidth                         int
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

// ring is netperf's ring of buffers: each call takes the next, so that a
// test with a wide ring does not find its data in the cache.
type ring struct {
	bufs [][]byte
	i    int
}

func (r *ring) next() []byte {
	b := r.bufs[r.i]
	if r.i++; r.i == len(r.bufs) {
		r.i = 0
	}
	return b
}

// sendRing is width buffers of n bytes to send from, filled from -F's
// file if given.
func (p *phase) sendRing(n, width int) *ring {
	r := &ring{bufs: make([][]byte, max(width, 1))}
	for k := range r.bufs {
		b := aligned(n, p.bufs.sendAlign, p.bufs.sendOffset)
		for i := 0; len(p.bufs.fill) > 0 && i < n; i += len(p.bufs.fill) {
			copy(b[i:], p.bufs.fill)
		}
		r.bufs[k] = b
	}
	return r
}

// recvRing is width buffers of n bytes to receive into.
func (p *phase) recvRing(n, width int) *ring {
	r := &ring{bufs: make([][]byte, max(width, 1))}
	for k := range r.bufs {
		r.bufs[k] = aligned(n, p.bufs.recvAlign, p.bufs.recvOffset)
	}
	return r
}

// maxRingBytes bounds one ring's memory, whatever its width.
const maxRingBytes = 64 << 20

// streamWidth is a stream's ring width as netperf chooses it: asked (0:
// one more buffer than the socket buffer holds), and never one, capped
// so that the ring stays within maxRingBytes.
func streamWidth(asked, sockBuf, size int) int {
	w := asked
	if w <= 0 {
		w = sockBuf/max(size, 1) + 1
	}
	if w == 1 {
		w = 2
	}
	return max(1, min(w, maxRingBytes/max(size, 1)))
}

// rrWidth is a request/response ring's width: asked, or one.
func rrWidth(asked, size int) int {
	return max(1, min(max(asked, 1), maxRingBytes/max(size, 1)))
}

// pacer is netperf's paced operation: after every burst operations the
// loop waits for the next tick of an interval that runs from the start
// (a tick already past is missed, as netperf's interval timer's is).
type pacer struct {
	interval time.Duration
	burst    int
	left     int
	start    time.Time
}

func newPacer(interval time.Duration, burst int) pacer {
	if burst <= 0 || interval <= 0 {
		return pacer{}
	}
	return pacer{interval: interval, burst: burst, left: burst, start: time.Now()}
}

// wait counts one operation and, at the end of a burst, waits for the
// next tick. It reports whether it waited.
func (pc *pacer) wait() bool {
	if pc.burst == 0 {
		return false
	}
	if pc.left--; pc.left > 0 {
		return false
	}
	pc.left = pc.burst
	since := time.Since(pc.start)
	time.Sleep(pc.interval - since%pc.interval)
	return true
}

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
func streamSend(s *sock, size, width int, d time.Duration, count int64, p *phase) (tally, error) {
	bufs := p.sendRing(size, width)
	t := tally{Start: time.Now()}
	cancel := p.endAfter(d)
	defer cancel()
	defer s.useRaw(rawForCPU)()
	for !p.over.Load() {
		chunk := bufs.next()
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
		p.pace.wait()
	}
	t.End = time.Now()
	return t, s.CloseWrite()
}

// streamRecv reads size-byte chunks until the sender's FIN, or until the
// phase is over (a sender that never ends, as chargen for -N). Its clock
// runs from the first byte to the last.
func streamRecv(s *sock, size, width int, p *phase) (tally, error) {
	bufs := p.recvRing(size, width)
	var t tally
	defer s.useRaw(rawForCPU)()
	for {
		if p.over.Load() {
			t.End = time.Now()
			if t.Start.IsZero() {
				t.Start = t.End
			}
			return t, nil
		}
		n, err := s.read(bufs.next(), &p.stop)
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
		p.pace.wait()
	}
}

// rrClient runs request/response transactions on one connection, timing
// each. With a first burst (-b) it keeps burst more requests outstanding
// than the one it waits for, as netperf does, and times each transaction
// from its request to its response.
func rrClient(s *sock, req, resp int, d time.Duration, count int64, burst int, p *phase, keep bool) (tally, error) {
	rq, rs := p.sendRing(req, rrWidth(p.bufs.sendWidth, req)), p.recvRing(resp, rrWidth(p.bufs.recvWidth, resp))
	t := tally{Start: time.Now()}
	if keep {
		t.Latencies = make([]time.Duration, 0, expectedSamples(d, count))
	}
	defer s.useRaw(rawForLatency)()
	// The end of the test also ends a write that waits for room: with
	// requests outstanding, a write can wait on a netserver that waits
	// for this end to read.
	cancel := p.endAfter(d)
	defer cancel()
	deadline := deadlineOf(t.Start, d)
	sent := newTimeQueue(burst + 1)
	last := t.Start // when the last response came: the next request goes now
	fail := func(err error) (tally, error) {
		t.End = time.Now()
		if errors.Is(err, errStopped) && p.over.Load() && !p.stop.Load() {
			return t, s.CloseWrite()
		}
		return t, err
	}
	for !p.over.Load() && (count == 0 || t.Transactions < count) && last.Before(deadline) {
		for sent.len() < burst {
			if _, err := s.write(rq.next(), &p.stop, &p.over); err != nil {
				return fail(err)
			}
			sent.push(time.Now())
		}
		if _, err := s.write(rq.next(), &p.stop, &p.over); err != nil {
			return fail(err)
		}
		sent.push(last)
		n, err := s.readFull(rs.next(), &p.stop)
		if err != nil || n < resp {
			if err == nil {
				err = errMidTransaction
			}
			return fail(err)
		}
		last = time.Now()
		t.transaction(req+resp, last.Sub(sent.pop()), keep, p)
		if p.pace.wait() {
			last = time.Now()
		}
	}
	t.End = time.Now()
	if err := s.CloseWrite(); err != nil {
		return t, err
	}
	// The responses still on their way, so that the netserver's last
	// writes find this end open.
	for ; sent.len() > 0; sent.pop() {
		if n, err := s.readFull(rs.next(), &p.stop); err != nil || n < resp {
			break
		}
	}
	return t, nil
}

// timeQueue holds the send times of the requests outstanding, oldest
// first.
type timeQueue struct {
	at         []time.Time
	head, size int
}

func newTimeQueue(n int) *timeQueue { return &timeQueue{at: make([]time.Time, n)} }

func (q *timeQueue) len() int { return q.size }

func (q *timeQueue) push(t time.Time) {
	q.at[(q.head+q.size)%len(q.at)] = t
	q.size++
}

func (q *timeQueue) pop() time.Time {
	t := q.at[q.head]
	q.head = (q.head + 1) % len(q.at)
	q.size--
	return t
}

func (q *timeQueue) clear() { q.head, q.size = 0, 0 }

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
	rq, rs := p.recvRing(req, rrWidth(p.bufs.recvWidth, req)), p.sendRing(resp, rrWidth(p.bufs.sendWidth, resp))
	defer s.useRaw(rawForLatency)()
	t := tally{Start: time.Now()}
	for {
		n, err := s.readFull(rq.next(), &p.stop)
		if err != nil || n < req {
			t.End = time.Now()
			return t, err // n < req with no error: the client is done
		}
		if _, err := s.write(rs.next(), &p.stop); err != nil {
			t.End = time.Now()
			return t, err
		}
		t.transaction(req+resp, 0, false, p)
		p.pace.wait()
	}
}

// crrClient opens a connection per transaction: connect, request,
// response, close. first is called with the first connection, before its
// request, and last with the last, before it closes.
func crrClient(k *connector, req, resp int, d time.Duration, count int64, p *phase, keep bool, first, last func(*sock)) (tally, error) {
	rq, rs := p.sendRing(req, rrWidth(p.bufs.sendWidth, req)), p.recvRing(resp, rrWidth(p.bufs.recvWidth, resp))
	t := tally{Start: time.Now()}
	if keep {
		t.Latencies = make([]time.Duration, 0, expectedSamples(d, count))
	}
	cancel := p.endAfter(d)
	defer cancel()
	// One sock for every connection: it holds the raw slot, each
	// connection its descriptor in turn.
	s := &sock{fd: -1}
	defer s.useRaw(rawForLatency)()
	for !p.over.Load() && !p.stop.Load() && (count == 0 || t.Transactions < count) {
		begin := time.Now()
		if err := k.open(s, &p.stop); err != nil {
			t.End = time.Now()
			return t, err
		}
		if first != nil {
			first(s)
			first = nil
		}
		_, err := s.write(rq.next(), &p.stop)
		var n int
		if err == nil {
			n, err = s.readFull(rs.next(), &p.stop)
		}
		if last != nil && (err != nil || p.over.Load() || p.stop.Load() || count > 0 && t.Transactions+1 >= count) {
			last(s)
		}
		s.closeFD()
		if err != nil || n < resp {
			t.End = time.Now()
			if err == nil {
				err = errMidTransaction
			}
			return t, err
		}
		t.transaction(req+resp, time.Since(begin), keep, p)
		p.pace.wait()
	}
	t.End = time.Now()
	return t, nil
}

// udpSend sends size-byte datagrams until the duration passes or count
// bytes are sent. A full queue (ENOBUFS) or a refused port loses the
// datagram, as on a real network.
func udpSend(s *sock, size, width int, d time.Duration, count int64, p *phase) (tally, error) {
	bufs := p.sendRing(size, width)
	t := tally{Start: time.Now()}
	cancel := p.endAfter(d)
	defer cancel()
	for !p.over.Load() && !p.stop.Load() && (count == 0 || t.Bytes < count) {
		n, err := unix.Write(s.fd, bufs.next())
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
		p.pace.wait()
	}
	t.End = time.Now()
	return t, nil
}

// udpRecv counts datagrams until the phase is marked over, or a
// zero-length datagram, netperf's end of a UDP test, arrives.
func udpRecv(s *sock, size int, p *phase) (tally, error) {
	bufs := p.recvRing(max(size, 65536), rrWidth(p.bufs.recvWidth, max(size, 65536)))
	var t tally
	for {
		n, _, err := s.recvfrom(bufs.next(), &p.over)
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
		p.pace.wait()
	}
	return t, nil
}

// udpRRClient sends a request datagram and waits for the response; a lost
// one is counted after the socket's receive timeout and the test goes on.
// With a first burst (-b) it keeps burst more requests outstanding; a
// loss gives them all up, and the next round sends the burst again.
func udpRRClient(s *sock, req, resp int, d time.Duration, count int64, burst int, p *phase, keep bool) (tally, error) {
	rq, rs := p.sendRing(req, rrWidth(p.bufs.sendWidth, req)), p.recvRing(max(resp, 65536), rrWidth(p.bufs.recvWidth, max(resp, 65536)))
	t := tally{Start: time.Now()}
	cancel := p.endAfter(d)
	defer cancel()
	sent := newTimeQueue(burst + 1)
	send := func() error {
		if _, err := unix.Write(s.fd, rq.next()); err != nil && err != unix.ENOBUFS && err != unix.ECONNREFUSED {
			return err
		}
		sent.push(time.Now())
		return nil
	}
	for !p.over.Load() && !p.stop.Load() && (count == 0 || t.Transactions < count) {
		for sent.len() <= burst {
			if err := send(); err != nil {
				t.End = time.Now()
				return t, err
			}
		}
		buf := rs.next()
		_, err := unix.Read(s.fd, buf)
		// A signal is not an answer, and a poll's timeout is a chance to
		// stop, not yet a loss: the response is lost once -e's time (or
		// one poll) has passed.
		for (err == unix.EINTR || err == unix.EAGAIN && time.Since(sent.at[sent.head]) < p.lossAfter) && !p.stop.Load() && !p.over.Load() {
			_, err = unix.Read(s.fd, buf)
		}
		if err == unix.EAGAIN || err == unix.ECONNREFUSED || err == unix.EINTR {
			if p.over.Load() || p.stop.Load() {
				break // the test ended while the response was on its way
			}
			t.Lost += int64(sent.len())
			sent.clear()
			continue
		}
		if err != nil {
			t.End = time.Now()
			return t, err
		}
		t.transaction(req+resp, time.Since(sent.pop()), keep, p)
		p.pace.wait()
	}
	t.End = time.Now()
	return t, nil
}

// udpRRServer answers each request datagram with a response until over.
// connect: netperf's -N.
func udpRRServer(s *sock, req, resp int, connect bool, p *phase) (tally, error) {
	rq, rs := p.recvRing(max(req, 65536), 1), p.sendRing(resp, rrWidth(p.bufs.sendWidth, resp))
	t := tally{Start: time.Now()}
	for {
		n, from, err := s.recvfrom(rq.next(), &p.over)
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
		if err := unix.Sendto(s.fd, rs.next(), 0, from); err != nil && err != unix.ENOBUFS {
			t.End = time.Now()
			return t, err
		}
		t.transaction(req+resp, 0, false, p)
		p.pace.wait()
	}
	t.End = time.Now()
	return t, nil
}
