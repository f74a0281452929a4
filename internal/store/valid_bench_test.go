package store

import (
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/spec/spectest"
)

// BenchmarkRecordSpec compares what a host agent pays to make the spec of
// a stored record of 10,000 networks: of its encoding as before (trusted),
// of its encoding checked by validation (Valid), and of its YAML.
func BenchmarkRecordSpec(b *testing.B) {
	src := spectest.Networks(10000)
	doc, err := spec.Load("big.yaml", src)
	if err != nil {
		b.Fatal(err)
	}
	rec := &Record{Name: doc.Spec.Name, SpecFile: "big.yaml", Spec: src, SpecEncoded: speccache.EncodeValidated(doc)}
	b.Run("encoding trusted", func(b *testing.B) {
		for b.Loop() {
			if _, err := speccache.DecodeValidated(rec.SpecFile, rec.Spec, rec.SpecEncoded); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding validated", func(b *testing.B) {
		for b.Loop() {
			if _, err := rec.Valid(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("YAML loaded", func(b *testing.B) {
		for b.Loop() {
			if _, err := spec.Load(rec.SpecFile, rec.Spec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
