package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
