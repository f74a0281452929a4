// Package store keeps each infrastructure's desired spec and what was
// realized for it. The interface is small so that an etcd-backed store, read
// by an agent on each host, can replace the local file without touching the
// planner.
package store

import (
	"errors"
	"fmt"
	"time"

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

// Record is one infrastructure's state.
type Record struct {
	Name       string          `json:"name"`
	SpecFile   string          `json:"spec_file"`
	Spec       []byte          `json:"spec"` // the YAML as applied
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
	doc, err := spec.Decode(r.SpecFile, r.Spec)
	if err != nil {
		return nil, fmt.Errorf("stored spec of %s: %w", r.Name, err)
	}
	return doc, nil
}

// DocVia is Doc, made of the spec's compact encoding when the apply
// stored one beside the YAML, or else through the cache (nil: none),
// which spares a reader that read the same bytes before decoding them.
func (r *Record) DocVia(c *speccache.Cache) (*spec.Document, error) {
	if len(r.SpecEncoded) > 0 {
		if doc, err := speccache.DecodeValidated(r.SpecFile, r.Spec, r.SpecEncoded); err == nil {
			return doc, nil
		}
	}
	doc, err := c.Decode(r.SpecFile, r.Spec)
	if err != nil {
		return nil, fmt.Errorf("stored spec of %s: %w", r.Name, err)
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
