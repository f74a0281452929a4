package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// change is what a change of the spec is, for its history entry: an apply
// unless a rollback or a restore applies an earlier spec through Apply.
type change struct {
	verb history.Verb
	from int // the generation gone back to, or the snapshot's
	// basis is, over etcd, the generation the changed spec was worked out
	// from (a link's): the change is stored only on top of it. 0: on top
	// of whatever is last, as an apply of a file is.
	basis int
	// rework, when set, works out the spec to apply from the one given
	// and the one in force (nil when none), read where the change is made:
	// under the infrastructure's lock, or from the generation it is stored
	// on top of. A rollback keeps the VMs runtimes attached this way.
	rework func(given, now *spec.Document) (*spec.Document, error)
	// overDamaged reworks against nothing a spec in force whose record is
	// damaged: an apply of the user's spec is how such a record is
	// mended, and nothing can be read of it to keep.
	overDamaged bool
}

type changeKey struct{}

func withChange(ctx context.Context, verb history.Verb, from int) context.Context {
	return context.WithValue(ctx, changeKey{}, change{verb: verb, from: from})
}

// withRework is ctx whose change reworks the spec given against the one
// in force (change.rework).
func withRework(ctx context.Context, rework func(given, now *spec.Document) (*spec.Document, error), overDamaged bool) context.Context {
	c := changeOf(ctx, history.Apply)
	c.rework, c.overDamaged = rework, overDamaged
	return context.WithValue(ctx, changeKey{}, c)
}

// reworked is doc as ctx's change reworks it against the spec in force,
// which now reads (nil, or ErrNotFound: none).
func reworked(ctx context.Context, doc *spec.Document, now func() (*spec.Document, error)) (*spec.Document, error) {
	c := changeOf(ctx, history.Apply)
	if c.rework == nil {
		return doc, nil
	}
	cur, err := now()
	if err != nil && !errors.Is(err, store.ErrNotFound) && !(c.overDamaged && errors.Is(err, store.ErrDamagedRecord)) {
		return nil, err
	}
	return c.rework(doc, cur)
}

// changeOf is the change ctx says an apply makes: verb when it says none.
func changeOf(ctx context.Context, verb history.Verb) change {
	if c, ok := ctx.Value(changeKey{}).(change); ok {
		return c
	}
	return change{verb: verb}
}

// entryOf is the history entry of a change of name to generation gen by a.
func entryOf(a Actor, c change, name string, gen int) history.Entry {
	a = a.orLocal()
	return history.Entry{Infra: name, Generation: gen, Verb: c.verb, From: c.from, Who: a.Who, Via: a.Via, Remote: a.Remote}
}

// event is the event list's action of a change a Cluster's apply stores.
func (c change) event() string {
	switch c.verb {
	case history.Link:
		return events.Link
	case history.Unlink:
		return events.Unlink
	}
	return events.Apply
}

// onTopOf refuses, with ErrConflict, a change worked out from a generation
// that is no longer last's.
func (c change) onTopOf(last *store.Record) error {
	if c.basis == 0 || last != nil && last.Generation == c.basis {
		return nil
	}
	return fmt.Errorf("%s: generation %d it was worked out from is no longer the last: %w", c.verb, c.basis, ErrConflict)
}
