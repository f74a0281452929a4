package speccache

import (
	"bytes"
	"os"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/spectest"
)

// What loading a large spec through the cache costs (docs/benchmarks.md):
//
//	go test -run '^$' -bench . -benchmem ./internal/spec/speccache

var benchSpecs = []struct {
	name string
	src  func() []byte
}{
	{"1000VMs", func() []byte { return spectest.VMs(1000) }},
	{"10000Networks", func() []byte { return spectest.Networks(10000) }},
}

// BenchmarkCachedLoad loads a spec the cache holds, from memory and from
// its file in a new process's cache.
func BenchmarkCachedLoad(b *testing.B) {
	for _, bs := range benchSpecs {
		src := bs.src()
		dir := b.TempDir()
		if _, err := New(dir).Load("big.yaml", src); err != nil {
			b.Fatal(err)
		}
		b.Run(bs.name+"/memory", func(b *testing.B) {
			c := New("")
			if _, err := c.Load("big.yaml", src); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := c.Load("big.yaml", src); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bs.name+"/file", func(b *testing.B) {
			for b.Loop() {
				if _, err := New(dir).Load("big.yaml", src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeValidated makes a spec from the encoding stored beside
// its YAML, as a host agent does with a spec vnet apply --etcd stored.
func BenchmarkDecodeValidated(b *testing.B) {
	for _, bs := range benchSpecs {
		doc, err := spec.Load("big.yaml", bs.src())
		if err != nil {
			b.Fatal(err)
		}
		encoded := EncodeValidated(doc)
		b.Run(bs.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := DecodeValidated("big.yaml", doc.Source, encoded); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(doc.Source)), "yaml-bytes")
			b.ReportMetric(float64(len(encoded)), "encoded-bytes")
		})
	}
}

// BenchmarkApplyPin is what vnet apply --etcd does with a spec of 10,000
// networks that leave their VNIs out: load it through the cache from a
// file and pin its VNIs against those stored before. "unchanged" applies
// the same file again (the cache holds it); "one more" a file with one
// network added, pinned from its fresh load; "pin one" only pins a spec
// of 10,000 pinned networks and one without a VNI.
func BenchmarkApplyPin(b *testing.B) {
	dir := b.TempDir()
	file := dir + "/big.yaml"
	src := spectest.Networks(10000)
	if err := os.WriteFile(file, src, 0o644); err != nil {
		b.Fatal(err)
	}
	first, err := New(dir + "/cache").LoadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	stored, err := spec.PinVNIs(first, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("10000Networks/unchanged", func(b *testing.B) {
		for b.Loop() {
			doc, err := New(dir + "/cache").LoadFile(file)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := spec.PinVNIs(doc, stored.Spec); err != nil {
				b.Fatal(err)
			}
		}
	})
	more, err := spec.Load("big.yaml", bytes.Replace(src, []byte("networks:\n"), []byte("networks:\n  - {name: new, subnet: 10.200.0.0/24}\n"), 1))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("10000Networks/one-more", func(b *testing.B) {
		for b.Loop() {
			if _, err := spec.PinVNIs(more, stored.Spec); err != nil {
				b.Fatal(err)
			}
		}
	})
	one, err := spec.Load("big.yaml", bytes.Replace(stored.Source, []byte("networks:\n"), []byte("networks:\n  - {name: new, subnet: 10.200.0.0/24}\n"), 1))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("10000Networks/pin-one", func(b *testing.B) {
		for b.Loop() {
			if _, err := spec.PinVNIs(one, stored.Spec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
