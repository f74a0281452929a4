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
func containers(b *testing.B, n int) *spec.Document { return containersIndexed(b, n).doc }

// containersIndexed is the kept index of attachBench after n ADDs.
func containersIndexed(tb testing.TB, n int) *attachIndex {
	doc, err := spec.Load("cnib.yaml", []byte(attachBench))
	if err != nil {
		tb.Fatal(err)
	}
	x := newAttachIndex(doc).build()
	for i := range n {
		if _, _, err := x.attach(benchAttach(i)); err != nil {
			tb.Fatal(err)
		}
	}
	return x
}

func benchAttach(i int) AttachRequest {
	return AttachRequest{Container: benchContainer(i), Netns: benchContainer(i), Ifname: "eth0",
		PortGroup: "pg-bench", CNI: "bench", Allocate: true}
}

func benchContainer(i int) string { return fmt.Sprintf("cnib-%d", i) }

// BenchmarkAttachSpec is what a container's ADD and DEL do with the spec
// before the engine's apply, with 100, 1,000 and 3,000 containers
// attached: read the spec in force of its record (kept by the process
// that wrote it, or not) and write the VM in or take it out. What grows
// from one count to the next grows with the containers.
func BenchmarkAttachSpec(b *testing.B) {
	for _, n := range []int{100, 1000, 3000} {
		b.Run(fmt.Sprintf("containers=%d", n), func(b *testing.B) { benchAttachSpec(b, n) })
	}
}

func benchAttachSpec(b *testing.B, n int) {
	doc := containers(b, n)
	rec := &store.Record{Name: doc.Spec.Name, SpecFile: doc.File, Spec: doc.Source, SpecEncoded: speccache.EncodeValidated(doc), Generation: 1}
	server := &Local{}
	server.docs.put(rec, doc) // as the server that applied it keeps it (keepApplied)
	kept := newAttachIndex(doc).build()
	read, err := (&Local{}).docOf(rec)
	if err != nil {
		b.Fatal(err)
	}
	// An edit of one VM of the user's beside the containers, whose apply
	// keeps them as they are (keepAttached).
	own := spec.VM{Name: "own", Host: "esx1", NICs: []spec.VNIC{{PortGroup: "pg-bench", IP: "10.62.255.1/16"}}}
	edited, err := spec.EditVMs(read, nil, []spec.VM{own})
	if err != nil {
		b.Fatal(err)
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"spec-in-force", func() error { _, err := server.docOf(rec); return err }},
		{"spec-in-force-unkept", func() error { _, err := (&Local{}).docOf(rec); return err }},
		// As a server makes them: the spec indexed by the change before
		// (attachIndexes), one more container attached and taken out
		// again, so that n stay attached.
		{"plan-attach-detach", func() error {
			next, _, err := kept.attach(benchAttach(n))
			if err != nil || next == nil {
				return fmt.Errorf("attach: %v", err)
			}
			_, _, err = kept.detach(DetachRequest{Infra: "cnib", Container: benchContainer(n), Ifname: "eth0"})
			return err
		}},
		// As a process that made no change before makes them, of the
		// spec it read of the record.
		{"plan-attach-unindexed", func() error { _, _, err := planAttach(read, benchAttach(n)); return err }},
		{"keep-attached", func() error {
			_, _, err := keepAttached("cnib", "api:cnib", edited, read, false, true)
			return err
		}},
		{"plan-detach-unindexed", func() error {
			_, _, err := planDetach(read, DetachRequest{Infra: "cnib", Container: benchContainer(n / 2), Ifname: "eth0"})
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
