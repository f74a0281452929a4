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
			for resp := range s.cli.Watch(wctx, s.infraKey(""), clientv3.WithPrefix()) {
				if resp.Err() != nil {
					break
				}
				if len(resp.Events) > 0 {
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
