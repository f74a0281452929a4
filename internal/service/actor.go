package service

import (
	"github.com/vnet-project/vnet/internal/history"
)

// Actor is who asks for a change and through which face. Every change a
// service makes (apply, destroy, link, unlink, rollback, restore) is kept
// in the infrastructure's history with its actor, whichever face asked.
type Actor struct {
	// Who is an API token's name, or user@host on the command line.
	Who string
	// Via is the face: history.CLI, history.API, ...
	Via history.Face
	// Remote is the client's address, through the API.
	Remote string
}

// LocalActor is whoever runs this process on this machine, through the
// command line: user@host, and the person behind sudo.
func LocalActor() Actor { return Actor{Who: history.LocalUser(), Via: history.CLI} }

// orLocal is a, or LocalActor when a is the zero Actor: a caller in this
// process that names nobody is the one running it.
func (a Actor) orLocal() Actor {
	if a == (Actor{}) {
		return LocalActor()
	}
	return a
}
