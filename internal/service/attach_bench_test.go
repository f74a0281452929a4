package service

import (
	"fmt"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
)

// attachBench is bench/cni.py's infrastructure: one port group, on which
// runtimes attach containers with vnet's addresses.
const attachBench = `name: cnib
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: u1, nics: {esx1: vmnic0}}]
    portgroups:
      - {name: pg-bench, subnet: 10.62.0.0/16, gateway: 10.62.0.1}
`

// containers is attachBench with n containers attached, as n ADDs leave
// it.
func containers(b *testing.B, n int) *spec.Document {
	doc, err := spec.Load("cnib.yaml", []byte(attachBench))
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		next, _, err := planAttach(doc, benchAttach(i))
		if err != nil {
			b.Fatal(err)
		}
		doc = next
	}
	return doc
}

func benchAttach(i int) AttachRequest {
	return AttachRequest{Container: fmt.Sprintf("cnib-%d", i), Netns: fmt.Sprintf("cnib-%d", i), Ifname: "eth0",
		PortGroup: "pg-bench", CNI: "bench", Allocate: true}
}

// BenchmarkAttachSpec is what a container's ADD and DEL do with the spec
// before the engine's apply, with 1,000 containers attached: read the
// spec in force of its record (kept by the process that wrote it, or not)
// and write the VM in or take it out.
func BenchmarkAttachSpec(b *testing.B) {
	doc := containers(b, 1000)
	rec := &store.Record{Name: doc.Spec.Name, SpecFile: doc.File, Spec: doc.Source, SpecEncoded: speccache.EncodeValidated(doc), Generation: 1}
	kept := &Local{}
	kept.docs.put(rec, doc) // as the server that applied it keeps it (keepApplied)
	steps := []struct {
		name string
		run  func() error
	}{
		{"spec-in-force", func() error { _, err := kept.docOf(rec); return err }},
		{"spec-in-force-unkept", func() error { _, err := (&Local{}).docOf(rec); return err }},
		{"plan-attach", func() error { _, _, err := planAttach(doc, benchAttach(1000)); return err }},
		{"plan-detach", func() error {
			_, _, err := planDetach(doc, DetachRequest{Infra: "cnib", Container: "cnib-500", Ifname: "eth0"})
			return err
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
