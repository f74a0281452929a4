package nstest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Receiver follows what a TCP stream delivers, from the moment the stream
// started, so that tests can see stalls and rates over any stretch of it.
// It counts what the receiving kernel took in (TCP_INFO's bytes_received),
// sampled every Bucket, not what the reading goroutine got: on a busy
// machine a reader that ran late would read a burst of backlog and make a
// stretch look faster than the wire.
type Receiver struct {
	Start    time.Time
	mu       sync.Mutex
	samples  []sample
	accepted time.Duration
	err      error
}

type sample struct {
	at time.Duration // from Start
	n  uint64        // bytes received by then
}

// Bucket is the Receiver's time resolution.
const Bucket = 20 * time.Millisecond

// Stream sends a TCP stream as fast as it can from fromNS to a listener on
// addr (ip:0) in toNS until stop is closed.
func Stream(t testing.TB, fromNS, toNS, addr string, stop <-chan struct{}) *Receiver {
	t.Helper()
	r, err := startStream(t, fromNS, toNS, addr, stop)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startStream is Stream for any goroutine: it returns its error.
func startStream(t testing.TB, fromNS, toNS, addr string, stop <-chan struct{}) (*Receiver, error) {
	var l net.Listener
	if err := Do(t, toNS, func() (err error) { l, err = net.Listen("tcp", addr); return }); err != nil {
		return nil, fmt.Errorf("listen in %s: %w", toNS, err)
	}
	r := &Receiver{Start: time.Now()}
	go r.receive(l)
	c, err := Dial(t, fromNS, l.Addr().String(), net.Dialer{Timeout: 5 * time.Second})
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("dial %s from %s: %w", l.Addr(), fromNS, err)
	}
	go func() {
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(buf); err != nil {
				r.fail(fmt.Errorf("sender: %w", err))
				return
			}
		}
	}()
	return r, nil
}

func (r *Receiver) receive(l net.Listener) {
	c, err := l.Accept()
	l.Close()
	if err != nil {
		r.fail(err)
		return
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		r.fail(err)
		return
	}
	r.mu.Lock()
	r.accepted = time.Since(r.Start)
	r.mu.Unlock()
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(Bucket)
		defer tick.Stop()
		for {
			r.sample(raw)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	buf := make([]byte, 256<<10)
	for {
		_, err := c.Read(buf)
		if err != nil {
			r.sample(raw) // the last bytes, before the socket goes
			close(done)
			<-sampled
			if err != io.EOF {
				r.fail(err)
			}
			return
		}
	}
}

func (r *Receiver) sample(raw syscall.RawConn) {
	var n uint64
	var serr error
	if err := raw.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if serr == nil {
			n = info.Bytes_received
		}
	}); err != nil || serr != nil {
		return // the socket is closing: the last sample stands
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, sample{time.Since(r.Start), n})
}

func (r *Receiver) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// Err is the first error either end saw: a broken connection.
func (r *Receiver) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Since is how long ago the stream started.
func (r *Receiver) Since() time.Duration { return time.Since(r.Start) }

// Accepted is when, from the start, the receiver took the connection; 0
// until it has.
func (r *Receiver) Accepted() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted
}

// Rate is the goodput in bit/s between two offsets from the start. A
// stretch that ends after the last sample ends there.
func (r *Receiver) Rate(from, to time.Duration) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) > 0 {
		to = min(to, r.samples[len(r.samples)-1].at)
	}
	if to <= from {
		return 0
	}
	return float64(r.at(to)-r.at(from)) * 8 / (to - from).Seconds()
}

// at is the byte count at an offset, interpolated between samples.
func (r *Receiver) at(d time.Duration) float64 {
	prev := sample{}
	for _, s := range r.samples {
		if s.at >= d {
			if s.at == prev.at {
				return float64(s.n)
			}
			f := float64(d-prev.at) / float64(s.at-prev.at)
			return float64(prev.n) + f*float64(s.n-prev.n)
		}
		prev = s
	}
	return float64(prev.n)
}

// WaitFor waits until the stream has delivered n bytes, or timeout passes,
// and says whether it did. A test that asks whether a flow gets through
// asks this rather than for a rate from the stream's start, since on a
// loaded machine the first round trips can take a good part of a second.
func (r *Receiver) WaitFor(n int64, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		if r.delivered() >= uint64(n) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func (r *Receiver) delivered() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) == 0 {
		return 0
	}
	return r.samples[len(r.samples)-1].n
}

// LongestGap is the longest stretch between two offsets in which nothing
// was delivered, to within Bucket.
func (r *Receiver) LongestGap(from, to time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) > 0 {
		to = min(to, r.samples[len(r.samples)-1].at)
	}
	var longest time.Duration
	last := from // when the count last moved
	var prev sample
	for _, s := range r.samples {
		if s.at > from && s.at <= to && s.n != prev.n {
			// it moved somewhere since the sample before
			longest = max(longest, max(prev.at, from)-last)
			last = s.at
		}
		prev = s
	}
	return max(longest, to-last)
}

// GoodputWarmup is what Goodput leaves out at a stream's start: slow start
// and the shaper's first burst.
const GoodputWarmup = 500 * time.Millisecond

// Goodput streams TCP as fast as it can from fromNS to a listener on ip in
// toNS for GoodputWarmup plus d, and returns what the receiver took in
// after the warm-up, in bit/s. It reports errors with t.Errorf, so that it
// can run on goroutines of its own beside other streams.
func Goodput(t testing.TB, fromNS, toNS, ip string, d time.Duration) float64 {
	t.Helper()
	stop := make(chan struct{})
	defer close(stop)
	r, err := startStream(t, fromNS, toNS, ip+":0", stop)
	if err != nil {
		t.Errorf("stream %s -> %s: %v", fromNS, ip, err)
		return 0
	}
	for r.Accepted() == 0 {
		if r.Since() > 10*time.Second {
			t.Errorf("stream %s -> %s: not accepted in 10 s", fromNS, ip)
			return 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	from := r.Accepted() + GoodputWarmup
	time.Sleep(from + d + 2*Bucket - r.Since())
	if err := r.Err(); err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("stream %s -> %s: %v", fromNS, ip, err)
	}
	return r.Rate(from, from+d)
}

// Goodputs runs Goodput from each of the namespaces at once, all to a
// listener on ip in toNS, and returns their goodputs in the same order:
// how streams that contend for one path share it.
func Goodputs(t testing.TB, toNS, ip string, d time.Duration, from ...string) []float64 {
	t.Helper()
	out := make([]float64, len(from))
	var wg sync.WaitGroup
	for i, ns := range from {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = Goodput(t, ns, toNS, ip, d)
		}()
	}
	wg.Wait()
	return out
}
