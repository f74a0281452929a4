package api

import (
	"fmt"
	"log"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/quote"
)

// refusals logs refused requests and connection errors, bounded: a client
// that sends thousands of bad requests, or of broken TLS handshakes, must
// not fill the disk the server's log goes to. In each window the first
// few are logged one by one; the rest are counted by reason, and said in
// one line when the window ends.
type refusals struct {
	log    *log.Logger
	window time.Duration
	burst  int

	mu      sync.Mutex
	start   time.Time
	logged  int
	skipped map[string]int
	timer   *time.Timer
	closed  bool
}

const (
	refusalWindow = time.Minute
	refusalBurst  = 20
)

func newRefusals(l *log.Logger) *refusals {
	return &refusals{log: l, window: refusalWindow, burst: refusalBurst, skipped: map[string]int{}}
}

// note logs line, or counts it under reason when the window's lines are
// used up.
func (f *refusals) note(reason, line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if f.start.IsZero() || now.Sub(f.start) >= f.window {
		f.flushLocked()
		f.start, f.logged = now, 0
	}
	if f.logged < f.burst {
		f.logged++
		f.log.Print(line)
		return
	}
	if len(f.skipped) == 0 && !f.closed {
		f.timer = time.AfterFunc(f.window-now.Sub(f.start), f.flush)
	}
	f.skipped[reason]++
}

// flush says what was counted and not logged.
func (f *refusals) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushLocked()
}

func (f *refusals) flushLocked() {
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if len(f.skipped) == 0 {
		return
	}
	total := 0
	var parts []string
	for reason, n := range f.skipped {
		total += n
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(parts)
	f.log.Printf("and %d more in the last %s, not logged one by one: %s", total, f.window, strings.Join(parts, ", "))
	f.skipped = map[string]int{}
}

// close says what is still counted and stops the timer.
func (f *refusals) close() {
	f.flush()
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

// connectionErrors is the http.Server's error log (TLS handshakes that
// failed, and the like) through the same bound.
type connectionErrors struct{ f *refusals }

func (c connectionErrors) Write(p []byte) (int, error) {
	c.f.note("connection errors", quote.Escape(strings.TrimRight(string(p), "\n")))
	return len(p), nil
}
