package spec

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// What loading a large spec costs (docs/benchmarks.md):
//
//	go test -run '^$' -bench Load -benchmem ./internal/spec

// vmsSpec is one host with one private switch and n VMs of one vNIC each.
func vmsSpec(n int) []byte {
	var b strings.Builder
	b.WriteString("name: big\nhosts:\n  - name: h1\nswitches:\n  - name: sw0\n    hosts: [h1]\n    portgroups: [{name: pg}]\nvms:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {name: vm%d, host: h1, nics: [{portgroup: pg, ip: 10.100.%d.%d/8}]}\n", i, i/250%256, i%250+1)
	}
	return []byte(b.String())
}

var benchSpecs = []struct {
	name string
	src  func() []byte
}{
	{"1000VMs", func() []byte { return vmsSpec(1000) }},
	{"10000Networks", func() []byte { return GeneratedNetworks(10000) }},
}

func BenchmarkLoad(b *testing.B) {
	for _, bs := range benchSpecs {
		src := bs.src()
		b.Run(bs.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := Load("big.yaml", src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, bs := range benchSpecs {
		src := bs.src()
		b.Run(bs.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Decode("big.yaml", src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	for _, bs := range benchSpecs {
		doc, err := Decode("big.yaml", bs.src())
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bs.name, func(b *testing.B) {
			for b.Loop() {
				if errs := Validate(doc); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}

// BenchmarkCachedLoad loads a spec the cache holds, from memory and from
// its file in a new process's cache.
func BenchmarkCachedLoad(b *testing.B) {
	for _, bs := range benchSpecs {
		src := bs.src()
		dir := b.TempDir()
		if _, err := NewCache(dir).Load("big.yaml", src); err != nil {
			b.Fatal(err)
		}
		b.Run(bs.name+"/memory", func(b *testing.B) {
			c := NewCache("")
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
				if _, err := NewCache(dir).Load("big.yaml", src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPinVNIs pins the VNIs of a spec whose networks leave them out,
// as an apply does: the first time, and again with the VNIs stored before.
func BenchmarkPinVNIs(b *testing.B) {
	doc, err := Load("big.yaml", GeneratedNetworks(10000))
	if err != nil {
		b.Fatal(err)
	}
	pinned, err := PinVNIs(doc, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name     string
		previous *Spec
	}{{"10000Networks/first", nil}, {"10000Networks/again", pinned.Spec}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := PinVNIs(doc, bc.previous); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSetVNIC moves one vNIC of 1,000 VMs to another port group, as
// vnet link does.
func BenchmarkSetVNIC(b *testing.B) {
	src := strings.Replace(string(vmsSpec(1000)), "portgroups: [{name: pg}]", "portgroups: [{name: pg}, {name: pg2}]", 1)
	doc, err := Load("big.yaml", []byte(src))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := SetVNIC(doc, "vm500", "eth0", "pg2", true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeValidated makes a spec from the encoding stored beside
// its YAML, as a host agent does with a spec vnet apply --etcd stored.
func BenchmarkDecodeValidated(b *testing.B) {
	for _, bs := range benchSpecs {
		doc, err := Load("big.yaml", bs.src())
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
	src := GeneratedNetworks(10000)
	if err := os.WriteFile(file, src, 0o644); err != nil {
		b.Fatal(err)
	}
	first, err := NewCache(dir + "/cache").LoadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	stored, err := PinVNIs(first, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("10000Networks/unchanged", func(b *testing.B) {
		for b.Loop() {
			doc, err := NewCache(dir + "/cache").LoadFile(file)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := PinVNIs(doc, stored.Spec); err != nil {
				b.Fatal(err)
			}
		}
	})
	more, err := Load("big.yaml", bytes.Replace(src, []byte("networks:\n"), []byte("networks:\n  - {name: new, subnet: 10.200.0.0/24}\n"), 1))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("10000Networks/one-more", func(b *testing.B) {
		for b.Loop() {
			if _, err := PinVNIs(more, stored.Spec); err != nil {
				b.Fatal(err)
			}
		}
	})
	one, err := Load("big.yaml", bytes.Replace(stored.Source, []byte("networks:\n"), []byte("networks:\n  - {name: new, subnet: 10.200.0.0/24}\n"), 1))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("10000Networks/pin-one", func(b *testing.B) {
		for b.Loop() {
			if _, err := PinVNIs(one, stored.Spec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
