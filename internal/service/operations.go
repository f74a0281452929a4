package service

import (
	"context"

	"github.com/vnet-project/vnet/internal/history"
)

// Operations are the verbs of an infrastructure's life after its apply,
// which every back end answers: its history, a diff against a spec or
// between generations, a rollback, the applied spec with what vnet chose
// for it, one object described, and a snapshot and its restore.
type Operations interface {
	// History lists an infrastructure's history, without specs.
	History(ctx context.Context, name string) (*HistoryResult, error)
	// Generation is the history's entry of a generation, with its spec.
	Generation(ctx context.Context, name string, gen int) (*history.Entry, error)
	// HistoryRetention is how much history is kept; SetHistoryRetention
	// changes it for every writer of the store and prunes to it.
	HistoryRetention(ctx context.Context) (history.Retention, error)
	SetHistoryRetention(ctx context.Context, r history.Retention) error
	// Diff compares a spec with the applied one, or two generations.
	Diff(ctx context.Context, name string, r DiffRequest) (*DiffResult, error)
	// Rollback applies an earlier generation as a new one.
	Rollback(ctx context.Context, name string, o RollbackOptions) (*RollbackResult, error)
	// Applied is the applied spec with its allocations pinned.
	Applied(ctx context.Context, name string) (*AppliedSpec, error)
	// Describe shows one VM, port group or network.
	Describe(ctx context.Context, name, kind, object string) (*Description, error)
	// Snapshot takes an infrastructure's snapshot; Restore makes one
	// anew from it.
	Snapshot(ctx context.Context, name string) (*Snapshot, error)
	Restore(ctx context.Context, snap *Snapshot, o RestoreOptions) (*ApplyResult, error)
}

var (
	_ Service = (*Local)(nil)
	_ Service = (*Cluster)(nil)
)
