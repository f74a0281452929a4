package service

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// The document kept of a record is given back only for a record of the
// same infrastructure, file and bytes; a spec of the same file with a VM
// changed is read against it as Load reads it.
func TestDocMemo(t *testing.T) {
	doc, err := spec.Load("api:ev", []byte(editVMBase))
	if err != nil {
		t.Fatal(err)
	}
	rec := &store.Record{Name: "ev", SpecFile: "api:ev", Spec: bytes.Clone(doc.Source)}
	var m docMemo
	m.put(rec, doc)
	other := func(change func(r *store.Record)) *store.Record {
		r := *rec
		r.Spec = bytes.Clone(rec.Spec)
		change(&r)
		return &r
	}
	for _, tc := range []struct {
		name string
		rec  *store.Record
		kept bool
	}{
		{"the record", rec, true},
		{"its bytes again", other(func(*store.Record) {}), true},
		{"other bytes", other(func(r *store.Record) { r.Spec[len(r.Spec)-2] = '9' }), false},
		{"another file", other(func(r *store.Record) { r.SpecFile = "ev.yaml" }), false},
		{"another infrastructure", other(func(r *store.Record) { r.Name = "ew" }), false},
		{"damaged", other(func(r *store.Record) { r.Damage = errors.New("torn") }), false},
		{"none", nil, false},
	} {
		got, ok := m.get(tc.rec)
		if ok != tc.kept || ok && got != doc {
			t.Errorf("%s: kept %v, want %v", tc.name, ok, tc.kept)
		}
	}

	// The record's bytes are the memo's own: a buffer the record shared
	// may be reused.
	rec.Spec[0] = 'X'
	if _, ok := m.get(other(func(r *store.Record) { r.Spec[0] = 'n' })); !ok {
		t.Error("a change of the record's buffer changed what is kept")
	}

	// A document that is not the record's is not kept.
	var n docMemo
	n.put(other(func(r *store.Record) { r.Spec = []byte("name: ev\n") }), doc)
	if len(n.byName) != 0 {
		t.Error("a document kept for a record of other bytes")
	}

	changed := bytes.Replace(doc.Source, []byte("10.9.0.2/24"), []byte("10.9.0.3/24"), 1)
	got, ok := m.loadAfter("api:ev", changed)
	want, err := spec.Load("api:ev", changed)
	if !ok || err != nil || got.Spec.VMs[1].NICs[0].IP != want.Spec.VMs[1].NICs[0].IP {
		t.Errorf("a VM changed: read %v, Load %v", ok, err)
	}
	if _, ok := m.loadAfter("other.yaml", changed); ok {
		t.Error("read against the document of another file")
	}
}

// An attachment's apply keeps the spec it applied as the document of the
// record the apply writes (its file and bytes), so the next attachment
// reads it back without decoding; a record of other bytes is decoded.
func TestKeepApplied(t *testing.T) {
	doc := loadAttachBase(t, attachBase)
	next, _, err := planAttach(doc, AttachRequest{Container: "a", Host: "hv1", Netns: "ns-a", Ifname: "eth0", PortGroup: "pg", Allocate: true})
	if err != nil {
		t.Fatal(err)
	}
	l := &Local{}
	l.keepApplied(next)
	recorded := &store.Record{Name: next.Spec.Name, SpecFile: next.File, Spec: bytes.Clone(next.Source)}
	if got, err := l.docOf(recorded); err != nil || got != next {
		t.Errorf("the record the apply wrote: %p, %v; want the document applied, %p", got, err, next)
	}
	before := &store.Record{Name: doc.Spec.Name, SpecFile: doc.File, Spec: bytes.Clone(doc.Source)}
	if got, err := l.docOf(before); err != nil || got == next || len(got.Spec.VMs) != len(doc.Spec.VMs) {
		t.Errorf("the record before: %v, %v; want it decoded", got, err)
	}
}
