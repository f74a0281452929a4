// Package store keeps each infrastructure's desired spec and what was
// realized for it. The interface is small so that an etcd-backed store, read
// by an agent on each host, can replace the local file without touching the
// planner.
package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
)

// ErrNotFound is returned for an infrastructure the store does not know.
var ErrNotFound = errors.New("no such infrastructure")

// ErrCorrupt is wrapped by errors about a state file that cannot be read as
// a store (see CorruptError).
var ErrCorrupt = errors.New("state store is damaged")

// ErrLocked is wrapped by errors about an infrastructure another command is
// changing, and matches those about a state file another process held for
// longer than an open waits: either way, trying again later may succeed.
var ErrLocked = errors.New("infrastructure is locked")

// ErrWriteKept is wrapped by the error of a write that reached state.db
// but neither its good copy nor, when it was to be taken back, could be
// taken back: the store holds it, and its caller must take it as made.
var ErrWriteKept = errors.New("the state store holds the write, its good copy does not")

// ErrWriteUnknown is wrapped by the error of a write of which the store
// cannot tell whether it holds it: its caller must not take the store's
// record for what is realized (an apply then leaves its pending note, and
// the next one reads everything).
var ErrWriteUnknown = errors.New("whether the state store holds the write is unknown")

// ErrHistoryNotKept is wrapped by the error of a record's write that
// stored the record but not the history entry of its change.
var ErrHistoryNotKept = errors.New("the record was written, its history entry was not")

// Record is one infrastructure's state.
type Record struct {
	Name     string `json:"name"`
	SpecFile string `json:"spec_file"`
	Spec     []byte `json:"spec"` // the YAML as applied
	// Realized, once written, is not changed in place: the store keeps
	// it to find the resources the next write has the same (Bolt's
	// hashRealized), as the engine's memo keeps the model it is.
	Realized   []plan.Resource `json:"realized"`
	Generation int             `json:"generation"` // applies that changed something
	AppliedAt  time.Time       `json:"applied_at"`
	// Engine is the build of vnet that made the apply: an apply by another
	// build reads the whole host, since its model may differ.
	Engine string `json:"engine,omitempty"`
	// SpecEncoded is the spec in compact form (speccache.EncodeValidated),
	// when the apply stored it: a reader of the same build makes the spec
	// of it instead of decoding the YAML (speccache.DecodeValidated), and any
	// other reader ignores it.
	SpecEncoded []byte `json:"spec_encoded,omitempty"`
	// Paused is what of the infrastructure is paused (plan.Paused), kept
	// beside the spec rather than in it: an apply of the spec keeps it,
	// and only a pause or resume changes it.
	Paused plan.Paused `json:"paused,omitempty"`
	// Namespaces is the identity of the namespaces the record names, as
	// the apply knew them to carry this store's mark: the next apply tells
	// by it, without entering them, that they are still this store's. A
	// record without it (an older build's, or made on a kernel that names
	// no namespace) has the marks read instead.
	Namespaces *plan.NamespaceIDs `json:"namespaces,omitempty"`
	// Damage, when set, says why what is stored under the record's name
	// could not be read as a record: a store that reads records one by
	// one (etcd's) lists such a record, holding its name alone, rather
	// than fail every reader of every infrastructure.
	Damage error `json:"-"`
}

// ErrDamagedRecord is wrapped by the errors about a record whose stored
// value does not read, or reads as something other than its
// infrastructure's spec.
var ErrDamagedRecord = errors.New("record is damaged")

// Damaged is the record of an infrastructure whose stored value could not
// be read, why, as a store lists it.
func Damaged(name string, why error) *Record {
	return &Record{Name: name, Damage: why}
}

// damaged is the error of reading a damaged record's spec: why, which
// may be the spec's own errors (with their lines), and the way out.
func (r *Record) damaged(why error) error {
	return fmt.Errorf("the stored record of %s is damaged: %w: apply its spec again, or destroy it: %w", r.Name, why, ErrDamagedRecord)
}

// WithoutEncoding is a copy of r without its spec's compact encoding: the
// form a record is stored in where the encoding would not fit.
func (r *Record) WithoutEncoding() *Record {
	c := *r
	c.SpecEncoded = nil
	return &c
}

// Doc decodes the spec as it was applied.
func (r *Record) Doc() (*spec.Document, error) {
	if r.Damage != nil {
		return nil, r.damaged(r.Damage)
	}
	doc, err := spec.Decode(r.SpecFile, r.Spec)
	if err != nil {
		return nil, r.damaged(err)
	}
	return r.named(doc)
}

// DocVia is Doc, made of the spec's compact encoding when the apply
// stored one beside the YAML and it holds a valid spec (see encoded), or
// else through the cache (nil: none), which spares a reader that read the
// same bytes before decoding them.
func (r *Record) DocVia(c *speccache.Cache) (*spec.Document, error) { return r.docOr(c.Decode) }

// Valid is the spec a host agent realizes of a record: the spec its
// compact encoding holds, when that encoding is bound to the record's
// YAML and its spec passes the validation `vnet apply` makes, and
// otherwise its YAML loaded and validated as `vnet apply` loads a file
// (through the cache, nil for none). Either way it is a spec `vnet
// apply` accepts, named as the record is, and the one vnet status shows
// (DocVia). A record whose stored value does not read, or holds another
// infrastructure's spec, is an error wrapping ErrDamagedRecord.
func (r *Record) Valid(c *speccache.Cache) (*spec.Document, error) { return r.docOr(c.Load) }

// docOr is the record's spec made of its encoding (see encoded), or else
// of its YAML by load.
func (r *Record) docOr(load func(file string, src []byte) (*spec.Document, error)) (*spec.Document, error) {
	if r.Damage != nil {
		return nil, r.damaged(r.Damage)
	}
	if doc, ok := r.encoded(); ok {
		return r.named(doc)
	}
	doc, err := load(r.SpecFile, r.Spec)
	if err != nil {
		return nil, r.damaged(err)
	}
	return r.named(doc)
}

// encoded is the spec the record's compact encoding holds, when the
// encoding is of the record's YAML (bound to its SHA-256, in this build's
// layout) and its spec validates. The binding only says the encoding was
// meant for these bytes, which whoever writes the record can claim: the
// spec made of it is validated, as the YAML would be, before anything
// takes it for the record's (an encoding that does not validate is
// ignored, and the YAML read).
func (r *Record) encoded() (*spec.Document, bool) {
	if len(r.SpecEncoded) == 0 {
		return nil, false
	}
	doc, err := speccache.DecodeValidated(r.SpecFile, r.Spec, r.SpecEncoded)
	if err != nil || !validates(doc.Spec) {
		return nil, false
	}
	return doc, true
}

// validates reports whether s passes spec.Validate as the spec of a
// document that writes out none of its fields: the validation `vnet
// apply` makes, but for the two checks that ask whether a zero was
// written rather than left out (a VM's `cpus: 0`, a network's `vni: 0`),
// which a spec made of an encoding could answer only by decoding its YAML,
// the cost the encoding spares an agent. A zero there means what leaving
// the field out means, so s is a spec vnet apply accepts, written out.
func validates(s *spec.Spec) bool {
	probe, err := spec.Decode("", []byte("name: x\n"))
	if err != nil {
		return false
	}
	probe.Spec = s
	return len(spec.Validate(probe)) == 0
}

// named returns doc when it is the spec of the record's infrastructure:
// a record stored under one name that holds another's spec is damaged.
func (r *Record) named(doc *spec.Document) (*spec.Document, error) {
	if doc.Spec.Name != r.Name {
		return nil, r.damaged(fmt.Errorf("it holds the spec of %q", doc.Spec.Name))
	}
	return doc, nil
}

// PinVNIs is spec.PinVNIs against the spec stored before (old; nil when
// none): every network that leaves its VNI out gets the one it was stored
// with, and a new one a VNI no other has, written into the spec that is
// to be stored, so that networks keep their VNIs whatever networks come
// and go around them. A stored spec that no longer reads only costs its
// networks their old VNIs. Every apply that stores a spec pins it so.
func PinVNIs(doc *spec.Document, old *Record, c *speccache.Cache) (*spec.Document, error) {
	var previous *spec.Spec
	if old != nil {
		if d, err := old.DocVia(c); err == nil {
			previous = d.Spec
		}
	}
	pinned, err := spec.PinVNIs(doc, previous)
	if err != nil {
		return nil, fmt.Errorf("apply %s: allocate network VNIs: %w", doc.Spec.Name, err)
	}
	return pinned, nil
}

// Lists reports whether the record lists the namespace among what was
// realized.
func (r *Record) Lists(ns string) bool {
	for _, res := range r.Realized {
		if res.Kind == plan.KindNetns && res.Name == ns {
			return true
		}
	}
	return false
}

// HeadReader is a store that can read a record without what was realized
// (Realized nil): all an apply needs of the last record unless it meets a
// namespace without a mark.
type HeadReader interface {
	Head(name string) (*Record, error)
}

// HistoryPutter is a store that keeps a record and the history entry of
// its change in one write (see Bolt.PutWithHistory).
type HistoryPutter interface {
	PutWithHistory(r *Record, e history.Entry) (history.Entry, error)
}

// Store holds records. Implementations serialize writers across processes.
type Store interface {
	Get(name string) (*Record, error)
	Put(r *Record) error
	Delete(name string) error
	List() ([]*Record, error)
	// ID names the store; the namespaces it makes carry it (plan.Mark).
	ID() string
	// Location says where the store is, for people (a directory).
	Location() string
	// Lock keeps other commands from changing the infrastructure until
	// unlock is called; it fails with ErrLocked when another holds it.
	// Reading needs no lock.
	Lock(name string) (unlock func(), err error)
	Close() error
}
