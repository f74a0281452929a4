package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// The store's costs for the record of 1,000 VMs (docs/benchmarks.md, "Scale"):
// go test -run XXX -bench 1000 ./internal/store

// bigRecord is the record of an infrastructure of n VMs on one switch.
func bigRecord(tb testing.TB, n int) *Record {
	tb.Helper()
	var b strings.Builder
	b.WriteString("name: big\nhosts:\n  - name: h1\nswitches:\n  - name: sw0\n    hosts: [h1]\n    portgroups: [{name: pg}]\nvms:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {name: vm%d, host: h1, nics: [{portgroup: pg, ip: 10.100.%d.%d/8}]}\n", i, i/250%256, i%250+1)
	}
	doc, err := spec.Decode("big.yaml", []byte(b.String()))
	if err != nil {
		tb.Fatal(err)
	}
	return &Record{Name: "big", SpecFile: "big.yaml", Spec: []byte(b.String()),
		Realized: plan.Model(doc.Spec, plan.Options{NumCPU: 2}), Generation: 1, AppliedAt: time.Now()}
}

func BenchmarkPut1000(b *testing.B) {
	st, err := OpenBolt(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	rec := bigRecord(b, 1000)
	for b.Loop() {
		if err := st.Put(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet1000(b *testing.B) {
	st, err := OpenBolt(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Put(bigRecord(b, 1000)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := st.Get("big"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen1000(b *testing.B) {
	dir := b.TempDir()
	st, err := OpenBolt(dir)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Put(bigRecord(b, 1000)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := OpenBolt(dir); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHead1000(b *testing.B) {
	st, err := OpenBolt(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Put(bigRecord(b, 1000)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := st.Head("big"); err != nil {
			b.Fatal(err)
		}
	}
}

// A one-VM change at 100 and 1,000 VMs, as an apply through the service
// writes it: the record with the history entry of the change, to the
// file and its good copy.
// go test -run XXX -bench OneVMChange ./internal/store
func BenchmarkOneVMChange(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st, err := OpenBolt(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			recs := []*Record{bigRecord(b, n), bigRecord(b, n+1)}
			gen := 0
			for b.Loop() {
				gen++
				r := recs[gen%2]
				r.Generation = gen
				e := history.Entry{Infra: r.Name, Generation: gen, Verb: history.Apply, Who: "bench", Via: history.API,
					SpecFile: r.SpecFile, Spec: history.Text(r.Spec)}
				if _, err := st.PutWithHistory(r, e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
