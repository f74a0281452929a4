package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vnet-project/vnet/internal/events"
)

// MaxEvents is how many events etcd keeps; an append past it drops the
// oldest.
const MaxEvents = 1000

func (s *Store) eventPrefix() string { return s.prefix + "events/" }

// AppendEvent keeps an event under a key that sorts by time, then drops
// the oldest beyond MaxEvents. Two writers racing may both trim; an event
// or two too many dropped is the price of taking no lock.
func (s *Store) AppendEvent(ev events.Event) error {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev.Time = ev.Time.UTC()
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("event: %w", err)
	}
	// The lease-free key: the time to the nanosecond, then the member's
	// revision at the write breaks ties between writers.
	key := fmt.Sprintf("%s%020d", s.eventPrefix(), ev.Time.UnixNano())
	err = s.call("record event", func(ctx context.Context) error {
		resp, err := s.cli.Get(ctx, key, clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		k := key
		if resp.Count > 0 {
			k = fmt.Sprintf("%s-%d", key, resp.Header.Revision)
		}
		_, err = s.cli.Put(ctx, k, string(data))
		return err
	})
	if err != nil {
		return err
	}
	return s.trimEvents()
}

func (s *Store) trimEvents() error {
	return s.call("trim events", func(ctx context.Context) error {
		resp, err := s.cli.Get(ctx, s.eventPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		keep := int64(MaxEvents)
		if s.eventCap > 0 {
			keep = int64(s.eventCap)
		}
		if err != nil || resp.Count <= keep {
			return err
		}
		old, err := s.cli.Get(ctx, s.eventPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(resp.Count-keep))
		if err != nil || len(old.Kvs) == 0 {
			return err
		}
		last := old.Kvs[len(old.Kvs)-1].Key
		_, err = s.cli.Delete(ctx, s.eventPrefix(), clientv3.WithRange(string(last)+"\x00"))
		return err
	})
}

// Events returns the kept events, oldest first; one that does not decode
// is skipped.
func (s *Store) Events() ([]events.Event, error) {
	var resp *clientv3.GetResponse
	err := s.call("events", func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, s.eventPrefix(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]events.Event, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var ev events.Event
		if json.Unmarshal(kv.Value, &ev) == nil {
			out = append(out, ev)
		}
	}
	return out, nil
}
