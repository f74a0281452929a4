package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/vnet-project/vnet/internal/store"
)

// lockTTL is how long a lock outlives a command that died holding it: the
// session's lease then runs out and etcd drops the lock, as the kernel
// drops a dead process's flock.
const lockTTL = 10

// identity caches the cluster's store ID: one per prefix, made by the first
// vnet that asks, so every host's namespaces carry the same mark.
type identity struct {
	once sync.Once
	id   string
	err  error
}

func (s *Store) idKey() string { return s.prefix + "store-id" }

// ID is the store's ID, kept in etcd under the prefix. It returns "" when
// etcd cannot be read; the Store interface has no error here, and a mark
// of "" is what an unmarked namespace has, which ownership checks refuse.
func (s *Store) ID() string {
	id, _ := s.loadID()
	return id
}

func (s *Store) loadID() (string, error) {
	s.ident.once.Do(func() {
		fresh := store.NewID()
		s.ident.err = s.call("store id", func(ctx context.Context) error {
			// Create if absent, then read whichever won.
			resp, err := s.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(s.idKey()), "=", 0)).
				Then(clientv3.OpPut(s.idKey(), fresh)).
				Else(clientv3.OpGet(s.idKey())).
				Commit()
			if err != nil {
				return err
			}
			if resp.Succeeded {
				s.ident.id = fresh
				return nil
			}
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				return errors.New("store id vanished while read")
			}
			s.ident.id = string(kvs[0].Value)
			return nil
		})
	})
	return s.ident.id, s.ident.err
}

// Location says where the store is: its endpoints and prefix.
func (s *Store) Location() string { return "etcd " + s.where + " " + s.prefix }

func (s *Store) lockKey(name string) string { return s.prefix + "lock/" + name }

// Lock takes the infrastructure's lock in etcd, so that two applies from
// two machines take turns. A holder that dies releases it within lockTTL
// seconds. A lock held by another fails at once with store.ErrLocked.
func (s *Store) Lock(name string) (unlock func(), err error) {
	if err := checkName("infrastructure", name); err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx()
	defer cancel()
	sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(lockTTL), concurrency.WithContext(context.Background()))
	if err != nil {
		return nil, s.fail("lock "+name, err)
	}
	m := concurrency.NewMutex(sess, s.lockKey(name))
	if err := m.TryLock(ctx); err != nil {
		sess.Close()
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, fmt.Errorf("%s is being changed by another vnet command (etcd %s): try again when it has finished: %w",
				name, s.where, store.ErrLocked)
		}
		return nil, s.fail("lock "+name, err)
	}
	return func() {
		ctx, cancel := s.ctx()
		defer cancel()
		_ = m.Unlock(ctx)
		sess.Close()
	}, nil
}
