package api

import (
	"context"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/service"
)

// noOperations answers the operations after an apply with ErrNotHere, for
// the fake back end, which keeps no history: their handlers are tested
// over a real back end (ops_test.go).
type noOperations struct{}

var errNoOps = service.ErrNotHere

func (noOperations) History(context.Context, string) (*service.HistoryResult, error) {
	return nil, errNoOps
}
func (noOperations) Generation(context.Context, string, int) (*history.Entry, error) {
	return nil, errNoOps
}
func (noOperations) HistoryRetention(context.Context) (history.Retention, error) {
	return history.Retention{}, errNoOps
}
func (noOperations) SetHistoryRetention(context.Context, history.Retention) error { return errNoOps }
func (noOperations) Diff(context.Context, string, service.DiffRequest) (*service.DiffResult, error) {
	return nil, errNoOps
}
func (noOperations) Rollback(context.Context, string, service.RollbackOptions) (*service.RollbackResult, error) {
	return nil, errNoOps
}
func (noOperations) Applied(context.Context, string) (*service.AppliedSpec, error) {
	return nil, errNoOps
}
func (noOperations) Describe(context.Context, string, string, string) (*service.Description, error) {
	return nil, errNoOps
}
func (noOperations) Snapshot(context.Context, string) (*service.Snapshot, error) {
	return nil, errNoOps
}
func (noOperations) Restore(context.Context, *service.Snapshot, service.RestoreOptions) (*service.ApplyResult, error) {
	return nil, errNoOps
}
