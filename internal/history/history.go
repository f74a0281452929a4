// Package history is the shape of an infrastructure's history: an entry
// for every change of it (apply, link, unlink, rollback, restore, destroy,
// pause, resume) with the spec as stored after it, who made it, when, from
// where and a one-line summary of what changed; how many entries are kept
// (Retention); and which entry a rollback goes back to. It knows nothing
// of where entries are kept: the local store and the etcd store persist
// them, beside the record whose generations they follow.
//
// An entry's Generation is the record's (store.Record.Generation) after
// the change: a change that leaves the spec as it was (a pause, an apply
// that changed nothing) keeps it, and a destroy ends it, a later apply of
// the name starting again from 1. Entries are therefore ordered by Seq, a
// number the store gives each entry of an infrastructure in turn, which
// never goes back, so one history runs across a destroy and what follows.
package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Verb is the change an entry records.
type Verb string

// The verbs.
const (
	Apply    Verb = "apply"
	Link     Verb = "link"
	Unlink   Verb = "unlink"
	Rollback Verb = "rollback" // an earlier generation applied again, as a new one (From)
	Restore  Verb = "restore"  // a snapshot applied (From: its generation)
	Destroy  Verb = "destroy"  // Spec is the spec destroyed
	Pause    Verb = "pause"
	Resume   Verb = "resume"
)

// Verbs lists every verb.
var Verbs = []Verb{Apply, Link, Unlink, Rollback, Restore, Destroy, Pause, Resume}

// ChangesSpec reports whether the verb stores a spec of its own: a pause
// or resume does not, and a destroy leaves none behind.
func (v Verb) ChangesSpec() bool {
	switch v {
	case Apply, Link, Unlink, Rollback, Restore:
		return true
	}
	return false
}

// Face is where a change came from.
type Face string

// The faces.
const (
	CLI   Face = "cli"
	API   Face = "api"
	Agent Face = "agent" // an agent acting by itself
	CNI   Face = "cni"
)

// Faces lists every face.
var Faces = []Face{CLI, API, Agent, CNI}

// Entry is one change of an infrastructure.
type Entry struct {
	Infra string `json:"infra" yaml:"infra"`
	// Seq orders the infrastructure's entries: the store gives each the
	// one after the last it holds (Next).
	Seq int `json:"seq" yaml:"seq"`
	// Generation is the record's after the change; 0 after a destroy.
	Generation int       `json:"generation" yaml:"generation"`
	Verb       Verb      `json:"verb" yaml:"verb"`
	At         time.Time `json:"at" yaml:"at"`
	// Who made it: an API token's name, user@host for the CLI (LocalUser),
	// the agent's host for an agent.
	Who string `json:"who" yaml:"who"`
	Via Face   `json:"via" yaml:"via"`
	// Remote is the client's address, for a change through the API.
	Remote string `json:"remote,omitempty" yaml:"remote,omitempty"`
	// Summary says what changed in one line (specdiff's Summary, or what
	// a pause or resume stopped or started).
	Summary string `json:"summary" yaml:"summary"`
	// From is the generation a rollback went back to, or the generation of
	// the infrastructure a restored snapshot was taken of.
	From int `json:"from,omitempty" yaml:"from,omitempty"`
	// SpecFile and Spec are the spec as stored after the change (for a
	// destroy, the one destroyed); Spec is absent from a listing's entries
	// (Head).
	SpecFile string `json:"spec_file,omitempty" yaml:"spec_file,omitempty"`
	Spec     Text   `json:"spec,omitempty" yaml:"spec,omitempty"`
}

// Head is the entry without its spec, as a listing shows it.
func (e Entry) Head() Entry {
	e.Spec = nil
	return e
}

// Heads is every entry without its spec.
func Heads(entries []Entry) []Entry {
	out := make([]Entry, len(entries))
	for i, e := range entries {
		out[i] = e.Head()
	}
	return out
}

// Validate checks what a store reads back: a verb and a face this build
// knows, and numbers that make sense.
func (e *Entry) Validate() error {
	switch {
	case !slices.Contains(Verbs, e.Verb):
		return fmt.Errorf("history entry %d of %s: %w verb %q", e.Seq, e.Infra, ErrUnknown, e.Verb)
	case !slices.Contains(Faces, e.Via):
		return fmt.Errorf("history entry %d of %s: %w face %q", e.Seq, e.Infra, ErrUnknown, e.Via)
	case e.Seq < 1 || e.Generation < 0 || e.From < 0:
		return fmt.Errorf("history entry %d of %s: sequence %d, generation %d, from %d: %w", e.Seq, e.Infra, e.Seq, e.Generation, e.From, ErrInvalid)
	}
	return nil
}

// Sort orders entries by Seq, oldest first, as a history lists them.
func Sort(entries []Entry) {
	slices.SortStableFunc(entries, func(a, b Entry) int { return cmp.Compare(a.Seq, b.Seq) })
}

// Next is the Seq of the entry that follows the given ones.
func Next(entries []Entry) int {
	n := 0
	for _, e := range entries {
		n = max(n, e.Seq)
	}
	return n + 1
}

// holdsSpec says the entry stores a spec that was in force: its own, or,
// for a head a store listed without specs, one its verb stores (the store
// reads it when asked for that entry). A destroy's spec was in force
// before it, and that entry is the one to go back to.
func (e *Entry) holdsSpec() bool {
	return e.Verb != Destroy && (len(e.Spec) > 0 || e.Verb.ChangesSpec())
}

// Find returns the newest entry of a generation that holds its spec: what
// a rollback to that generation applies. Heads (entries without their
// specs, as a store lists them) are found by their verbs.
func Find(entries []Entry, generation int) (Entry, error) {
	var found *Entry
	for i := range entries {
		e := &entries[i]
		if e.Generation == generation && e.holdsSpec() && (found == nil || e.Seq > found.Seq) {
			found = e
		}
	}
	if found == nil {
		return Entry{}, fmt.Errorf("generation %d: %w (it was never stored, or the history no longer keeps it)", generation, ErrNotFound)
	}
	return *found, nil
}

// Previous returns what a rollback goes back to by default: the entry
// before the current generation's (the newest of that generation) that
// holds a spec of another generation. Across a destroy (current 0, or a
// name applied anew), that is the last spec before the destroy.
func Previous(entries []Entry, current int) (Entry, error) {
	cur := -1
	for i := range entries {
		if entries[i].Generation == current && (cur < 0 || entries[i].Seq > entries[cur].Seq) {
			cur = i
		}
	}
	var found *Entry
	for i := range entries {
		e := &entries[i]
		if cur >= 0 && e.Seq < entries[cur].Seq && e.Generation != current && e.holdsSpec() &&
			(found == nil || e.Seq > found.Seq) {
			found = e
		}
	}
	if found == nil {
		return Entry{}, fmt.Errorf("no generation before %d: %w", current, ErrNotFound)
	}
	return *found, nil
}

// Pauses are the pause and resume entries after Seq lo up to Seq hi (in
// either order), oldest first: what was paused or resumed between two
// entries, which neither's spec says.
func Pauses(entries []Entry, lo, hi int) []Entry {
	lo, hi = min(lo, hi), max(lo, hi)
	var out []Entry
	for _, e := range entries {
		if (e.Verb == Pause || e.Verb == Resume) && e.Seq > lo && e.Seq <= hi {
			out = append(out, e)
		}
	}
	Sort(out)
	return out
}
