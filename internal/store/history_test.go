package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vnet-project/vnet/internal/history"
)

func entry(infra string, gen int, verb history.Verb) history.Entry {
	e := history.Entry{Infra: infra, Generation: gen, Verb: verb, Who: "alice@hv1", Via: history.CLI, Summary: fmt.Sprintf("gen %d", gen)}
	if verb.ChangesSpec() || verb == history.Destroy {
		e.Spec = history.Text(fmt.Sprintf("name: %s # %d\n", infra, gen))
	}
	return e
}

func seqsOf(es []history.Entry) string {
	var s []string
	for _, e := range es {
		s = append(s, fmt.Sprint(e.Seq))
	}
	return strings.Join(s, " ")
}

// A history is kept per infrastructure, bounded by the store's retention,
// and read back whole by a store opened afresh (a later command, a
// restarted server).
func TestBoltHistoryBoundedAndDurable(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetHistoryRetention(history.Retention{MaxEntries: 3}); err != nil {
		t.Fatal(err)
	}
	for gen := 1; gen <= 5; gen++ {
		e, err := b.AppendHistory(entry("demo", gen, history.Apply))
		if err != nil || e.Seq != gen || e.At.IsZero() {
			t.Fatalf("append %d: %+v, %v", gen, e, err)
		}
	}
	if _, err := b.AppendHistory(entry("other", 1, history.Apply)); err != nil {
		t.Fatal(err)
	}
	b.Close()

	again, err := OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	heads, err := again.HistoryHeads("demo")
	if err != nil || seqsOf(heads) != "3 4 5" {
		t.Fatalf("heads after reopening: %q, %v; want 3 4 5", seqsOf(heads), err)
	}
	for _, h := range heads {
		if h.Spec != nil {
			t.Errorf("a head carries its spec: %+v", h)
		}
	}
	e, err := again.HistoryEntry("demo", 4)
	if err != nil || string(e.Spec) != "name: demo # 4\n" || e.Summary != "gen 4" {
		t.Errorf("entry 4: %+v, %v", e, err)
	}
	if _, err := again.HistoryEntry("demo", 1); !errors.Is(err, history.ErrNotFound) {
		t.Errorf("a pruned entry: %v", err)
	}
	if other, _ := again.HistoryHeads("other"); seqsOf(other) != "1" {
		t.Errorf("the other infrastructure's history: %q", seqsOf(other))
	}
	if none, err := again.HistoryHeads("nothing"); err != nil || len(none) != 0 {
		t.Errorf("an unknown infrastructure: %v, %v", none, err)
	}
	// Sequence numbers never go back, whatever was pruned.
	if e, _ := again.AppendHistory(entry("demo", 6, history.Apply)); e.Seq != 6 {
		t.Errorf("next seq %d, want 6", e.Seq)
	}
	// A smaller retention prunes every history at once, keeping each
	// one's current generation.
	if err := again.Put(&Record{Name: "demo", Generation: 5}); err != nil {
		t.Fatal(err)
	}
	if err := again.SetHistoryRetention(history.Retention{MaxEntries: 1}); err != nil {
		t.Fatal(err)
	}
	if heads, _ := again.HistoryHeads("demo"); seqsOf(heads) != "5" {
		t.Errorf("after retention 1: %q, want the current generation's entry 5", seqsOf(heads))
	}
	if r, err := again.HistoryRetention(); err != nil || r.MaxEntries != 1 {
		t.Errorf("retention: %+v, %v", r, err)
	}
	if err := again.SetHistoryRetention(history.Retention{MaxEntries: -1}); !errors.Is(err, history.ErrInvalid) {
		t.Errorf("a negative retention: %v", err)
	}
	// The good copy has the history too: recovery keeps it.
	if err := verifyGoodHistory(dir); err != nil {
		t.Error(err)
	}
}

func verifyGoodHistory(dir string) error {
	db, err := bolt.Open(dir+"/"+goodFile, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		h := historyOf(tx, "demo")
		if h == nil || h.Get(historyKey('h', 5)) == nil {
			return errors.New("the good copy lacks the history")
		}
		return nil
	})
}

func TestBoltHistoryByAge(t *testing.T) {
	b, err := OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetHistoryRetention(history.Retention{MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	old := entry("demo", 1, history.Apply)
	old.At = time.Now().Add(-2 * time.Hour)
	b.AppendHistory(old)
	b.AppendHistory(entry("demo", 2, history.Apply))
	if heads, _ := b.HistoryHeads("demo"); seqsOf(heads) != "2" {
		t.Errorf("heads %q, want the entry younger than an hour", seqsOf(heads))
	}
}

func TestBoltHistoryRefusesBadEntries(t *testing.T) {
	b, err := OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]history.Entry{
		"no infra": {Verb: history.Apply, Via: history.CLI},
		"verb":     {Infra: "demo", Verb: "explode", Via: history.CLI},
		"face":     {Infra: "demo", Verb: history.Apply, Via: "telepathy"},
	} {
		if _, err := b.AppendHistory(e); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestHistorySpecEncoding(t *testing.T) {
	large := bytes.Repeat([]byte("  - {name: net0001, subnet: 10.0.0.0/24}\n"), 5000)
	for _, spec := range [][]byte{nil, []byte("name: demo\n"), large} {
		v := EncodeHistorySpec(spec)
		back, err := DecodeHistorySpec(v)
		if err != nil || !bytes.Equal(back, spec) {
			t.Errorf("%d bytes: %v", len(spec), err)
		}
	}
	if v := EncodeHistorySpec(large); len(v) > len(large)/10 {
		t.Errorf("a repetitive spec of %d bytes is kept as %d", len(large), len(v))
	}
	for name, v := range map[string][]byte{
		"empty":          {},
		"unknown form":   {7, 'x'},
		"huge length":    {specCompressed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"not zstd":       append([]byte{specCompressed, 10}, "garbage!!!"...),
		"wrong length":   append([]byte{specCompressed, 3}, EncodeHistorySpec(large)[3:]...),
		"truncated zstd": EncodeHistorySpec(large)[:40],
	} {
		if _, err := DecodeHistorySpec(v); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// A large spec's entry written with its record keeps the record's
// chunks, compressed once for both, and reads back byte for byte: in the
// file and its good copy, from the value that wrote it and from one
// opened afresh, whichever entries the retention dropped.
func TestHistorySpecChunked(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	if err := b.SetHistoryRetention(history.Retention{MaxEntries: 3}); err != nil {
		t.Fatal(err)
	}
	recs := changeRecords(t, 1000)
	for gen := 1; gen <= 5; gen++ {
		r := recs[gen%2]
		r.Generation = gen
		e := entry("big", gen, history.Apply)
		e.Spec = history.Text(r.Spec)
		if _, err := b.PutWithHistory(r, e); err != nil {
			t.Fatalf("put %d: %v", gen, err)
		}
	}
	for _, path := range []string{filepath.Join(dir, dbFile), filepath.Join(dir, goodFile)} {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		err = db.View(func(tx *bolt.Tx) error {
			for seq := 3; seq <= 5; seq++ {
				v := historyOf(tx, "big").Get(historyKey('s', seq))
				if len(v) == 0 || v[0] != specChunked {
					t.Errorf("%s: entry %d's spec is not kept in chunks", path, seq)
				}
				spec, err := DecodeHistorySpec(v)
				if err != nil || !bytes.Equal(spec, recs[seq%2].Spec) {
					t.Errorf("%s: entry %d: %v", path, seq, err)
				}
			}
			return nil
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range []*Bolt{b, open(t, dir)} {
		for seq := 3; seq <= 5; seq++ {
			e, err := st.HistoryEntry("big", seq)
			if err != nil || !bytes.Equal(e.Spec, recs[seq%2].Spec) {
				t.Errorf("entry %d: %v", seq, err)
			}
		}
	}
	// An entry of another spec than the record's keeps its own.
	r := recs[0]
	r.Generation = 6
	e := entry("big", 6, history.Apply)
	e.Spec = history.Text(append(slices.Clone(r.Spec), "# another\n"...))
	if _, err := b.PutWithHistory(r, e); err != nil {
		t.Fatal(err)
	}
	if got, err := b.HistoryEntry("big", 6); err != nil || !bytes.Equal(got.Spec, e.Spec) {
		t.Errorf("entry 6: %v", err)
	}
}

// The chunked form reads back, and a damaged one is refused, never read
// as other bytes.
func TestChunkedHistorySpecDamaged(t *testing.T) {
	spec := changeRecords(t, 1000)[0].Spec
	w := newSpecWrite(spec)
	v := encodeChunkedHistorySpec(w, len(spec))
	if back, err := DecodeHistorySpec(v); err != nil || !bytes.Equal(back, spec) {
		t.Fatalf("read back: %v", err)
	}
	flipped := slices.Clone(v)
	flipped[len(flipped)-1] ^= 1 // in the last chunk, kept as it is or compressed
	short := binary.AppendUvarint([]byte{specChunked}, uint64(len(spec)-1))
	short = append(short, v[1+len(binary.AppendUvarint(nil, uint64(len(spec)))):]...)
	for name, v := range map[string][]byte{
		"truncated":           v[:len(v)-10],
		"a byte changed":      flipped,
		"a shorter length":    short,
		"no hash":             {specChunked, 4},
		"huge length":         {specChunked, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0},
		"a chunk past it":     append(slices.Clone(v[:1+len(binary.AppendUvarint(nil, uint64(len(spec))))+8]), 0x7f, 0),
		"a newer vnet's form": {specChunked + 1, 'x'},
	} {
		if _, err := DecodeHistorySpec(v); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestDecodeHistoryHead(t *testing.T) {
	for name, v := range map[string]string{
		"not JSON":       `{"infra":`,
		"another infra":  `{"infra":"other","seq":1,"verb":"apply","via":"cli"}`,
		"unknown verb":   `{"infra":"demo","seq":1,"verb":"explode","via":"cli"}`,
		"negative seq":   `{"infra":"demo","seq":-1,"verb":"apply","via":"cli"}`,
		"negative gen":   `{"infra":"demo","seq":1,"generation":-4,"verb":"apply","via":"cli"}`,
		"unknown face":   `{"infra":"demo","seq":1,"verb":"apply","via":"fax"}`,
		"wrong type seq": `{"infra":"demo","seq":"1","verb":"apply","via":"cli"}`,
	} {
		if _, err := DecodeHistoryHead("demo", []byte(v)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A record's write keeps the history entry of its change in the same
// transaction, in the file and in its good copy alike; an entry no
// history should hold does not keep the record from being written.
func TestPutWithHistory(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	if err := b.SetHistoryRetention(history.Retention{MaxEntries: 3}); err != nil {
		t.Fatal(err)
	}
	for gen := 1; gen <= 5; gen++ {
		r := &Record{Name: "demo", Spec: []byte(fmt.Sprintf("name: demo # %d\n", gen)), Realized: resources(10 + gen), Generation: gen}
		e, err := b.PutWithHistory(r, entry("demo", gen, history.Apply))
		if err != nil || e.Seq != gen {
			t.Fatalf("put %d: %+v, %v", gen, e, err)
		}
	}
	for _, path := range []string{filepath.Join(dir, dbFile), filepath.Join(dir, goodFile)} {
		if heads := historyHeads(t, path, "demo"); seqsOf(heads) != "3 4 5" || heads[2].Generation != 5 {
			t.Errorf("%s: history %v, want entries 3 4 5, the last of generation 5", path, heads)
		}
		if r := records(t, path)["demo"]; r == nil || r.Generation != 5 || len(r.Realized) != len(resources(15)) {
			t.Errorf("%s: record %+v", path, r)
		}
	}
	e, err := b.HistoryEntry("demo", 5)
	if err != nil || string(e.Spec) != "name: demo # 5\n" {
		t.Errorf("entry 5: %+v, %v", e, err)
	}

	bad := entry("demo", 6, history.Apply)
	bad.Via = "carrier pigeon"
	r := &Record{Name: "demo", Spec: []byte("name: demo # 6\n"), Generation: 6}
	if _, err := b.PutWithHistory(r, bad); !errors.Is(err, ErrHistoryNotKept) {
		t.Fatalf("a bad entry: %v, want ErrHistoryNotKept", err)
	}
	if got, err := b.Head("demo"); err != nil || got.Generation != 6 {
		t.Errorf("after a bad entry the record is %+v, %v; want generation 6", got, err)
	}
	if heads, _ := b.HistoryHeads("demo"); seqsOf(heads) != "3 4 5" {
		t.Errorf("a bad entry was kept: %v", heads)
	}
}

// A record's write with its entry, taken back (as when the good copy
// cannot take it), leaves the file as it was: the record, the chunks, the
// entries pruned and the history's sequence, so that the next entry gets
// the Seq the copy gives it too.
func TestPutWithHistoryTakenBack(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first bool // the write is the infrastructure's first: it makes the buckets
	}{{"first write", true}, {"a later write, pruning", false}} {
		t.Run(tt.name, func(t *testing.T) {
			b := open(t, t.TempDir())
			if err := b.SetHistoryRetention(history.Retention{MaxEntries: 2}); err != nil {
				t.Fatal(err)
			}
			if !tt.first {
				for gen := 1; gen <= 3; gen++ {
					r := &Record{Name: "demo", Spec: []byte("name: demo\n"), Realized: resources(gen), Generation: gen}
					if _, err := b.PutWithHistory(r, entry("demo", gen, history.Apply)); err != nil {
						t.Fatal(err)
					}
				}
			}
			before := dump(t, b)
			a, err := newEntryWrite(entry("demo", 4, history.Apply))
			if err != nil {
				t.Fatal(err)
			}
			r := &Record{Name: "demo", Spec: []byte("name: demo # 4\n"), Realized: resources(40), Generation: 4}
			var log undoLog
			err = update(b, func(tx *bolt.Tx) error {
				v, err := EncodeValue(&Record{Name: r.Name, Spec: r.Spec, Generation: r.Generation})
				if err != nil {
					return err
				}
				if err := log.put(tx.Bucket(bucket), [][]byte{bucket}, []byte(r.Name), v); err != nil {
					return err
				}
				if _, err := putRealized(tx, r.Name, r.Realized, splitChunks(hashResources(r.Realized)), nil, &log); err != nil {
					return err
				}
				return a.write(tx, &log)
			})
			if err != nil {
				t.Fatal(err)
			}
			if dump(t, b) == before {
				t.Fatal("the write changed nothing")
			}
			if err := update(b, log.apply); err != nil {
				t.Fatal(err)
			}
			if after := dump(t, b); after != before {
				t.Errorf("taken back, the file holds\n%s\nnot\n%s", after, before)
			}
		})
	}
}

// dump is every bucket of the store's file with its sequence, and every
// key and value but the meta bucket's, as text.
func dump(t *testing.T, b *Bolt) string {
	t.Helper()
	var out strings.Builder
	var walk func(prefix string, bk *bolt.Bucket) error
	walk = func(prefix string, bk *bolt.Bucket) error {
		fmt.Fprintf(&out, "%s seq=%d\n", prefix, bk.Sequence())
		return bk.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(prefix+"/"+string(k), bk.Bucket(k))
			}
			fmt.Fprintf(&out, "%s/%q=%x\n", prefix, k, v)
			return nil
		})
	}
	if err := b.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			if string(name) == string(metaBucket) {
				return nil
			}
			return walk(string(name), bk)
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
