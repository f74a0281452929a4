package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/quote"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// SnapshotFormat names the snapshot format this build writes and reads.
// A later format that an older vnet cannot read gets another number.
const SnapshotFormat = "vnet-snapshot/1"

// ErrExists: what a restore would make exists already (an infrastructure
// of that name, a VNI another infrastructure uses).
var ErrExists = errors.New("exists already")

// Snapshot is an infrastructure as a file of its own: its spec with every
// allocation pinned (so that restored anywhere it makes the same VNIs,
// MACs and addresses), the history entry of the generation taken, and
// what to check it by.
type Snapshot struct {
	Format     string    `json:"format" yaml:"format"`
	Infra      string    `json:"infra" yaml:"infra"`
	Generation int       `json:"generation" yaml:"generation"`
	TakenAt    time.Time `json:"taken_at" yaml:"taken_at"`
	// TakenFrom says where it was taken: a state directory, or etcd.
	TakenFrom string `json:"taken_from" yaml:"taken_from"`
	// Head is the history's entry of the generation taken, without its
	// spec; nil when the history no longer holds it.
	Head        *history.Entry `json:"head,omitempty" yaml:"head,omitempty"`
	Allocations Allocations    `json:"allocations" yaml:"allocations"`
	SpecFile    string         `json:"spec_file" yaml:"spec_file"`
	// SHA256 is the spec's, in hex: a restore refuses a snapshot whose
	// spec was changed or damaged.
	SHA256 string       `json:"sha256" yaml:"sha256"`
	Spec   history.Text `json:"spec" yaml:"spec"`
}

// MaxSnapshotBytes bounds a snapshot file: a spec at its limit, written as
// a YAML block, and the rest.
const MaxSnapshotBytes = 2*spec.MaxSpecBytes + 1<<20

// Snapshot takes an infrastructure's snapshot from this machine's store.
func (l *Local) Snapshot(_ context.Context, name string) (*Snapshot, error) {
	return snapshotOf(l, name, "state directory "+l.StateDir)
}

// Snapshot takes an infrastructure's snapshot from etcd.
func (c *Cluster) Snapshot(_ context.Context, name string) (*Snapshot, error) {
	return snapshotOf(c, name, "etcd")
}

func snapshotOf(b historian, name, from string) (*Snapshot, error) {
	a, err := appliedOf(b, name)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Format: SnapshotFormat, Infra: name, Generation: a.Generation, TakenAt: time.Now().UTC(), TakenFrom: from,
		Allocations: a.Allocations, SpecFile: a.SpecFile, SHA256: digest(a.Spec), Spec: a.Spec}
	k, done, err := b.keeper()
	if err != nil {
		return nil, err
	}
	defer done()
	if heads, err := k.HistoryHeads(name); err == nil {
		if h, err := history.Find(heads, a.Generation); err == nil {
			snap.Head = &h
		}
	}
	return snap, nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// YAML is the snapshot as a file.
func (s *Snapshot) YAML() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// ParseSnapshot reads a snapshot file (YAML, or JSON, which is YAML) and
// checks it: its format, that its spec is the one it was taken with, and
// that the spec names the infrastructure. Errors are ErrInvalid.
func ParseSnapshot(data []byte) (*Snapshot, error) {
	if len(data) > MaxSnapshotBytes {
		return nil, Invalid(fmt.Sprintf("snapshot: %d bytes, more than a snapshot holds (%d)", len(data), MaxSnapshotBytes))
	}
	var s Snapshot
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, Invalid("snapshot: not a vnet snapshot: " + quote.Escape(quote.Clip(err.Error(), quote.ClipBytes)))
	}
	return &s, s.check()
}

func (s *Snapshot) check() error {
	switch {
	case strings.HasPrefix(s.Format, "vnet-snapshot/") && s.Format != SnapshotFormat:
		return Invalid(fmt.Sprintf("snapshot: format %s, which this build of vnet does not read (it reads %s): written by a newer vnet?",
			quote.Q(s.Format), SnapshotFormat))
	case s.Format != SnapshotFormat:
		return Invalid(fmt.Sprintf("snapshot: format %s: not a vnet snapshot (want %s)", quote.Q(s.Format), SnapshotFormat))
	case s.Infra == "" || len(s.Spec) == 0:
		return Invalid("snapshot: no infrastructure, or no spec")
	case digest(s.Spec) != s.SHA256:
		return Invalid("snapshot: its spec is not the one it was taken with (sha256 differs): damaged or edited")
	case s.Generation < 0:
		return Invalid("snapshot: generation " + fmt.Sprint(s.Generation))
	}
	return nil
}

// RestoreOptions say how a restore applies the snapshot's spec: as an
// apply of it (a dry run, a wait for the hosts over etcd).
type RestoreOptions struct {
	Apply ApplyOptions
}

// Restore makes the infrastructure of a snapshot here, as a new one.
func (l *Local) Restore(ctx context.Context, snap *Snapshot, o RestoreOptions) (*ApplyResult, error) {
	return restore(ctx, l, snap, o)
}

// Restore stores the infrastructure of a snapshot in etcd, for the hosts'
// agents to realize.
func (c *Cluster) Restore(ctx context.Context, snap *Snapshot, o RestoreOptions) (*ApplyResult, error) {
	return restore(ctx, c, snap, o)
}

func restore(ctx context.Context, b historian, snap *Snapshot, o RestoreOptions) (*ApplyResult, error) {
	if err := snap.check(); err != nil {
		return nil, err
	}
	doc, err := b.Load(snap.SpecFile, snap.Spec)
	if err != nil {
		return nil, fmt.Errorf("restore %s: its spec: %w", snap.Infra, err)
	}
	if doc.Spec.Name != snap.Infra {
		return nil, Invalid(fmt.Sprintf("snapshot: of %q, but its spec names %q", snap.Infra, doc.Spec.Name))
	}
	// A spec that pins every allocation makes, here, the VNIs and MACs it
	// made where it was taken.
	again, alloc, err := pinned(doc)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again.Source, doc.Source) || !sameAllocations(alloc, snap.Allocations) {
		return nil, Invalid("snapshot: its spec does not pin the VNIs and MACs it lists: edited, or taken by another vnet")
	}
	if err := restorable(b, snap.Infra, alloc); err != nil {
		return nil, fmt.Errorf("restore %s: %w", snap.Infra, err)
	}
	// The VMs runtimes had attached when it was taken are not made again:
	// their runtimes attach them anew where they run.
	return applyKeepingAttached(withChange(ctx, history.Restore, snap.Generation), b, "the snapshot", doc, o.Apply, false)
}

func sameAllocations(a, b Allocations) bool {
	return maps.Equal(a.VNIs, b.VNIs) && maps.Equal(a.MACs, b.MACs)
}

// restorable refuses a restore that would meet what exists: an
// infrastructure of the name, or a VNI another infrastructure uses (two
// tunnels of one VNI on a host would carry each other's frames, or the
// kernel refuses the second).
func restorable(b historian, name string, alloc Allocations) error {
	k, done, err := b.keeper()
	if err != nil {
		return err
	}
	defer done()
	if _, err := k.head(name); err == nil {
		return fmt.Errorf("infrastructure %q %w: destroy it first, or restore on another machine or cluster", name, ErrExists)
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	others, err := b.allSpecs()
	if err != nil {
		return err
	}
	byVNI := map[int]string{}
	for what, vni := range alloc.VNIs {
		byVNI[vni] = what
	}
	for _, s := range others {
		o := allocationsOf(pinsOf(s))
		for _, what := range sortedKeys(o.VNIs) {
			if mine, ok := byVNI[o.VNIs[what]]; ok {
				return fmt.Errorf("VNI %d of its %s %w: infrastructure %q's %s uses it", o.VNIs[what], mine, ErrExists, s.Name, what)
			}
		}
	}
	return nil
}

// allSpecs are the specs of every infrastructure in this machine's store.
func (l *Local) allSpecs() ([]*spec.Spec, error) {
	recs, err := l.records(nil, nil)
	if err != nil {
		return nil, err
	}
	return specsOf(l, recs)
}

// allSpecs are the specs of every infrastructure in etcd.
func (c *Cluster) allSpecs() ([]*spec.Spec, error) {
	_, recs, err := c.records()
	if err != nil {
		return nil, err
	}
	return specsOf(c, recs)
}

func specsOf(b interface {
	docOf(*store.Record) (*spec.Document, error)
}, recs []*store.Record) ([]*spec.Spec, error) {
	out := make([]*spec.Spec, 0, len(recs))
	for _, r := range recs {
		doc, err := b.docOf(r)
		if err != nil {
			return nil, err
		}
		out = append(out, doc.Spec)
	}
	return out, nil
}
