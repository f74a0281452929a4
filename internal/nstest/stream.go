package nstest

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Receiver counts what a TCP stream delivers, in Bucket-long slots from
// the moment the stream started, so that tests can see stalls and rates
// over any stretch of it.
type Receiver struct {
	Start   time.Time
	mu      sync.Mutex
	buckets []int64
	err     error
}

// Bucket is the Receiver's time resolution.
const Bucket = 50 * time.Millisecond

// Stream sends a TCP stream as fast as it can from fromNS to a listener on
// addr (ip:0) in toNS until stop is closed.
func Stream(t testing.TB, fromNS, toNS, addr string, stop <-chan struct{}) *Receiver {
	t.Helper()
	l := Listen(t, toNS, addr)
	r := &Receiver{Start: time.Now()}
	go r.receive(l)
	c, err := Dial(t, fromNS, l.Addr().String(), net.Dialer{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
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
	return r
}

func (r *Receiver) receive(l net.Listener) {
	c, err := l.Accept()
	if err != nil {
		r.fail(err)
		return
	}
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		k, err := c.Read(buf)
		r.mu.Lock()
		i := int(time.Since(r.Start) / Bucket)
		for len(r.buckets) <= i {
			r.buckets = append(r.buckets, 0)
		}
		r.buckets[i] += int64(k)
		r.mu.Unlock()
		if err != nil {
			if err != io.EOF {
				r.fail(err)
			}
			return
		}
	}
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

// Rate is the goodput in bit/s between two offsets from the start.
func (r *Receiver) Rate(from, to time.Duration) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for i := int(from / Bucket); i < int(to/Bucket) && i < len(r.buckets); i++ {
		n += r.buckets[i]
	}
	return float64(n*8) / (to - from).Seconds()
}

// WaitFor waits until the stream has delivered n bytes, or timeout passes,
// and says whether it did. A test that asks whether a flow gets through
// asks this rather than for a rate from the stream's start, since on a
// loaded machine the first round trips can take a good part of a second.
func (r *Receiver) WaitFor(n int64, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		if r.delivered() >= n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func (r *Receiver) delivered() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, b := range r.buckets {
		n += b
	}
	return n
}

// LongestGap is the longest run of slots with nothing delivered between
// two offsets.
func (r *Receiver) LongestGap(from, to time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	longest, run := 0, 0
	for i := int(from / Bucket); i < int(to/Bucket); i++ {
		if i < len(r.buckets) && r.buckets[i] > 0 {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	return time.Duration(longest) * Bucket
}

// GoodputWarmup is what Goodput leaves out at a stream's start: slow start
// and the shaper's first burst.
const GoodputWarmup = 500 * time.Millisecond

// Goodput streams TCP as fast as it can from fromNS to a listener on ip in
// toNS for GoodputWarmup plus d, and returns what the receiver got after
// the warm-up, in bit/s. It reports errors with t.Errorf, so that it can
// run on goroutines of its own beside other streams.
func Goodput(t testing.TB, fromNS, toNS, ip string, d time.Duration) float64 {
	t.Helper()
	var l net.Listener
	if err := Do(t, toNS, func() (err error) { l, err = net.Listen("tcp", ip+":0"); return }); err != nil {
		t.Errorf("listen in %s: %v", toNS, err)
		return 0
	}
	defer l.Close()
	got := make(chan float64, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- 0
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		warm := time.Now().Add(GoodputWarmup)
		var n int64
		var start time.Time
		for {
			k, err := c.Read(buf)
			if time.Now().After(warm) {
				if start.IsZero() {
					start = time.Now()
				}
				n += int64(k)
			}
			if err != nil {
				if start.IsZero() {
					got <- 0
					return
				}
				got <- float64(n*8) / time.Since(start).Seconds()
				return
			}
		}
	}()
	c, err := Dial(t, fromNS, l.Addr().String(), net.Dialer{Timeout: 5 * time.Second})
	if err != nil {
		t.Errorf("dial %s from %s: %v", l.Addr(), fromNS, err)
		return 0
	}
	buf := make([]byte, 64<<10)
	end := time.Now().Add(d + GoodputWarmup)
	for time.Now().Before(end) {
		// A stream that stops moving is an error, not a hang.
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(buf); err != nil {
			c.Close()
			t.Errorf("stream %s -> %s: %v", fromNS, ip, err)
			return 0
		}
	}
	c.Close()
	return <-got
}
