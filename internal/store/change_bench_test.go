package store

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/spectest"
)

// BenchmarkRecordChange is the write an apply makes at the end of a change
// of one VM's address at 1,000 VMs: the record as the engine writes it (the
// spec's source, its model, the namespaces' IDs, the build) with the
// history entry of the change, to state.db and its good copy, the history
// at its retention. VNET_BENCH_DIR names where the store goes (default: a
// directory under TMPDIR); on a tmpfs the syncs cost next to nothing, so
// the difference from a disk is what the syncs cost. cpu-ns/op is the CPU
// time the process spent per write.
//
//	go test -run XXX -bench RecordChange ./internal/store
//	VNET_BENCH_DIR=/dev/shm go test -run XXX -bench RecordChange ./internal/store
func BenchmarkRecordChange(b *testing.B) {
	b.Run("address", func(b *testing.B) { benchRecordWrites(b, changeRecords(b, 1000)) })
	// Adding a VM and removing it again, as bench/warm.py's rounds do.
	b.Run("add or remove", func(b *testing.B) { benchRecordWrites(b, addRecords(b, 1000)) })
}

// benchRecordWrites writes recs in turn, as BenchmarkRecordChange says.
func benchRecordWrites(b *testing.B, recs [2]*Record) {
	dir := b.TempDir()
	if d := os.Getenv("VNET_BENCH_DIR"); d != "" {
		var err error
		if dir, err = os.MkdirTemp(d, "vnet-bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	st, err := OpenBolt(dir)
	if err != nil {
		b.Fatal(err)
	}
	// The history at its retention, as on a store in use: every change
	// then drops the oldest entry.
	gen := 0
	put := func() {
		gen++
		r := recs[gen%2]
		r.Generation, r.AppliedAt = gen, time.Now().UTC()
		e := history.Entry{Infra: r.Name, Generation: gen, Verb: history.Apply, Who: "bench", Via: history.API,
			Summary: "vm500 changed", SpecFile: r.SpecFile, Spec: history.Text(r.Spec)}
		if _, err := st.PutWithHistory(r, e); err != nil {
			b.Fatal(err)
		}
	}
	for range history.DefaultMaxEntries + 1 {
		put()
	}
	cpu := cpuTime(b)
	b.ResetTimer()
	for b.Loop() {
		put()
	}
	// The process's CPU time tells vnet's work from the waits for the
	// disk, and from other processes on a busy machine.
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time the process has used, in its threads and the
// kernel's work for them.
func cpuTime(tb testing.TB) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// changeRecords are the records of spectest.VMs(n) before and after one
// VM's address changed, as an engine writes them.
func changeRecords(tb testing.TB, n int) [2]*Record {
	tb.Helper()
	src := spectest.VMs(n)
	vm := n / 2
	old := fmt.Appendf(nil, "{name: vm%d, host: h1, nics: [{portgroup: pg, ip: 10.100.%d.%d/8}]}", vm, vm/250%256, vm%250+1)
	changed := fmt.Appendf(nil, "{name: vm%d, host: h1, nics: [{portgroup: pg, ip: 10.200.%d.%d/8}]}", vm, vm/250%256, vm%250+1)
	if !bytes.Contains(src, old) {
		tb.Fatalf("spectest.VMs(%d) has no %s", n, old)
	}
	return engineRecords(tb, src, bytes.Replace(src, old, changed, 1))
}

// addRecords are the records of spectest.VMs(n) and of the same spec with
// one VM more, as an engine writes them.
func addRecords(tb testing.TB, n int) [2]*Record {
	tb.Helper()
	return engineRecords(tb, spectest.VMs(n), spectest.VMs(n+1))
}

// engineRecords are the records of two specs of spectest.VMs's form as an
// engine writes them: with their models and the namespaces' IDs.
func engineRecords(tb testing.TB, srcs ...[]byte) [2]*Record {
	tb.Helper()
	var out [2]*Record
	for i, s := range srcs {
		doc, err := spec.Decode("big.yaml", s)
		if err != nil {
			tb.Fatal(err)
		}
		ids := &plan.NamespaceIDs{Boot: "2c9e1d0b-7f54-4a4e-9a51-1f0e4f3f9a11", Mark: "vnet-bench", IDs: map[string]uint64{}}
		for j := 1; j <= len(doc.Spec.VMs); j++ {
			ids.IDs[fmt.Sprintf("big-vm%d", j)] = uint64(4096 + j)
		}
		out[i] = &Record{Name: doc.Spec.Name, SpecFile: "big.yaml", Spec: s,
			Realized: plan.Model(doc.Spec, plan.Options{NumCPU: 2}), Engine: "(devel) vcs.revision=0123456789abcdef model=7",
			Namespaces: ids}
	}
	return out
}
