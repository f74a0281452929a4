package service

import (
	"context"

	"github.com/vnet-project/vnet/internal/history"
)

// Actor is who asks for a change and from where, as the history keeps it:
// an API token's name and the client's address, or a person on this
// machine (user@host) for the CLI.
type Actor struct {
	Who    string
	Via    history.Face
	Remote string
}

type actorKey struct{}

// WithActor is ctx carrying who makes the changes asked for under it: the
// API gives each request its token's name. A change whose context names
// no one was asked for on this machine: the CLI's user (history.LocalUser).
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf is who ctx says makes a change.
func ActorOf(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok && a.Who != "" && a.Via != "" {
		return a
	}
	return Actor{Who: history.LocalUser(), Via: history.CLI}
}

// change is what a change of the spec is, for its history entry: an apply
// unless a rollback or a restore applies an earlier spec.
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

// entryOf is the history entry of a change of name to generation gen by
// whoever ctx names.
func entryOf(ctx context.Context, c change, name string, gen int) history.Entry {
	a := ActorOf(ctx)
	return history.Entry{Infra: name, Generation: gen, Verb: c.verb, From: c.from, Who: a.Who, Via: a.Via, Remote: a.Remote}
}
