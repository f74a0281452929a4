package reconcile

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/spectest"
	"github.com/vnet-project/vnet/internal/store"
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
	start time.Time
	laps  []lap
}

type lap struct {
	label string
	at    time.Duration // since start
}

func (c *phaseClock) Write(p []byte) (int, error) {
	if _, label, ok := strings.Cut(string(p), " ms  "); ok {
		c.laps = append(c.laps, lap{label, time.Since(c.start)})
	}
	return len(p), nil
}

func (c *phaseClock) begin() { c.start, c.laps = time.Now(), c.laps[:0] }

// at is when the first lap whose label begins with prefix ended.
func (c *phaseClock) at(tb testing.TB, prefix string) time.Duration {
	for _, l := range c.laps {
		if strings.HasPrefix(l.label, prefix) {
			return l.at
		}
	}
	tb.Fatalf("no lap %q", prefix)
	return 0
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
	report := func(b *testing.B, clock *phaseClock, planned, afterRecord time.Duration) {
		n := float64(b.N)
		b.ReportMetric(float64(planned.Microseconds())/n, "planned-µs/op")
		b.ReportMetric(float64(afterRecord.Microseconds())/n, "after-record-µs/op")
	}
	b.Run("add or remove", func(b *testing.B) {
		e, clock := warmEngine(b, without)
		var planned, afterRecord time.Duration
		docs := [2]*spec.Document{with, without}
		i := 0
		for b.Loop() {
			clock.begin()
			if _, err := e.Apply(docs[i%2]); err != nil {
				b.Fatal(err)
			}
			end := time.Since(clock.start)
			planned += clock.at(b, "read and planned")
			afterRecord += end - clock.at(b, "record: the store")
			i++
		}
		report(b, clock, planned, afterRecord)
	})
	b.Run("the same spec", func(b *testing.B) {
		e, clock := warmEngine(b, without)
		// Each apply sends the spec anew, as a client does: the same
		// bytes, decoded again.
		again, _ := oneVMSpecs(b, 1000)
		var planned, afterRecord time.Duration
		docs := [2]*spec.Document{again, without}
		i := 0
		for b.Loop() {
			clock.begin()
			res, err := e.Apply(docs[i%2])
			i++
			if err != nil {
				b.Fatal(err)
			}
			if !res.Plan.Empty() {
				b.Fatalf("planned %s", res.Plan)
			}
			end := time.Since(clock.start)
			planned += clock.at(b, "read and planned")
			afterRecord += end - clock.at(b, "record: the store")
		}
		report(b, clock, planned, afterRecord)
	})
}
