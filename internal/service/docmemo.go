package service

import (
	"bytes"
	"sync"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// docMemo keeps, per infrastructure, the document of its record that this
// process last made or stored, by the record's file name and spec bytes:
// a server's next change of an infrastructure reads the record its last
// change wrote, and making a large spec's document of a record again (a
// hash, a decode and a validation) costs milliseconds. The same name and
// bytes make the same document, whoever wrote them, so what is kept is
// never stale: a record another process wrote has other bytes, and is
// read.
type docMemo struct {
	mu     sync.Mutex
	byName map[string]memoDoc
}

type memoDoc struct {
	file   string
	source []byte // a copy: a record's and a document's bytes may be a buffer their maker reuses
	doc    *spec.Document
}

// get is the document kept for rec's name, file and bytes.
func (m *docMemo) get(rec *store.Record) (*spec.Document, bool) {
	if rec == nil || rec.Damage != nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.byName[rec.Name]
	if !ok || d.file != rec.SpecFile || !bytes.Equal(d.source, rec.Spec) {
		return nil, false
	}
	return d.doc, true
}

// put keeps doc as rec's document, when it is: of rec's infrastructure,
// file and bytes.
func (m *docMemo) put(rec *store.Record, doc *spec.Document) {
	if rec == nil || rec.Damage != nil || doc == nil || doc.Spec.Name != rec.Name ||
		doc.File != rec.SpecFile || !bytes.Equal(doc.Source, rec.Spec) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.byName[rec.Name]; ok && d.file == rec.SpecFile && bytes.Equal(d.source, rec.Spec) {
		return
	}
	if m.byName == nil {
		m.byName = map[string]memoDoc{}
	}
	m.byName[rec.Name] = memoDoc{file: rec.SpecFile, source: bytes.Clone(rec.Spec), doc: doc}
}

// forget drops the document kept of a destroyed infrastructure.
func (m *docMemo) forget(name string) {
	m.mu.Lock()
	delete(m.byName, name)
	m.mu.Unlock()
}

// loadAfter is spec.LoadAfter of src against the documents kept of the
// file (a client's that sends its spec again with a VM changed): false
// when none reads it so.
func (m *docMemo) loadAfter(file string, src []byte) (*spec.Document, bool) {
	m.mu.Lock()
	var kept []*spec.Document
	for _, d := range m.byName {
		if d.doc.File == file {
			kept = append(kept, d.doc)
		}
	}
	m.mu.Unlock()
	for _, prev := range kept {
		if doc, ok := spec.LoadAfter(prev, file, src); ok {
			return doc, true
		}
	}
	return nil, false
}
