package etcdstore

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/vnet-project/vnet/internal/store"
)

func kv(key string, rev int64, r *store.Record) *mvccpb.KeyValue {
	v, err := encodeRecord(r)
	if err != nil {
		panic(err)
	}
	return &mvccpb.KeyValue{Key: []byte(key), Value: []byte(v), ModRevision: rev}
}

// sameBytes reports whether two slices are one array: the record was not
// decoded again.
func sameBytes(a, b []byte) bool { return len(a) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b) }

func TestListDecodesOnlyChangedValues(t *testing.T) {
	big, small := fullRecord(1000), record("small", 1)
	changed := fullRecord(1000)
	changed.Generation++
	restored := fullRecord(1000)
	restored.Spec = append(bytes.Clone(restored.Spec), "# after a restore\n"...)
	var c listCache
	first := c.decode("/i/", []*mvccpb.KeyValue{kv("/i/big", 10, big), kv("/i/small", 11, small)})
	for _, tc := range []struct {
		name   string
		kvs    []*mvccpb.KeyValue
		reused []bool // whether each record is the one the first List decoded
		want   []*store.Record
	}{
		{"unchanged", []*mvccpb.KeyValue{kv("/i/big", 10, big), kv("/i/small", 11, small)}, []bool{true, true}, []*store.Record{big, small}},
		{"one changed", []*mvccpb.KeyValue{kv("/i/big", 12, changed), kv("/i/small", 11, small)}, []bool{false, true}, []*store.Record{changed, small}},
		{"back as it was, at a later revision", []*mvccpb.KeyValue{kv("/i/big", 13, big)}, []bool{false}, []*store.Record{big}},
		{"another value at the same revision", []*mvccpb.KeyValue{kv("/i/big", 13, restored)}, []bool{false}, []*store.Record{restored}},
		{"as before", []*mvccpb.KeyValue{kv("/i/big", 13, restored), kv("/i/small", 11, small)}, []bool{false, false}, []*store.Record{restored, small}},
	} {
		got := c.decode("/i/", tc.kvs)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %d records, want %d", tc.name, len(got), len(tc.want))
		}
		for i, r := range got {
			if r.Name != tc.want[i].Name || r.Generation != tc.want[i].Generation || !bytes.Equal(r.Spec, tc.want[i].Spec) {
				t.Errorf("%s: record %d is %s generation %d, want %s generation %d", tc.name, i, r.Name, r.Generation, tc.want[i].Name, tc.want[i].Generation)
			}
			if reused := sameBytes(r.Spec, first[i].Spec); reused != tc.reused[i] {
				t.Errorf("%s: record %d decoded again: %v, want %v", tc.name, i, !reused, !tc.reused[i])
			}
		}
		if len(c.byKey) != len(tc.kvs) {
			t.Errorf("%s: %d records kept, want the %d listed", tc.name, len(c.byKey), len(tc.kvs))
		}
	}
}

// What a caller changes in a listed record is not what the next List
// returns.
func TestListedRecordsAreCopies(t *testing.T) {
	var c listCache
	kvs := []*mvccpb.KeyValue{kv("/i/big", 10, fullRecord(1000))}
	first := c.decode("/i/", kvs)
	first[0].Generation, first[0].Name, first[0].Spec = -1, "changed", nil
	again := c.decode("/i/", kvs)
	if again[0] == first[0] || again[0].Generation != 42 || again[0].Name != "big" || len(again[0].Spec) == 0 {
		t.Errorf("the next List returned %s generation %d, %d bytes of spec", again[0].Name, again[0].Generation, len(again[0].Spec))
	}
}

// A value that does not decode is listed as a damaged record, the others
// as they are, and what the last List kept of the good ones stays.
func TestListOfADamagedValue(t *testing.T) {
	var c listCache
	good, small := kv("/i/big", 10, fullRecord(1000)), kv("/i/small", 11, record("small", 1))
	first := c.decode("/i/", []*mvccpb.KeyValue{good, small})
	bad := &mvccpb.KeyValue{Key: good.Key, Value: good.Value[:len(good.Value)/2], ModRevision: 12}
	got := c.decode("/i/", []*mvccpb.KeyValue{bad, small})
	if len(got) != 2 || got[0].Name != "big" || got[0].Damage == nil || got[1].Name != "small" || got[1].Damage != nil {
		t.Fatalf("listed %v", got)
	}
	if !sameBytes(got[1].Spec, first[1].Spec) {
		t.Error("the good record was decoded again")
	}
	if got := c.decode("/i/", []*mvccpb.KeyValue{good, small}); got[0].Damage != nil || got[0].Name != "big" {
		t.Errorf("after the damaged value: %v", got[0].Damage)
	}
}

// Through etcd: a second List of unchanged records decodes nothing again.
func TestListReusesUnchangedRecords(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	big := fullRecord(1000)
	for _, r := range []*store.Record{big, record("small", 1)} {
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.List()
	if err != nil || len(first) != 2 {
		t.Fatalf("List: %d records, %v", len(first), err)
	}
	big.Generation++
	if err := s.Put(big); err != nil {
		t.Fatal(err)
	}
	again, err := s.List()
	if err != nil || len(again) != 2 {
		t.Fatalf("List: %d records, %v", len(again), err)
	}
	if again[0].Generation != big.Generation || sameBytes(again[0].Spec, first[0].Spec) {
		t.Errorf("the changed record: generation %d, decoded again %v", again[0].Generation, !sameBytes(again[0].Spec, first[0].Spec))
	}
	if !sameBytes(again[1].Spec, first[1].Spec) {
		t.Errorf("the unchanged record was decoded again")
	}
}

// Lists may run at once, as the API server's handlers do.
func TestConcurrentLists(t *testing.T) {
	var c listCache
	a := []*mvccpb.KeyValue{kv("/i/big", 10, fullRecord(100)), kv("/i/small", 11, record("small", 1))}
	b := []*mvccpb.KeyValue{kv("/i/big", 12, fullRecord(200))}
	done := make(chan error)
	for i := range 8 {
		go func() {
			kvs := a
			if i%2 == 1 {
				kvs = b
			}
			for range 50 {
				if recs := c.decode("/i/", kvs); len(recs) != len(kvs) {
					done <- fmt.Errorf("%d records for %d values", len(recs), len(kvs))
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
