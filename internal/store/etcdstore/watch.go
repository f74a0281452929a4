package etcdstore

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchInfra signals on the channel it returns whenever an infrastructure's
// record is put or deleted. Signals coalesce (the channel holds one), so a
// receiver reads the records afresh each time rather than learning what
// changed. A watch that breaks (etcd unreachable, history compacted) is
// made again; the channel closes when ctx ends. Whoever watches should also
// read now and then: a change made while no watch stood is signalled only
// once the new watch stands, as one signal.
func (s *Store) WatchInfra(ctx context.Context) <-chan struct{} {
	return s.watchPrefix(ctx, s.infraKey(""))
}

// watchPrefix signals, as WatchInfra says, whenever a key under prefix is
// put or deleted.
func (s *Store) watchPrefix(ctx context.Context, prefix string) <-chan struct{} {
	ch := make(chan struct{}, 1)
	signal := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(ch)
		for ctx.Err() == nil {
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			// The first answer says the watch stands; a change between the
			// watcher's last read and that moment is seen by no watch, so
			// that answer signals too.
			for resp := range s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify()) {
				if resp.Err() != nil {
					break
				}
				if resp.Created || len(resp.Events) > 0 {
					signal()
				}
			}
			cancel()
			// Whatever changed while the watch was down is read on this signal.
			signal()
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return ch
}
