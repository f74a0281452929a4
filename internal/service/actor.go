package service

import (
	"io"
	"time"

	"github.com/vnet-project/vnet/internal/history"
)

// Actor is who asks for a change and through which face. Every change a
// service makes (apply, destroy, link, unlink, pause, resume, rollback,
// restore) is kept with its actor, whichever face asked: in the event list,
// and what changes the spec in the infrastructure's history.
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

// event is the event of a change that a took, which began at start and
// ended with err, having made changes kernel changes.
func (a Actor) event(action, infra string, start time.Time, changes int, err error) Event {
	a = a.orLocal()
	ev := Event{Time: time.Now().UTC(), Action: action, Infra: infra, Who: a.Who, Via: string(a.Via), Remote: a.Remote,
		OK: err == nil, Changes: changes, Seconds: time.Since(start).Seconds()}
	if err != nil {
		ev.Error = err.Error()
	}
	return ev
}

// recorder keeps events: Local and Cluster.
type recorder interface{ Record(Event) error }

// note keeps ev. A journal that cannot be written loses the event, which
// log hears of (when set); the change it describes stands.
func note(r recorder, ev Event, log io.Writer) {
	if err := r.Record(ev); err != nil && log != nil {
		io.WriteString(log, "event "+ev.Action+" "+ev.Infra+" not kept: "+err.Error()+"\n")
	}
}
