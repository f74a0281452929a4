package service

import (
	"bytes"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/spec/spectest"
	"github.com/vnet-project/vnet/internal/store"
)

// BenchmarkEditVMBeforeEngine is what an apply of a one-VM change of
// 1,000 VMs does before the engine's (docs/benchmarks.md has the whole
// change's figures): each part, and all of them as the apply makes them.
func BenchmarkEditVMBeforeEngine(b *testing.B) {
	now, err := spec.Load("api:big", spectest.VMs(1000))
	if err != nil {
		b.Fatal(err)
	}
	rec := &store.Record{Name: now.Spec.Name, SpecFile: now.File, Spec: now.Source, SpecEncoded: speccache.EncodeValidated(now), Generation: 1}
	body := []byte("{host: h1, nics: [{portgroup: pg, ip: 10.200.0.1/8}]}\n")
	entry, err := spec.DecodeVM("api:big", body)
	if err != nil {
		b.Fatal(err)
	}
	e := VMEdit{Infra: "big", VM: "vm500", Entry: entry, File: "api:big"}
	vm, err := e.Written()
	if err != nil {
		b.Fatal(err)
	}
	next, err := e.applyTo(now, vm)
	if err != nil {
		b.Fatal(err)
	}
	l := &Local{}
	l.docs.put(rec, now)
	whole := bytes.Replace(now.Source, []byte("ip: 10.100.2.1/8"), []byte("ip: 10.200.0.1/8"), 1) // vm500's
	if bytes.Equal(whole, now.Source) {
		b.Fatal("no vm500 in the spec")
	}
	steps := []struct {
		name string
		run  func() error
	}{
		// A client's PUT of the whole spec with one VM's address changed.
		{"whole-spec", func() error { _, err := l.Load("api:big", whole); return err }},
		{"whole-spec-loaded", func() error { _, err := spec.Load("api:big", whole); return err }},
		{"entry", func() error { _, err := spec.DecodeVM("api:big", body); return err }},
		// The spec in force, as the server that stored it keeps it, and as
		// one that did not reads it of the record.
		{"spec-in-force", func() error { _, err := l.docOf(rec); return err }},
		{"spec-in-force-unkept", func() error { _, err := (&Local{}).docOf(rec); return err }},
		{"edit", func() error { _, err := e.applyTo(now, vm); return err }},
		{"keep-attached", func() error {
			_, _, err := keepAttached(e.Infra, specWhat(next), next, now, false, true)
			return err
		}},
		{"warnings", func() error { Warnings(next); return nil }},
		{"summary", func() error { summary(now.Spec, next.Spec); return nil }},
		{"all", func() error {
			entry, err := spec.DecodeVM("api:big", body)
			if err != nil {
				return err
			}
			e := VMEdit{Infra: "big", VM: "vm500", Entry: entry, File: "api:big"}
			vm, err := e.Written()
			if err != nil {
				return err
			}
			now, err := l.docOf(rec)
			if err != nil {
				return err
			}
			next, err := e.applyTo(now, vm)
			if err != nil {
				return err
			}
			if next, _, err = keepAttached(e.Infra, specWhat(next), next, now, false, true); err != nil {
				return err
			}
			Warnings(next)
			summary(now.Spec, next.Spec)
			return nil
		}},
	}
	for _, st := range steps {
		b.Run(st.name, func(b *testing.B) {
			for b.Loop() {
				if err := st.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
