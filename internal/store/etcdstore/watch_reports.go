package etcdstore

import "context"

// WatchReports signals on the channel it returns whenever a host's report
// of the infrastructure is put or withdrawn (a lease that ran out
// withdraws it too), as WatchInfra does for records: signals coalesce, a
// broken watch is made again, and the channel closes when ctx ends.
func (s *Store) WatchReports(ctx context.Context, infra string) <-chan struct{} {
	return s.watchPrefix(ctx, s.reportPrefix(infra))
}
