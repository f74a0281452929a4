package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/spec"
)

// RollbackOptions say what a rollback goes back to and how it applies it.
type RollbackOptions struct {
	// To is the generation to go back to; 0 is the one before the
	// current (history.Previous), or for a destroyed infrastructure the
	// last before its destroy.
	To int
	// Apply says how the earlier spec is applied: as an apply of it, with
	// the same guarantees (a dry run, a wait for the hosts over etcd).
	Apply ApplyOptions
	// DropAttached takes out the VMs runtimes attached that the earlier
	// generation has no place for (misfit), instead of refusing the
	// rollback (ErrAttached), as a pause of what the earlier generation
	// lacks goes with it. Those attached that fit are kept either way
	// (keepAttached).
	DropAttached bool
}

// RollbackResult is what a rollback applied.
type RollbackResult struct {
	// To is the generation gone back to; the result's generation (its
	// Stored one over etcd) is a new one.
	To int `json:"to"`
	*ApplyResult
}

// Rollback applies an earlier generation's spec from the history as a new
// generation.
func (l *Local) Rollback(ctx context.Context, name string, o RollbackOptions) (*RollbackResult, error) {
	return rollback(ctx, l, name, o)
}

// Rollback stores an earlier generation's spec from the history in etcd
// as a new generation, which the hosts' agents realize.
func (c *Cluster) Rollback(ctx context.Context, name string, o RollbackOptions) (*RollbackResult, error) {
	return rollback(ctx, c, name, o)
}

func rollback(ctx context.Context, b historian, name string, o RollbackOptions) (*RollbackResult, error) {
	e, err := rollbackTarget(b, name, o.To)
	if err != nil {
		return nil, fmt.Errorf("rollback %s: %w", name, err)
	}
	doc, err := b.Load(e.SpecFile, e.Spec)
	if err != nil {
		return nil, fmt.Errorf("rollback %s: generation %d's spec: %w", name, e.Generation, err)
	}
	what := fmt.Sprintf("generation %d", e.Generation)
	var res *ApplyResult
	for try := 0; ; try++ {
		res, err = applyKeepingAttached(withChange(ctx, history.Rollback, e.Generation), b, what, doc, o.Apply, o.DropAttached)
		// Over etcd, an attachment stored since the rollback read the
		// generation in force: worked out again against it.
		if !errors.Is(err, ErrConflict) || try >= conflictTries {
			break
		}
	}
	if res == nil {
		return nil, err
	}
	return &RollbackResult{To: e.Generation, ApplyResult: res}, err
}

// applyKeepingAttached applies target, an earlier spec of the
// infrastructure, with the VMs runtimes attach now kept as they are
// (keepAttached), worked out against the spec in force where the apply
// reads it.
func applyKeepingAttached(ctx context.Context, b historian, what string, target *spec.Document, o ApplyOptions, drop bool) (*ApplyResult, error) {
	return applyWithAttached(ctx, func(*spec.Document) string { return what }, drop, false, func(ctx context.Context) (*ApplyResult, error) {
		return b.Apply(ctx, Source{Doc: target}, o)
	})
}

// rollbackTarget is the entry, with its spec, that a rollback applies.
func rollbackTarget(b historian, name string, to int) (*history.Entry, error) {
	if to < 0 {
		return nil, Invalid(fmt.Sprintf("--to %d: want a generation, 1 or more", to))
	}
	k, done, err := b.keeper()
	if err != nil {
		return nil, err
	}
	defer done()
	heads, current, err := headsOf(k, name)
	if err != nil {
		return nil, err
	}
	if to > 0 {
		return entryWithSpec(k, name, heads, to)
	}
	h, err := history.Previous(heads, current)
	if err != nil {
		return nil, notKept(name, err)
	}
	return wholeEntry(k, name, h)
}
