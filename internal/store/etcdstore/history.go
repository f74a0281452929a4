package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/store"
)

// An infrastructure's history lives under a prefix of its own, beside the
// records and never under /vnet/infra/, which the agents watch:
//
//	<prefix>history/<infra>/seq                 the last Seq given (decimal)
//	<prefix>history/<infra>/h/<seq, 20 digits>  an entry's head (JSON, without its spec)
//	<prefix>history/<infra>/s/<seq, 20 digits>  its spec (store.EncodeHistorySpec)
//	<prefix>settings/history                    the retention (JSON)
//
// A change's entry is written in the etcd transaction that writes its
// record (PutIfRecorded, DeleteIfRevRecorded): either both are stored or
// neither. Heads and specs are apart so that a listing reads no spec.

var _ store.HistoryStore = (*Store)(nil)

func (s *Store) historyPrefix(infra string) string { return s.prefix + "history/" + infra + "/" }
func (s *Store) seqKey(infra string) string        { return s.historyPrefix(infra) + "seq" }
func (s *Store) headKey(infra string, seq int) string {
	return fmt.Sprintf("%sh/%020d", s.historyPrefix(infra), seq)
}
func (s *Store) specKey(infra string, seq int) string {
	return fmt.Sprintf("%ss/%020d", s.historyPrefix(infra), seq)
}
func (s *Store) retentionKey() string { return s.prefix + "settings/history" }

// maxPruneRuns bounds the runs of entries one transaction deletes (two
// range deletions each), within etcd's 128 operations a transaction: what
// is left is pruned by the next change.
const maxPruneRuns = 40

// appendTries bounds how often an entry is tried again after another
// writer took its Seq meanwhile.
const appendTries = 8

// historyRead is what appending an entry reads first, at one revision.
type historyRead struct {
	seq       int   // the last Seq given
	seqRev    int64 // the revision of the seq key; 0 when absent
	heads     []history.Entry
	retention history.Retention
}

func (s *Store) readHistory(ctx context.Context, infra string) (historyRead, error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.seqKey(infra)),
		clientv3.OpGet(s.historyPrefix(infra)+"h/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)),
		clientv3.OpGet(s.retentionKey()),
	).Commit()
	var h historyRead
	if err != nil {
		return h, err
	}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		if h.seq, err = strconv.Atoi(string(kvs[0].Value)); err != nil || h.seq < 0 {
			return h, fmt.Errorf("etcd key %s: damaged: %q is not a sequence number", kvs[0].Key, kvs[0].Value)
		}
		h.seqRev = kvs[0].ModRevision
	}
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		e, err := store.DecodeHistoryHead(infra, kv.Value)
		if err != nil {
			return h, fmt.Errorf("etcd key %s: %w", kv.Key, err)
		}
		h.heads = append(h.heads, e)
	}
	if kvs := resp.Responses[2].GetResponseRange().GetKvs(); len(kvs) > 0 {
		if h.retention, err = store.DecodeRetention(kvs[0].Value); err != nil {
			return h, fmt.Errorf("etcd key %s: %w", kvs[0].Key, err)
		}
	}
	return h, nil
}

// entryOps are the operations that keep e as entry h.seq+1 and drop what
// the retention no longer keeps.
func (s *Store) entryOps(e *history.Entry, h historyRead) ([]clientv3.Op, error) {
	e.Seq = h.seq + 1
	head, err := json.Marshal(e.Head())
	if err != nil {
		return nil, err
	}
	ops := []clientv3.Op{clientv3.OpPut(s.seqKey(e.Infra), strconv.Itoa(e.Seq))}
	_, dropped := h.retention.Prune(append(h.heads, e.Head()), e.Generation, time.Now())
	if n := len(dropped); n > 0 && dropped[n-1].Seq == e.Seq {
		// The retention keeps not even this entry (one entry kept, and a
		// pause after the spec in force): its Seq is given, its keys are
		// not written, as etcd refuses a transaction that puts and deletes
		// one key.
		dropped = dropped[:n-1]
	} else {
		ops = append(ops, clientv3.OpPut(s.headKey(e.Infra, e.Seq), string(head)))
		if len(e.Spec) > 0 {
			ops = append(ops, clientv3.OpPut(s.specKey(e.Infra, e.Seq), string(store.EncodeHistorySpec(e.Spec))))
		}
	}
	prune, _ := s.pruneOps(e.Infra, dropped)
	return append(ops, prune...), nil
}

// pruneOps deletes the dropped entries (in Seq order), a range deletion
// per run of consecutive ones, at most maxPruneRuns runs; it returns how
// many of them the operations delete.
func (s *Store) pruneOps(infra string, dropped []history.Entry) (ops []clientv3.Op, covered int) {
	i := 0
	for i < len(dropped) && len(ops) < 2*maxPruneRuns {
		j := i
		for j+1 < len(dropped) && dropped[j+1].Seq == dropped[j].Seq+1 {
			j++
		}
		from, to := dropped[i].Seq, dropped[j].Seq+1
		ops = append(ops,
			clientv3.OpDelete(s.headKey(infra, from), clientv3.WithRange(s.headKey(infra, to))),
			clientv3.OpDelete(s.specKey(infra, from), clientv3.WithRange(s.specKey(infra, to))))
		i = j + 1
	}
	return ops, i
}

// recorded runs, in one transaction, the change then (when the record key
// still has revision rev) and keeps entry e of it. A transaction that
// loses the entry's Seq to another writer is tried again; one whose
// record changed is a *ConflictError.
func (s *Store) recorded(op, name string, rev int64, then []clientv3.Op, e history.Entry) (*clientv3.TxnResponse, history.Entry, error) {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	if err := checkEntry(e); err != nil {
		return nil, e, err
	}
	for try := 0; ; try++ {
		var resp *clientv3.TxnResponse
		err := s.call(op, func(ctx context.Context) error {
			h, err := s.readHistory(ctx, e.Infra)
			if err != nil {
				return err
			}
			ops, err := s.entryOps(&e, h)
			if err != nil {
				return err
			}
			conds := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.seqKey(e.Infra)), "=", h.seqRev)}
			var orElse []clientv3.Op
			if name != "" {
				conds = append(conds, clientv3.Compare(clientv3.ModRevision(s.infraKey(name)), "=", rev))
				orElse = append(orElse, clientv3.OpGet(s.infraKey(name), clientv3.WithKeysOnly()))
			}
			resp, err = s.cli.Txn(ctx).If(conds...).Then(slices.Concat(then, ops)...).Else(orElse...).Commit()
			return err
		})
		if err != nil {
			return nil, e, err
		}
		if resp.Succeeded {
			return resp, e, nil
		}
		if name != "" && foundRev(resp) != rev {
			return nil, e, conflict(name, rev, resp)
		}
		if try == appendTries {
			return nil, e, fmt.Errorf("%s: history of %s: other writers kept taking the next entry; try again", op, e.Infra)
		}
	}
}

// foundRev is the record's revision an Else branch read (0: none).
func foundRev(resp *clientv3.TxnResponse) int64 {
	if len(resp.Responses) == 1 {
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			return kvs[0].ModRevision
		}
	}
	return 0
}

func checkEntry(e history.Entry) error {
	if err := checkName("infrastructure", e.Infra); err != nil {
		return err
	}
	e.Seq = 1 // given here
	return e.Validate()
}

// AppendHistory keeps an entry of a change that writes no record (a pause,
// a resume).
func (s *Store) AppendHistory(e history.Entry) (history.Entry, error) {
	_, e, err := s.recorded("history "+e.Infra, "", 0, nil, e)
	return e, err
}

// PutIfRecorded is PutIf, keeping e (the change's history entry) in the
// same transaction. A record etcd finds too large with its spec's
// encoding is stored without it, and then, should it still be too large
// with its entry's copy of the spec, with the entry alone, without its
// spec (which its summary says).
func (s *Store) PutIfRecorded(r *store.Record, expectRev int64, e history.Entry) (int64, history.Entry, error) {
	v, err := encodeRecord(r)
	if err != nil {
		return 0, e, err
	}
	resp, kept, err := s.recorded("put "+r.Name, r.Name, expectRev, []clientv3.Op{clientv3.OpPut(s.infraKey(r.Name), v)}, e)
	if err != nil && tooLarge(err) {
		if r.SpecEncoded != nil {
			return s.PutIfRecorded(r.WithoutEncoding(), expectRev, e)
		}
		if len(e.Spec) > 0 {
			e.Spec = nil
			e.Summary = strings.TrimSpace(e.Summary + " (spec too large to keep in the history beside the record)")
			return s.PutIfRecorded(r, expectRev, e)
		}
	}
	if err != nil {
		return 0, kept, err
	}
	return resp.Header.Revision, kept, nil
}

// DeleteIfRevRecorded is DeleteIfRev, keeping e (the destroy's history
// entry) in the same transaction.
func (s *Store) DeleteIfRevRecorded(name string, expectRev int64, e history.Entry) (int64, history.Entry, error) {
	if err := checkName("infrastructure", name); err != nil {
		return 0, e, err
	}
	resp, kept, err := s.recorded("delete "+name, name, expectRev, []clientv3.Op{clientv3.OpDelete(s.infraKey(name))}, e)
	if err != nil && tooLarge(err) && len(e.Spec) > 0 {
		e.Spec = nil
		return s.DeleteIfRevRecorded(name, expectRev, e)
	}
	if err != nil {
		return 0, kept, err
	}
	return resp.Header.Revision, kept, nil
}

// HistoryHeads lists an infrastructure's entries without their specs,
// oldest first.
func (s *Store) HistoryHeads(infra string) ([]history.Entry, error) {
	if err := checkName("infrastructure", infra); err != nil {
		return nil, err
	}
	var h historyRead
	err := s.call("history "+infra, func(ctx context.Context) (err error) {
		h, err = s.readHistory(ctx, infra)
		return err
	})
	return h.heads, err
}

// HistoryEntry is one entry with its spec.
func (s *Store) HistoryEntry(infra string, seq int) (history.Entry, error) {
	var e history.Entry
	if err := checkName("infrastructure", infra); err != nil {
		return e, err
	}
	var resp *clientv3.TxnResponse
	err := s.call("history "+infra, func(ctx context.Context) (err error) {
		resp, err = s.cli.Txn(ctx).Then(clientv3.OpGet(s.headKey(infra, seq)), clientv3.OpGet(s.specKey(infra, seq))).Commit()
		return err
	})
	if err != nil {
		return e, err
	}
	head := resp.Responses[0].GetResponseRange().GetKvs()
	if len(head) == 0 {
		return e, fmt.Errorf("%s entry %d: %w", infra, seq, history.ErrNotFound)
	}
	if e, err = store.DecodeHistoryHead(infra, head[0].Value); err != nil {
		return e, fmt.Errorf("etcd key %s: %w", head[0].Key, err)
	}
	if spec := resp.Responses[1].GetResponseRange().GetKvs(); len(spec) > 0 {
		if e.Spec, err = store.DecodeHistorySpec(spec[0].Value); err != nil {
			return e, fmt.Errorf("etcd key %s: %w", spec[0].Key, err)
		}
	}
	return e, nil
}

// HistoryRetention is the retention stored in etcd; the default when none
// was set.
func (s *Store) HistoryRetention() (history.Retention, error) {
	var resp *clientv3.GetResponse
	err := s.call("history retention", func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, s.retentionKey())
		return err
	})
	if err != nil || len(resp.Kvs) == 0 {
		return history.Retention{}, err
	}
	return store.DecodeRetention(resp.Kvs[0].Value)
}

// SetHistoryRetention stores the retention every writer follows, then
// prunes each infrastructure's history to it.
func (s *Store) SetHistoryRetention(r history.Retention) error {
	if err := r.Validate(); err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := s.call("history retention", func(ctx context.Context) error {
		_, err := s.cli.Put(ctx, s.retentionKey(), string(v))
		return err
	}); err != nil {
		return err
	}
	names, err := s.historyNames()
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := s.pruneAll(name, r); err != nil {
			return err
		}
	}
	return nil
}

// historyNames are the infrastructures with a history, destroyed ones
// among them.
func (s *Store) historyNames() ([]string, error) {
	var resp *clientv3.GetResponse
	prefix := s.prefix + "history/"
	err := s.call("history", func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kv := range resp.Kvs {
		if name, ok := strings.CutSuffix(strings.TrimPrefix(string(kv.Key), prefix), "/seq"); ok {
			out = append(out, name)
		}
	}
	return out, nil
}

// pruneAll prunes one history to r, against its record's generation.
func (s *Store) pruneAll(name string, r history.Retention) error {
	current := 0
	rec, _, err := s.GetRev(name)
	switch {
	case err == nil:
		current = rec.Generation
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	heads, err := s.HistoryHeads(name)
	if err != nil {
		return err
	}
	_, dropped := r.Prune(heads, current, time.Now())
	for len(dropped) > 0 {
		ops, covered := s.pruneOps(name, dropped)
		if err := s.call("prune history of "+name, func(ctx context.Context) error {
			_, err := s.cli.Txn(ctx).Then(ops...).Commit()
			return err
		}); err != nil {
			return err
		}
		dropped = dropped[covered:]
	}
	return nil
}
