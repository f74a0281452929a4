package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/specdiff"
	"github.com/vnet-project/vnet/internal/store"
)

// HistoryResult is an infrastructure's history: an entry per change,
// oldest first, without their specs.
type HistoryResult struct {
	Infra string `json:"infra"`
	// Current is the generation in force; 0 when the infrastructure is
	// destroyed (its history outlives it).
	Current int `json:"current"`
	// Retention is what the store keeps of it, as it acts: the defaults
	// written out, as people and scripts read them.
	Retention history.Effective `json:"retention"`
	Entries   []history.Entry   `json:"entries"`
}

// kept is what the operations on history read of a back end's store.
type kept interface {
	store.HistoryStore
	// head is an infrastructure's record without what was realized;
	// ErrNotFound when it has none.
	head(name string) (*store.Record, error)
}

// historian is a back end whose store keeps history: Local and Cluster.
// The operations built on history (rollback, diff between generations,
// snapshot, restore) are written once over it.
type historian interface {
	Service
	keeper() (kept, func(), error)
	docOf(rec *store.Record) (*spec.Document, error)
	// modelled is the plan from old's model to next's (old may be nil),
	// per host where the back end plans per host.
	modelled(old, next *spec.Spec, basis string) []HostPlan
	// allSpecs are the specs of every infrastructure in the store.
	allSpecs() ([]*spec.Spec, error)
}

type localKept struct{ *store.Bolt }

func (k localKept) head(name string) (*store.Record, error) { return recordHead(k.Bolt, name) }

func (l *Local) keeper() (kept, func(), error) {
	st, err := l.openStore()
	if err != nil {
		return nil, nil, err
	}
	return localKept{st}, func() { st.Close() }, nil
}

type clusterKept struct{ ClusterStore }

func (k clusterKept) head(name string) (*store.Record, error) {
	rec, _, err := k.GetRev(name)
	return rec, err
}

func (c *Cluster) keeper() (kept, func(), error) {
	st, err := c.store()
	if err != nil {
		return nil, nil, err
	}
	return clusterKept{st}, func() {}, nil
}

// History lists an infrastructure's history.
func (l *Local) History(_ context.Context, name string) (*HistoryResult, error) {
	return historyOf(l, name)
}

// History lists an infrastructure's history kept in etcd.
func (c *Cluster) History(_ context.Context, name string) (*HistoryResult, error) {
	return historyOf(c, name)
}

func historyOf(b historian, name string) (*HistoryResult, error) {
	k, done, err := b.keeper()
	if err != nil {
		return nil, err
	}
	defer done()
	heads, current, err := headsOf(k, name)
	if err != nil {
		return nil, err
	}
	r, err := k.HistoryRetention()
	if err != nil {
		return nil, err
	}
	if heads == nil {
		heads = []history.Entry{}
	}
	return &HistoryResult{Infra: name, Current: current, Retention: r.Effective(), Entries: heads}, nil
}

// headsOf is an infrastructure's history and its generation now (0: none);
// an infrastructure with neither a record nor a history is ErrNotFound.
func headsOf(k kept, name string) ([]history.Entry, int, error) {
	current := 0
	rec, err := k.head(name)
	switch {
	case err == nil:
		current = rec.Generation
	case !errors.Is(err, store.ErrNotFound):
		return nil, 0, err
	}
	heads, err := k.HistoryHeads(name)
	if err != nil {
		return nil, 0, err
	}
	if len(heads) == 0 && rec == nil {
		return nil, 0, tagged{ErrNotFound, fmt.Sprintf("%q: no such infrastructure, and no history of one", name)}
	}
	return heads, current, nil
}

// Generation is the entry of an infrastructure's history that holds a
// generation's spec (the newest such, as generations start again after a
// destroy), with that spec.
func (l *Local) Generation(_ context.Context, name string, gen int) (*history.Entry, error) {
	return generationOf(l, name, gen)
}

// Generation is the entry of the history kept in etcd that holds a
// generation's spec, with that spec.
func (c *Cluster) Generation(_ context.Context, name string, gen int) (*history.Entry, error) {
	return generationOf(c, name, gen)
}

func generationOf(b historian, name string, gen int) (*history.Entry, error) {
	k, done, err := b.keeper()
	if err != nil {
		return nil, err
	}
	defer done()
	heads, _, err := headsOf(k, name)
	if err != nil {
		return nil, err
	}
	return entryWithSpec(k, name, heads, gen)
}

// entryWithSpec finds generation gen in heads and reads its entry whole.
func entryWithSpec(k kept, name string, heads []history.Entry, gen int) (*history.Entry, error) {
	h, err := history.Find(heads, gen)
	if err != nil {
		return nil, notKept(name, err)
	}
	return wholeEntry(k, name, h)
}

// wholeEntry reads the entry whose head h is, with its spec.
func wholeEntry(k kept, name string, h history.Entry) (*history.Entry, error) {
	e, err := k.HistoryEntry(name, h.Seq)
	if err != nil {
		return nil, notKept(name, err)
	}
	if len(e.Spec) == 0 {
		return nil, tagged{ErrNotFound, fmt.Sprintf("%s generation %d: its spec was not kept (%s)", name, e.Generation, e.Summary)}
	}
	return &e, nil
}

// notKept says a generation the history does not hold is ErrNotFound.
func notKept(name string, err error) error {
	if errors.Is(err, history.ErrNotFound) {
		return tagged{ErrNotFound, fmt.Sprintf("%s: %v", name, err)}
	}
	return err
}

// HistoryRetention is how much history the store keeps.
func (l *Local) HistoryRetention(context.Context) (history.Retention, error) { return retentionOf(l) }

// HistoryRetention is how much history etcd keeps.
func (c *Cluster) HistoryRetention(context.Context) (history.Retention, error) { return retentionOf(c) }

func retentionOf(b historian) (history.Retention, error) {
	k, done, err := b.keeper()
	if err != nil {
		return history.Retention{}, err
	}
	defer done()
	return k.HistoryRetention()
}

// SetHistoryRetention changes how much history the store keeps, for
// every writer, and prunes every history to it.
func (l *Local) SetHistoryRetention(_ context.Context, r history.Retention) error {
	return setRetention(l, r)
}

// SetHistoryRetention changes how much history etcd keeps.
func (c *Cluster) SetHistoryRetention(_ context.Context, r history.Retention) error {
	return setRetention(c, r)
}

func setRetention(b historian, r history.Retention) error {
	if err := r.Validate(); err != nil {
		return tagged{ErrInvalid, err.Error()}
	}
	k, done, err := b.keeper()
	if err != nil {
		return err
	}
	defer done()
	return k.SetHistoryRetention(r)
}

// summary says in one line what going from old to next changes (either
// may be nil).
func summary(old, next *spec.Spec) string { return specdiff.Compare(old, next).Summary() }

// specOr is a record's spec, or nil when there is no record or its spec
// no longer reads.
func specOr(b interface {
	docOf(*store.Record) (*spec.Document, error)
}, rec *store.Record) *spec.Spec {
	if rec == nil {
		return nil
	}
	doc, err := b.docOf(rec)
	if err != nil {
		return nil
	}
	return doc.Spec
}

// docOr is a record's spec, nil when there is no record.
func docOr(b interface {
	docOf(*store.Record) (*spec.Document, error)
}, rec *store.Record) (*spec.Document, error) {
	if rec == nil {
		return nil, nil
	}
	return b.docOf(rec)
}

// priorDoc returns what reads the spec of the record before a change
// (docOr) once, and gives the same document after: an apply's rework of
// the spec it is given and its history entry's summary both read it, and
// a large spec's stored form costs a hash and a decode each time. Neither
// changes the document.
func priorDoc(b interface {
	docOf(*store.Record) (*spec.Document, error)
}, rec *store.Record) func() (*spec.Document, error) {
	var doc *spec.Document
	var err error
	read := false
	return func() (*spec.Document, error) {
		if !read {
			doc, err = docOr(b, rec)
			read = true
		}
		return doc, err
	}
}

// lapped is read, which laps (a stopwatch) under label when it first
// reads, so that a trace shows what reading cost apart from what asked.
func lapped(read func() (*spec.Document, error), lap func(format string, args ...any), label string) func() (*spec.Document, error) {
	first := true
	return func() (*spec.Document, error) {
		doc, err := read()
		if first {
			first = false
			lap(label)
		}
		return doc, err
	}
}

// specOfDoc is the spec read returns, or nil when there is none or it no
// longer reads (as specOr).
func specOfDoc(read func() (*spec.Document, error)) *spec.Spec {
	doc, err := read()
	if err != nil || doc == nil {
		return nil
	}
	return doc.Spec
}

// keepLocal records in this machine's history the change of name that
// went from the record before (nil: none) to the one the store holds now.
// A change that left the spec and the generation as they were records
// nothing. The change stands whether or not its entry could be kept: a
// failure is said on log.
func (l *Local) keepLocal(by Actor, st *store.Bolt, c change, name string, before *store.Record, log io.Writer) {
	after, err := recordHead(st, name)
	switch {
	case errors.Is(err, store.ErrNotFound) && before != nil: // destroyed
		after = nil
	case err != nil:
		return
	}
	e, ok := l.changeEntry(by, c, name, before, after, func() *spec.Spec { return specOr(l, before) },
		func() *spec.Spec { return specOr(l, after) })
	if !ok {
		return
	}
	if _, err := st.AppendHistory(e); err != nil && log != nil {
		fmt.Fprintf(log, "warning: %s was changed, but its history could not keep the change: %v\n", name, err)
	}
}

// keepInRecord has eng keep the history entry of its apply's change of
// name in the record's own write (reconcile.Engine.History), and returns
// whether it did: otherwise keepLocal keeps it after the apply.
func (l *Local) keepInRecord(eng *reconcile.Engine, by Actor, c change, name string, before *store.Record,
	prior func() (*spec.Document, error)) (kept func() bool) {
	called := false
	eng.History = func(next *store.Record, doc *spec.Document) (history.Entry, bool) {
		called = true
		lap := l.stopwatch()
		defer lap("service: history entry, in the record's write")
		l.keepDoc(next, doc)
		return l.changeEntry(by, c, name, before, next, func() *spec.Spec { return specOfDoc(prior) },
			func() *spec.Spec { return doc.Spec })
	}
	return func() bool { return called }
}

// changeEntry is the history entry of the change of name from before to
// after (either nil: none, after nil for a destroy), whose spec
// afterSpec makes; false when the change left the spec and the
// generation as they were, which keeps no entry.
func (l *Local) changeEntry(by Actor, c change, name string, before, after *store.Record,
	beforeSpec, afterSpec func() *spec.Spec) (history.Entry, bool) {
	var e history.Entry
	switch {
	case after == nil: // destroyed
		e = entryOf(by, change{verb: history.Destroy}, name, 0)
		e.SpecFile, e.Spec, e.Summary = before.SpecFile, history.Text(before.Spec), summary(beforeSpec(), nil)
	case before != nil && before.Generation == after.Generation && bytes.Equal(before.Spec, after.Spec):
		return e, false
	default:
		e = entryOf(by, c, name, after.Generation)
		e.SpecFile, e.Spec, e.Summary = after.SpecFile, history.Text(after.Spec), summary(beforeSpec(), afterSpec())
	}
	return e, true
}

// beforeChange is the record of name before a change, nil when none.
func beforeChange(st store.Store, name string) *store.Record {
	rec, err := recordHead(st, name)
	if err != nil {
		return nil
	}
	return rec
}
