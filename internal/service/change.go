package service

import (
	"context"

	"github.com/vnet-project/vnet/internal/history"
)

// change is what a change of the spec is, for its history entry: an apply
// unless a rollback or a restore applies an earlier spec through Apply.
type change struct {
	verb history.Verb
	from int // the generation gone back to, or the snapshot's
}

type changeKey struct{}

func withChange(ctx context.Context, verb history.Verb, from int) context.Context {
	return context.WithValue(ctx, changeKey{}, change{verb, from})
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
