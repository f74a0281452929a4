package netperf

import (
	"runtime"
	"sync/atomic"
)

// rawSlots bounds the loops that may use raw calls at once. A goroutine
// blocked in a raw call keeps its processor, so more of them than there
// are processors to spare starve each other (and the control goroutines)
// until the runtime preempts them: with eight TCP_RR tests at once on two
// processors the aggregate fell to a quarter and the maximum latency rose
// to 160 ms. Loops beyond the slots use ordinary calls.
var rawSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))

// rawNeed says what a loop gains from raw calls, and so who gives way.
type rawNeed int

const (
	rawNotWanted rawNeed = iota
	// rawForLatency: request/response loops. A blocked ordinary call lets
	// the runtime hand the processor away and take it back, two context
	// switches inside every round trip.
	rawForLatency
	// rawForCPU: stream loops. The same hand-off on every call that blocks
	// (each one at 1 Gbit) costs CPU, which the test reports as its own
	// cost: raw calls cut a 1 Gbit stream's service demand by about 30%.
	// A stream gives its slot up as soon as a latency loop wants one.
	rawForCPU
)

// rrWaiting counts latency loops running without the slot they asked for.
// One netserver serves every test of a lab node, so a stream that started
// first must not keep a round-trip test on ordinary calls.
var rrWaiting atomic.Int32

// useRaw asks for raw calls; the returned function gives back what the
// loop holds.
func (s *sock) useRaw(need rawNeed) (release func()) {
	s.want = need
	s.tryRaw()
	return func() {
		s.dropRaw()
		s.stopWaiting()
		s.want = rawNotWanted
	}
}

func (s *sock) tryRaw() {
	if s.raw || (s.want == rawForCPU && rrWaiting.Load() > 0) {
		return
	}
	select {
	case rawSlots <- struct{}{}:
		s.raw = true
		s.stopWaiting()
	default:
		if s.want == rawForLatency && !s.waiting {
			s.waiting = true
			rrWaiting.Add(1)
		}
	}
}

func (s *sock) stopWaiting() {
	if s.waiting {
		s.waiting = false
		rrWaiting.Add(-1)
	}
}

func (s *sock) dropRaw() {
	if s.raw {
		s.raw = false
		<-rawSlots
	}
}

// rawCallsPerYield is how many calls a loop makes between yields (raw
// loops) or between looks for a free slot (the others): a few milliseconds
// of back-to-back transactions, inside the runtime's 10 ms preemption
// deadline.
const rawCallsPerYield = 256

// beforeCall runs before every data call and says whether to make it raw.
// A stream holding a slot that a latency loop waits for lets it go here,
// within one call. Every rawCallsPerYield calls, a raw loop yields: to the
// runtime a goroutine in a raw call looks like one that never stops
// running, so every 10 ms it sends the thread a preemption signal that
// lands in the middle of a transaction (an EINTR and a retried call),
// about fifty times a second at the netserver (strace). A voluntary yield
// resets that clock and costs well under a microsecond. A loop without a
// slot looks for one instead.
func (s *sock) beforeCall() (raw bool) {
	if s.want == rawNotWanted {
		return false
	}
	if s.raw && s.want == rawForCPU && rrWaiting.Load() > 0 {
		s.dropRaw()
	}
	s.calls++
	if s.calls >= rawCallsPerYield {
		s.calls = 0
		switch {
		case !s.raw:
			s.tryRaw()
		case !s.noYield:
			runtime.Gosched()
		}
	}
	return s.raw
}
