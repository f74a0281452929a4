package reconcile

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// lastRecord reads the record of the last apply, without what was realized
// where the store can (see listedIn).
func (e *Engine) lastRecord(name string) (*store.Record, error) {
	if h, ok := e.Store.(store.HeadReader); ok {
		return h.Head(name)
	}
	return e.Store.Get(name)
}

// lastSpec is the spec of the last apply of doc's infrastructure, or nil;
// doc's own when the record holds the same file.
func (e *Engine) lastSpec(doc *spec.Document) *spec.Spec {
	rec, err := e.lastRecord(doc.Spec.Name)
	if err != nil {
		return nil
	}
	if sameSpec(rec, doc) {
		return doc.Spec
	}
	return e.specOf(rec)
}

// sameSpec reports whether a record (nil: none) holds doc as it was
// applied, byte for byte: then its spec need not be decoded again.
func sameSpec(rec *store.Record, doc *spec.Document) bool {
	return rec != nil && len(doc.Source) > 0 && rec.SpecFile == doc.File && bytes.Equal(rec.Spec, doc.Source)
}

// specOf is a record's spec, or nil.
func (e *Engine) specOf(rec *store.Record) *spec.Spec {
	if rec == nil {
		return nil
	}
	if e.Applied != nil && sameSpec(rec, e.Applied) {
		return e.Applied.Spec
	}
	doc, err := e.Specs.Decode(rec.SpecFile, rec.Spec)
	if err != nil {
		return nil
	}
	return doc.Spec
}

// record stores the apply; old is the record it read (nil: none), which
// the infrastructure's lock kept current. A change of what is paused alone
// keeps the generation: the spec is the same. A spec that changed takes a
// new one even when the kernel had nothing to change (an empty port group
// added), so that a generation names one spec in the history and a
// rollback to it is not ambiguous.
func (e *Engine) record(doc *spec.Document, old *store.Record, realized []plan.Resource, changed bool, paused plan.Paused, namespaces *plan.NamespaceIDs) error {
	gen := 0
	if old != nil {
		gen = old.Generation
	}
	specChanged := old == nil || !bytes.Equal(old.Spec, doc.Source)
	if (changed || specChanged) && !(sameSpec(old, doc) && !old.Paused.Equal(paused)) {
		gen++
	}
	rec := &store.Record{Name: doc.Spec.Name, SpecFile: doc.File, Spec: doc.Source,
		Realized: realized, Generation: gen, AppliedAt: time.Now().UTC(), Engine: engineBuild(), Paused: paused.Normal(),
		Namespaces: namespaces}
	err := e.put(rec, doc)
	if err == nil {
		e.Specs.Add(doc)
	}
	return err
}

// put writes rec, with the history entry of its change (see
// Engine.History) in the same write where the store can.
func (e *Engine) put(rec *store.Record, doc *spec.Document) error {
	h, ok := e.Store.(store.HistoryPutter)
	if e.History == nil || !ok {
		return e.Store.Put(rec)
	}
	entry, keep := e.History(rec, doc)
	if !keep {
		return e.Store.Put(rec)
	}
	_, err := h.PutWithHistory(rec, entry)
	if errors.Is(err, store.ErrHistoryNotKept) {
		// The change stands without its entry.
		e.logf("warning: %s was changed, but its history could not keep the change: %v\n", rec.Name, err)
		return nil
	}
	return err
}

// engineBuild names this build of vnet: its module version, when the
// binary was built from a checkout the commit and whether it was modified,
// and the revision of its model. A build made without version control
// information (make's -buildvcs=false) is told from an older one by the
// model's revision alone.
var engineBuild = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	build := info.Main.Version
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision", "vcs.modified":
			build += " " + kv.Key + "=" + kv.Value
		}
	}
	return fmt.Sprintf("%s model=%d", build, plan.ModelRevision)
})

// setPending notes, where the store can, that the host begins to change:
// should the apply be killed, the next one reads everything.
func (e *Engine) setPending(name string) error {
	if p, ok := e.Store.(store.Pending); ok {
		return p.SetPending(name)
	}
	return nil
}

// clearPending notes that the host is as the record says. Should it fail,
// the next apply is merely full.
func (e *Engine) clearPending(name string) {
	if p, ok := e.Store.(store.Pending); ok {
		_ = p.ClearPending(name)
	}
}
