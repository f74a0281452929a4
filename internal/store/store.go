// Package store keeps each infrastructure's desired spec and what was
// realized for it. The interface is small so that an etcd-backed store, read
// by an agent on each host, can replace the local file without touching the
// planner.
package store

import (
	"errors"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
)

// ErrNotFound is returned for an infrastructure the store does not know.
var ErrNotFound = errors.New("no such infrastructure")

// Record is one infrastructure's state.
type Record struct {
	Name       string          `json:"name"`
	SpecFile   string          `json:"spec_file"`
	Spec       []byte          `json:"spec"` // the YAML as applied
	Realized   []plan.Resource `json:"realized"`
	Generation int             `json:"generation"` // applies that changed something
	AppliedAt  time.Time       `json:"applied_at"`
}

// Store holds records. Implementations serialize writers across processes.
type Store interface {
	Get(name string) (*Record, error)
	Put(r *Record) error
	Delete(name string) error
	List() ([]*Record, error)
	Close() error
}
