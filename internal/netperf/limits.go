package netperf

import (
	"container/heap"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The netserver's admission control. A control connection is first
// waiting (it has not yet sent its request); waiting costs a descriptor
// and a goroutine but no test slot, and the idle caps bound how many such
// connections one client, and all clients, may keep. A valid request then
// takes a test slot and its buffers' share of the memory budget, or is
// refused. A test that holds a slot without moving data is cut after the
// start or stall timeout, and sooner if another request needs its place.

// limits is the bookkeeping behind those rules; one mutex guards it all.
type limits struct {
	cfg *Server

	mu       sync.Mutex
	clients  map[string]*client
	waiting  int
	tests    int
	mem      int64
	released chan struct{} // closed (and replaced) whenever a test ends
}

// client is what one source address holds.
type client struct {
	waiting []*waiter // oldest first
	tests   map[*slot]struct{}
}

// waiter is a control connection that has not yet sent its request.
type waiter struct {
	c     net.Conn
	key   string
	since time.Time
	why   string // set when the idle caps cut it
}

// slot is one admitted test.
type slot struct {
	lim      *limits
	key      string
	mem      int64
	admitted time.Time

	// Guarded by lim.mu.
	progress   func() int64 // bytes moved so far; nil while there is no data socket to ask
	last       int64
	moved      bool
	quietSince time.Time
	stop       func() // ends the test; nil until its data socket is open
	why        string // set when the test was cut
	done       bool
}

func newLimits(s *Server) *limits {
	return &limits{cfg: s, clients: map[string]*client{}, released: make(chan struct{})}
}

// clientKey is the address the per-client caps count by. An IPv6 host
// usually owns a whole /64, so that is one client.
func clientKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return (&net.IPNet{IP: ta.IP.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

func (l *limits) client(key string) *client {
	cl := l.clients[key]
	if cl == nil {
		cl = &client{tests: map[*slot]struct{}{}}
		l.clients[key] = cl
	}
	return cl
}

func (l *limits) forget(key string) {
	if cl := l.clients[key]; cl != nil && len(cl.waiting) == 0 && len(cl.tests) == 0 {
		delete(l.clients, key)
	}
}

// wait records a new control connection.
func (l *limits) wait(c net.Conn) *waiter {
	w := &waiter{c: c, key: clientKey(c.RemoteAddr()), since: time.Now()}
	l.mu.Lock()
	defer l.mu.Unlock()
	cl := l.client(w.key)
	cl.waiting = append(cl.waiting, w)
	l.waiting++
	return w
}

// asked ends a connection's waiting; it returns why the idle caps cut it,
// if they did.
func (l *limits) asked(w *waiter) (cut string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.why != "" {
		return w.why
	}
	l.dropWaiter(w)
	return ""
}

func (l *limits) dropWaiter(w *waiter) {
	cl := l.clients[w.key]
	for i, x := range cl.waiting {
		if x == w {
			cl.waiting = append(cl.waiting[:i], cl.waiting[i+1:]...)
			l.waiting--
			break
		}
	}
	l.forget(w.key)
}

// cutWaiter ends a waiting connection's read at once; its handler tells it why.
func (l *limits) cutWaiter(w *waiter, why string) {
	w.why = why
	l.dropWaiter(w)
	w.c.SetReadDeadline(time.Now())
}

// idleAfter is how long a connection may wait before it counts as idle. A
// burst of legitimate clients is accepted faster than their requests are
// read, so young connections are never cut for the caps.
func (l *limits) idleAfter() time.Duration { return min(time.Second, l.cfg.RequestWait/4) }

// evictAfter is how long a test must have moved nothing before a request
// that needs its place may cut it.
func (l *limits) evictAfter() time.Duration { return min(time.Second, l.cfg.StartTimeout/4) }

// sweepEvery is the period of the sweeper, which enforces the idle caps
// and the data timeouts.
func (l *limits) sweepEvery() time.Duration {
	return min(max(min(l.idleAfter(), l.evictAfter())/4, 5*time.Millisecond), 250*time.Millisecond)
}

// sweep runs until quit is closed.
func (l *limits) sweep(quit <-chan struct{}) {
	t := time.NewTicker(l.sweepEvery())
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case now := <-t.C:
			l.mu.Lock()
			l.cutIdle(now)
			l.watchTests(now)
			l.mu.Unlock()
		}
	}
}

// cutIdle enforces the idle caps: per client, the oldest idle connections
// beyond its cap; overall, the oldest of the client with the most.
func (l *limits) cutIdle(now time.Time) {
	idle := func(cl *client) int {
		n := 0
		for n < len(cl.waiting) && now.Sub(cl.waiting[n].since) >= l.idleAfter() {
			n++
		}
		return n
	}
	var heavy idleHeap
	total := 0
	for key, cl := range l.clients {
		n := idle(cl)
		for ; n > l.cfg.MaxIdlePerClient; n-- {
			l.cutWaiter(cl.waiting[0], fmt.Sprintf("server busy: too many idle control connections from %s (limit %d): this one sent no request", key, l.cfg.MaxIdlePerClient))
		}
		if n > 0 {
			heavy = append(heavy, idleCount{cl, n})
			total += n
		}
	}
	if total <= l.cfg.MaxIdle {
		return
	}
	// Many clients may each keep a few: a heap finds the heaviest at once.
	heap.Init(&heavy)
	for ; total > l.cfg.MaxIdle; total-- {
		top := &heavy[0]
		l.cutWaiter(top.cl.waiting[0], fmt.Sprintf("server busy: too many idle control connections (limit %d): this one sent no request", l.cfg.MaxIdle))
		top.n--
		heap.Fix(&heavy, 0)
	}
}

type idleCount struct {
	cl *client
	n  int
}

// idleHeap puts the client with the most idle connections first.
type idleHeap []idleCount

func (h idleHeap) Len() int           { return len(h) }
func (h idleHeap) Less(i, j int) bool { return h[i].n > h[j].n }
func (h idleHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idleHeap) Push(x any)        { *h = append(*h, x.(idleCount)) }
func (h *idleHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// watchTests notes which tests moved data and cuts those that did not
// start, or stalled, for too long.
func (l *limits) watchTests(now time.Time) {
	for _, cl := range l.clients {
		for t := range cl.tests {
			if t.progress != nil {
				if v := t.progress(); v != t.last {
					t.last, t.moved, t.quietSince = v, true, now
				}
			}
			switch {
			case t.stop == nil || t.why != "":
			case !t.moved && now.Sub(t.admitted) >= l.cfg.StartTimeout:
				t.cut(fmt.Sprintf("no data moved within %v of the request (netserver --start-timeout)", l.cfg.StartTimeout))
			case t.moved && now.Sub(t.quietSince) >= l.cfg.StallTimeout:
				t.cut(fmt.Sprintf("no data moved for %v (netserver --stall-timeout)", l.cfg.StallTimeout))
			}
		}
	}
}

// cut stops the test; lim.mu is held.
func (t *slot) cut(why string) {
	t.why = why
	t.stop()
}

// ErrTooMuchMemory is a request whose buffers alone exceed the budget.
var ErrTooMuchMemory = errors.New("test needs more buffer memory than the netserver allows")

// admit takes a test slot and mem bytes of the budget for a request from
// key, cutting tests that move nothing to make room if it must. It waits a
// little for the cut tests to end.
func (l *limits) admit(key string, mem int64) (*slot, error) {
	if mem > l.cfg.MaxMemory {
		return nil, fmt.Errorf("%w: its buffers take %s, all tests together may hold %s (netserver --max-memory); use smaller messages (-m, -M, -r)",
			ErrTooMuchMemory, mib(mem), mib(l.cfg.MaxMemory))
	}
	deadline := time.Now().Add(evictWait)
	for {
		l.mu.Lock()
		short := l.shortOf(key, mem)
		if short == "" {
			t := &slot{lim: l, key: key, mem: mem, admitted: time.Now()}
			t.quietSince = t.admitted
			l.client(key).tests[t] = struct{}{}
			l.tests++
			l.mem += mem
			l.mu.Unlock()
			return t, nil
		}
		evicting := l.evictFor(key, mem, time.Now())
		released := l.released
		l.mu.Unlock()
		if !evicting {
			return nil, errors.New(short)
		}
		select {
		case <-released:
		case <-time.After(time.Until(deadline)):
			return nil, errors.New(short)
		}
	}
}

// evictWait bounds how long a request waits for the tests it cut to end
// (they notice within a poll interval).
const evictWait = 2 * pollInterval

// shortOf says why a request from key for mem bytes does not fit now, or "".
func (l *limits) shortOf(key string, mem int64) string {
	switch cl := l.clients[key]; {
	case l.tests >= l.cfg.MaxTests:
		return fmt.Sprintf("server busy: %d tests already running (netserver --max-tests)", l.tests)
	case cl != nil && len(cl.tests) >= l.cfg.MaxTestsPerClient:
		return fmt.Sprintf("server busy: %d tests from %s already running (netserver --max-tests-per-client)", len(cl.tests), key)
	case l.mem+mem > l.cfg.MaxMemory:
		return fmt.Sprintf("server busy: this test's buffers take %s and only %s of %s are free (netserver --max-memory); try later or use smaller messages (-m, -M, -r)",
			mib(mem), mib(l.cfg.MaxMemory-l.mem), mib(l.cfg.MaxMemory))
	}
	return ""
}

// evictFor cuts tests that have moved nothing lately, as many as a request
// from key for mem bytes needs, counting those already cut and not yet
// gone. It reports whether the request may fit once they are gone.
func (l *limits) evictFor(key string, mem int64, now time.Time) bool {
	var quiet, going []*slot
	for _, cl := range l.clients {
		for t := range cl.tests {
			switch {
			case t.why != "":
				going = append(going, t)
			case t.stop != nil && now.Sub(t.quietSince) >= l.evictAfter():
				quiet = append(quiet, t)
			}
		}
	}
	// The client with the most tests gives way first, then the test quiet
	// longest.
	sort.Slice(quiet, func(i, j int) bool {
		ni, nj := len(l.clients[quiet[i].key].tests), len(l.clients[quiet[j].key].tests)
		if ni != nj {
			return ni > nj
		}
		return quiet[i].quietSince.Before(quiet[j].quietSince)
	})
	tests, mine, used := l.tests, 0, l.mem
	if cl := l.clients[key]; cl != nil {
		mine = len(cl.tests)
	}
	gone := func(t *slot) {
		tests--
		used -= t.mem
		if t.key == key {
			mine--
		}
	}
	for _, t := range going {
		gone(t)
	}
	fits := func() bool {
		return tests < l.cfg.MaxTests && mine < l.cfg.MaxTestsPerClient && used+mem <= l.cfg.MaxMemory
	}
	var victims []*slot
	for _, t := range quiet {
		if fits() {
			break
		}
		// Only the client's own tests free a place under its own cap.
		if mine >= l.cfg.MaxTestsPerClient && t.key != key {
			continue
		}
		victims = append(victims, t)
		gone(t)
	}
	if !fits() {
		return false
	}
	for _, t := range victims {
		t.cut(fmt.Sprintf("cut: moved no data for %v while another test needed its place", now.Sub(t.quietSince).Round(time.Millisecond)))
	}
	return true
}

// release gives the slot and its memory back.
func (t *slot) release() {
	l := t.lim
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	t.progress, t.stop = nil, nil
	delete(l.clients[t.key].tests, t)
	l.forget(t.key)
	l.tests--
	l.mem -= t.mem
	close(l.released)
	l.released = make(chan struct{})
}

// resize corrects the memory a test holds once its buffers' sizes are known
// (never upwards: admission counted the most they could be).
func (t *slot) resize(mem int64) {
	l := t.lim
	l.mu.Lock()
	defer l.mu.Unlock()
	if mem < t.mem && !t.done {
		l.mem -= t.mem - mem
		t.mem = mem
	}
}

// onCut sets how to stop the test; from then on the test can be cut.
func (t *slot) onCut(stop func()) {
	t.lim.mu.Lock()
	defer t.lim.mu.Unlock()
	t.stop = stop
}

// watch sets how to read the bytes the test has moved; unwatch must be
// called before that stops working (the socket closes).
func (t *slot) watch(progress func() int64) {
	t.lim.mu.Lock()
	defer t.lim.mu.Unlock()
	t.progress = progress
	t.last = progress()
	if t.last > 0 {
		t.moved, t.quietSince = true, time.Now()
	}
}

func (t *slot) unwatch() {
	t.lim.mu.Lock()
	defer t.lim.mu.Unlock()
	t.progress = nil
}

// cutWhy says why the test was cut, or "".
func (t *slot) cutWhy() string {
	t.lim.mu.Lock()
	defer t.lim.mu.Unlock()
	return t.why
}

// tcpMoved is the bytes a TCP socket has received and had acknowledged,
// from the kernel's counters: it moves even while a large message is only
// partly through, and costs the data loop nothing.
func tcpMoved(fd int, fallback func() int64) func() int64 {
	return func() int64 {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return fallback()
		}
		return int64(info.Bytes_received + info.Bytes_acked)
	}
}

// bufferBytes is the most memory the netserver's data loop allocates for a
// request: its rings of buffers (two of a stream's, or as many as -W
// asked; one each way of a request/response test's). A stream size of 0
// takes the socket buffer's size, at most 1 MiB (see orDefault); the test
// is resized once it is known.
func bufferBytes(r *Request) int64 {
	stream := func(n int) int64 {
		if n > 0 {
			return int64(n)
		}
		return 1 << 20
	}
	width := func(asked, def int) int64 {
		if asked > 0 {
			return int64(max(asked, def))
		}
		return int64(def)
	}
	switch r.Test {
	case TCPStream:
		return stream(r.RecvSize) * width(r.RecvWidth, 2)
	case TCPMaerts:
		return stream(r.SendSize) * width(r.SendWidth, 2)
	case UDPStream:
		return int64(max(r.RecvSize, 65536)) * width(r.RecvWidth, 1)
	case UDPMaerts:
		return int64(r.SendSize) * width(r.SendWidth, 2)
	case UDPRR:
		return int64(max(r.ReqSize, 65536)) + int64(r.RespSize)*width(r.SendWidth, 1)
	}
	return int64(r.ReqSize)*width(r.RecvWidth, 1) + int64(r.RespSize)*width(r.SendWidth, 1)
}

func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", (n+1023)>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
