package reconcile

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/spectest"
	"github.com/vnet-project/vnet/internal/store"
	"golang.org/x/sys/unix"
)

// The engine's own work for a one-VM change at 1,000 VMs, as a server
// keeps it warm (a Memo, one store), with a dataplane without a kernel
// (memDP): what an apply reads and plans before its first step, and what
// it does after the record is written. The kernel's and the store's parts
// are bench/warm.py's.
//
//	go test -run XXX -bench ApplyOneVM ./internal/reconcile

// oneVMSpecs are spectest.VMs(n) and the same with one VM more.
func oneVMSpecs(tb testing.TB, n int) (without, with *spec.Document) {
	tb.Helper()
	src := spectest.VMs(n)
	more := append(bytes.Clone(src), fmt.Sprintf("  - {name: vm%d, host: h1, nics: [{portgroup: pg, ip: 10.200.0.1/8}]}\n", n+1)...)
	load := func(src []byte) *spec.Document {
		doc, err := spec.Load("big.yaml", src)
		if err != nil {
			tb.Fatal(err)
		}
		return doc
	}
	return load(src), load(more)
}

// phaseClock is an engine's Trace that times, to the microsecond, when
// each of its stopwatch's laps ended (the stopwatch itself prints tenths
// of a millisecond).
type phaseClock struct {
	start, startCPU time.Duration
	laps            []lap
}

// lap is when a lap ended, since the clock began: in time and in the CPU
// time of the thread that applies (the benchmark locks it to its thread),
// which other processes' load on the machine does not inflate as they do
// the time, nor the collector's work for the store's garbage running
// beside it.
type lap struct {
	label   string
	at, cpu time.Duration
}

// now is the time and the thread's CPU time.
func now() (at, cpu time.Duration) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(time.Now().UnixNano()), time.Duration(ts.Nano())
}

func (c *phaseClock) Write(p []byte) (int, error) {
	if _, label, ok := strings.Cut(string(p), " ms  "); ok {
		at, cpu := now()
		c.laps = append(c.laps, lap{label, at - c.start, cpu - c.startCPU})
	}
	return len(p), nil
}

func (c *phaseClock) begin() {
	c.start, c.startCPU = now()
	c.laps = c.laps[:0]
}

// since is the time and CPU time since the clock began.
func (c *phaseClock) since() lap {
	at, cpu := now()
	return lap{at: at - c.start, cpu: cpu - c.startCPU}
}

// at is the first lap whose label begins with prefix.
func (c *phaseClock) at(tb testing.TB, prefix string) lap {
	for _, l := range c.laps {
		if strings.HasPrefix(l.label, prefix) {
			return l
		}
	}
	tb.Fatalf("no lap %q", prefix)
	return lap{}
}

// phases adds up, over a benchmark's applies, the time and CPU time until
// the plan was made and after the record was written, and the CPU time
// of each lap until the plan, by the first word of its label.
type phases struct {
	planned, afterRecord lap
	laps                 map[string]time.Duration
	// namespaces is the CPU time of working out the namespaces' IDs the
	// record keeps, after the steps.
	namespaces time.Duration
	n          int // applies added up
}

func (p *phases) add(tb testing.TB, c *phaseClock) {
	end := c.since()
	p.n++
	planned, recorded := c.at(tb, "read and planned"), c.at(tb, "record: the store")
	p.planned.at += planned.at
	p.planned.cpu += planned.cpu
	p.afterRecord.at += end.at - recorded.at
	p.afterRecord.cpu += end.cpu - recorded.cpu
	if p.laps == nil {
		p.laps = map[string]time.Duration{}
	}
	var last time.Duration
	inPlan := true // the laps until the plan, then those after it
	for _, l := range c.laps {
		switch {
		case inPlan:
			p.laps[strings.Fields(l.label)[0]] += l.cpu - last
		case strings.HasPrefix(l.label, "record: the namespaces"):
			p.namespaces += l.cpu - last
		}
		inPlan = inPlan && l != planned
		last = l.cpu
	}
}

// report gives the phases per apply added up.
func (p *phases) report(b *testing.B) {
	n := float64(p.n)
	b.ReportMetric(float64(p.planned.at.Microseconds())/n, "planned-µs/op")
	b.ReportMetric(float64(p.planned.cpu.Microseconds())/n, "planned-cpu-µs/op")
	b.ReportMetric(float64(p.afterRecord.at.Microseconds())/n, "after-record-µs/op")
	b.ReportMetric(float64(p.afterRecord.cpu.Microseconds())/n, "after-record-cpu-µs/op")
	b.ReportMetric(float64(p.namespaces.Microseconds())/n, "namespace-ids-cpu-µs/op")
	if testing.Verbose() {
		for label, cpu := range p.laps {
			b.Logf("%-8s %6.0f cpu-µs/op", label, float64(cpu.Microseconds())/n)
		}
	}
}

// warmEngine is an engine that applied doc, as a server's does.
func warmEngine(tb testing.TB, doc *spec.Document) (*Engine, *phaseClock) {
	tb.Helper()
	st, err := store.OpenBolt(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	clock := &phaseClock{}
	e := &Engine{DP: newMemDP(), Store: st, Log: io.Discard, Memo: &Memo{}, NumCPU: 2, Trace: clock}
	if _, err := e.Apply(doc); err != nil {
		tb.Fatal(err)
	}
	return e, clock
}

func BenchmarkApplyOneVM1000(b *testing.B) {
	without, with := oneVMSpecs(b, 1000)
	b.Run("add or remove", func(b *testing.B) {
		applyInTurn(b, without, with, func(Result) {})
	})
	// The same applies, the phases of one kind alone.
	b.Run("phases of an add", func(b *testing.B) {
		applyInTurnPhases(b, without, with, 0, func(Result) {})
	})
	b.Run("phases of a removal", func(b *testing.B) {
		applyInTurnPhases(b, without, with, 1, func(Result) {})
	})
	b.Run("the same spec", func(b *testing.B) {
		// Each apply sends the spec anew, as a client does: the same
		// bytes, decoded again.
		again, _ := oneVMSpecs(b, 1000)
		applyInTurn(b, without, again, func(res Result) {
			if !res.Plan.Empty() {
				b.Fatalf("planned %s", res.Plan)
			}
		})
	})
}

// applyInTurn applies first, then next and first in turn, timing each
// apply but the first, and checks each result with check.
func applyInTurn(b *testing.B, first, next *spec.Document, check func(Result)) {
	applyInTurnPhases(b, first, next, -1, check)
}

// applyInTurnPhases is applyInTurn that adds up the phases only of the
// applies of next (of 0), of first (of 1), or of both (of -1).
func applyInTurnPhases(b *testing.B, first, next *spec.Document, of int, check func(Result)) {
	runtime.LockOSThread() // for its CPU time (phaseClock)
	defer runtime.UnlockOSThread()
	e, clock := warmEngine(b, first)
	var ph phases
	docs := [2]*spec.Document{next, first}
	i := 0
	for b.Loop() {
		e.DP.(*memDP).begin()
		clock.begin()
		res, err := e.Apply(docs[i%2])
		if err != nil {
			b.Fatal(err)
		}
		if of < 0 || i%2 == of {
			ph.add(b, clock)
		}
		check(res)
		i++
	}
	ph.report(b)
}
