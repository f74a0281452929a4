package etcdstore

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/store"
)

func historyEntry(infra string, gen int, verb history.Verb) history.Entry {
	e := history.Entry{Infra: infra, Generation: gen, Verb: verb, Who: "ci", Via: history.API, Remote: "192.0.2.7:4711"}
	if verb.ChangesSpec() || verb == history.Destroy {
		e.Spec = history.Text(fmt.Sprintf("name: %s # %d\n", infra, gen))
	}
	return e
}

func seqs(es []history.Entry) string {
	var s []string
	for _, e := range es {
		s = append(s, fmt.Sprint(e.Seq))
	}
	return strings.Join(s, " ")
}

// Each change's entry is written with its record, in one transaction; the
// history is bounded by the retention stored in etcd and is there for a
// client that connects afresh.
func TestHistoryWithRecords(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv.Endpoint())
	if err := s.SetHistoryRetention(history.Retention{MaxEntries: 3}); err != nil {
		t.Fatal(err)
	}
	rev := int64(0)
	for gen := 1; gen <= 4; gen++ {
		var e history.Entry
		var err error
		rev, e, err = s.PutIfRecorded(record("demo", gen), rev, historyEntry("demo", gen, history.Apply))
		if err != nil || e.Seq != gen {
			t.Fatalf("generation %d: %+v, %v", gen, e, err)
		}
	}
	// A stale revision stores neither the record nor the entry.
	if _, _, err := s.PutIfRecorded(record("demo", 9), rev-1, historyEntry("demo", 9, history.Apply)); !errors.Is(err, ErrConflict) {
		t.Fatalf("a stale put: %v, want ErrConflict", err)
	}
	if _, err := s.AppendHistory(historyEntry("demo", 4, history.Pause)); err != nil {
		t.Fatal(err)
	}
	deleted, e, err := s.DeleteIfRevRecorded("demo", rev, historyEntry("demo", 0, history.Destroy))
	if err != nil || deleted == 0 || e.Seq != 6 {
		t.Fatalf("destroy: %d, %+v, %v", deleted, e, err)
	}

	again := openStore(t, srv.Endpoint())
	again.prefix = s.prefix
	heads, err := again.HistoryHeads("demo")
	if err != nil || seqs(heads) != "4 5 6" {
		t.Fatalf("heads: %q, %v; want 4 5 6", seqs(heads), err)
	}
	if heads[2].Verb != history.Destroy || heads[0].Spec != nil || heads[0].Remote != "192.0.2.7:4711" {
		t.Errorf("heads: %+v", heads)
	}
	got, err := again.HistoryEntry("demo", 4)
	if err != nil || string(got.Spec) != "name: demo # 4\n" {
		t.Errorf("entry 4: %+v, %v", got, err)
	}
	if _, err := again.HistoryEntry("demo", 2); !errors.Is(err, history.ErrNotFound) {
		t.Errorf("a pruned entry: %v", err)
	}
	if _, err := again.Get("demo"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the record after the destroy: %v", err)
	}
	// The name applied anew starts from generation 1 and goes on counting
	// entries.
	if _, e, err := again.PutIfRecorded(record("demo", 1), 0, historyEntry("demo", 1, history.Apply)); err != nil || e.Seq != 7 {
		t.Errorf("applied anew: %+v, %v", e, err)
	}
	if err := again.SetHistoryRetention(history.Retention{MaxEntries: 1}); err != nil {
		t.Fatal(err)
	}
	if heads, _ := again.HistoryHeads("demo"); seqs(heads) != "7" {
		t.Errorf("after retention 1: %q", seqs(heads))
	}
	if r, err := again.HistoryRetention(); err != nil || r.MaxEntries != 1 {
		t.Errorf("retention: %+v, %v", r, err)
	}
	// Nothing of the history is under the prefix the agents watch.
	resp, err := again.cli.Get(t.Context(), again.infraKey(""), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) != 1 {
		t.Errorf("keys under %s: %v, %v", again.infraKey(""), resp.Kvs, err)
	}
}

// Writers appending at once each get an entry of their own.
func TestHistoryConcurrentAppends(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.AppendHistory(historyEntry("demo", 1, history.Pause))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if heads, _ := s.HistoryHeads("demo"); seqs(heads) != "1 2 3 4 5 6" {
		t.Errorf("heads %q", seqs(heads))
	}
}

// A retention shrunk by hundreds of entries prunes them at once, keeping
// the current generation's entry wherever it lies.
func TestHistoryPruneShrunk(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	if err := s.SetHistoryRetention(history.Retention{MaxEntries: 1000}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 200; i++ {
		e := historyEntry("demo", i, history.Apply)
		e.At = time.Now().Add(-time.Duration(201-i) * time.Minute)
		if _, err := s.AppendHistory(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(record("demo", 7)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHistoryRetention(history.Retention{MaxEntries: 2}); err != nil {
		t.Fatal(err)
	}
	if heads, _ := s.HistoryHeads("demo"); seqs(heads) != "7 200" {
		t.Errorf("heads %q, want the current generation's and the newest", seqs(heads))
	}
	resp, err := s.cli.Get(t.Context(), s.historyPrefix("demo")+"s/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 2 {
		t.Errorf("specs kept: %d, %v", resp.Count, err)
	}
}

func TestHistoryRefusesBadInput(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	for name, e := range map[string]history.Entry{
		"slash": {Infra: "a/b", Verb: history.Apply, Via: history.CLI},
		"verb":  {Infra: "demo", Verb: "explode", Via: history.CLI},
	} {
		if _, err := s.AppendHistory(e); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := s.HistoryHeads("a/b"); err == nil {
		t.Error("heads of a/b: no error")
	}
	// A damaged sequence number or head is an error naming its key.
	s.cli.Put(t.Context(), s.seqKey("bad"), "x")
	if _, err := s.HistoryHeads("bad"); err == nil || !strings.Contains(err.Error(), s.seqKey("bad")) {
		t.Errorf("a damaged sequence: %v", err)
	}
	s.cli.Put(t.Context(), s.headKey("worse", 1), "{")
	if _, err := s.HistoryHeads("worse"); err == nil || !strings.Contains(err.Error(), s.headKey("worse", 1)) {
		t.Errorf("a damaged head: %v", err)
	}
}
