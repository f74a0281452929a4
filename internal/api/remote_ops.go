package api

import (
	"context"
	"io"
	"path/filepath"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/service"
)

// History lists an infrastructure's history on the server.
func (r *Remote) History(ctx context.Context, name string) (*service.HistoryResult, error) {
	return r.C.History(ctx, name)
}

// Generation is a generation's history entry on the server.
func (r *Remote) Generation(ctx context.Context, name string, gen int) (*history.Entry, error) {
	return r.C.Generation(ctx, name, gen)
}

// HistoryRetention is the server's retention.
func (r *Remote) HistoryRetention(ctx context.Context) (history.Retention, error) {
	return r.C.Retention(ctx)
}

// SetHistoryRetention changes the server's retention.
func (r *Remote) SetHistoryRetention(ctx context.Context, ret history.Retention) error {
	return r.C.SetRetention(ctx, ret)
}

// Diff sends the spec, read and checked here, for the server to compare.
func (r *Remote) Diff(ctx context.Context, name string, req service.DiffRequest) (*service.DiffResult, error) {
	var file string
	var yaml []byte
	if req.Source != nil {
		doc, err := r.load(*req.Source)
		if err != nil {
			return nil, err
		}
		yaml, file = doc.Source, doc.File
		if req.Source.File != "" {
			file, _ = filepath.Abs(req.Source.File)
		}
	}
	return r.C.Diff(ctx, name, req.From, req.To, req.Plan, file, yaml)
}

// Rollback asks the server to roll back; its plan goes to Log as an
// apply's would.
func (r *Remote) Rollback(ctx context.Context, name string, o service.RollbackOptions) (*service.RollbackResult, error) {
	if o.Apply.Wait > 0 {
		return nil, errWaitNeedsEtcd
	}
	res, err := r.C.Rollback(ctx, name, o)
	if err != nil {
		return nil, err
	}
	logPlan(o.Apply, res.ApplyResult)
	return res, nil
}

// Applied is the server's applied spec, its allocations pinned.
func (r *Remote) Applied(ctx context.Context, name string) (*service.AppliedSpec, error) {
	return r.C.Applied(ctx, name)
}

// Describe shows one object as the server sees it.
func (r *Remote) Describe(ctx context.Context, name, kind, object string) (*service.Description, error) {
	return r.C.Describe(ctx, name, kind, object)
}

// Snapshot takes a snapshot on the server.
func (r *Remote) Snapshot(ctx context.Context, name string) (*service.Snapshot, error) {
	return r.C.Snapshot(ctx, name)
}

// Restore sends the snapshot to the server.
func (r *Remote) Restore(ctx context.Context, snap *service.Snapshot, o service.RestoreOptions) (*service.ApplyResult, error) {
	if o.Apply.Wait > 0 {
		return nil, errWaitNeedsEtcd
	}
	y, err := snap.YAML()
	if err != nil {
		return nil, err
	}
	res, err := r.C.Restore(ctx, y, o.Apply.DryRun)
	if err != nil {
		return nil, err
	}
	logPlan(o.Apply, res)
	return res, nil
}

// logPlan writes a change's plan to its log, as a local apply would.
func logPlan(o service.ApplyOptions, res *service.ApplyResult) {
	if !o.DryRun && o.Log != nil && res != nil {
		io.WriteString(o.Log, service.PlanText(res.Plan))
	}
}
