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
