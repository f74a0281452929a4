package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/vnet-project/vnet/internal/spec/spectest"
)

// vmsSpec is a spec of n VMs, one line each, with a comment after VM mark
// (none when 0): an edit of one VM's line.
func vmsSpec(n, mark int) []byte {
	var b bytes.Buffer
	b.WriteString("name: big\nhosts: [{name: h1}]\nvms:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {name: vm%d, host: h1, nics: [{portgroup: pg, ip: 10.1.%d.%d/16}]}\n", i, i/250, i%250+1)
		if i == mark {
			b.WriteString("  # changed\n")
		}
	}
	return b.Bytes()
}

func randomSpec(n int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// A spec is cut into chunks that make it again, each within the bounds,
// wherever its bytes put the cuts.
func TestCutSpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec []byte
	}{
		{"empty", nil},
		{"shorter than a chunk", []byte("name: x\n")},
		{"a spec of VMs", vmsSpec(2000, 0)},
		{"a spec of networks", spectest.Networks(500)},
		{"one line", bytes.Repeat([]byte("{name: a, hosts: [h1, h2]}, "), 4000)},
		{"the same byte", bytes.Repeat([]byte("x"), 100<<10)},
		{"random bytes", randomSpec(200 << 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chunks := cutSpec(tc.spec)
			if got := bytes.Join(chunks, nil); !bytes.Equal(got, tc.spec) {
				t.Fatalf("the chunks make %d bytes, not the %d cut", len(got), len(tc.spec))
			}
			for i, c := range chunks {
				if len(c) > specChunkMax || len(c) == 0 || len(c) < specChunkMin && i < len(chunks)-1 {
					t.Errorf("chunk %d of %d is %d bytes", i, len(chunks), len(c))
				}
			}
		})
	}
}

// An edit of one VM's line changes the keys of a chunk or two: what a
// write of that change puts.
func TestOneVMEditChangesAChunkOrTwo(t *testing.T) {
	for _, tc := range []struct {
		name         string
		before, edit []byte
	}{
		{"a line added", vmsSpec(1000, 0), vmsSpec(1000, 500)},
		{"a VM added at the end", vmsSpec(1000, 0), vmsSpec(1001, 0)},
		{"a VM removed at the end", vmsSpec(1000, 0), vmsSpec(999, 0)},
		{"an address changed", vmsSpec(1000, 0), bytes.Replace(vmsSpec(1000, 0), []byte("10.1.2.1/16"), []byte("10.1.9.99/16"), 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := map[string]bool{}
			for _, k := range newSpecWrite(tc.before).keys {
				old[string(k)] = true
			}
			w := newSpecWrite(tc.edit)
			fresh := 0
			for _, k := range w.keys {
				if !old[string(k)] {
					fresh++
				}
			}
			if fresh == 0 || fresh > 2 {
				t.Errorf("%d of %d chunks are new, want 1 or 2", fresh, len(w.keys))
			}
		})
	}
}

// specChunkKeys is the keys of infra's spec chunks in the file at path.
func specChunkKeys(t *testing.T, path, infra string) map[string]bool {
	t.Helper()
	db, err := openFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys := map[string]bool{}
	if err := db.View(func(tx *bolt.Tx) error {
		top := tx.Bucket(specsBucket)
		if top == nil || top.Bucket([]byte(infra)) == nil {
			return nil
		}
		return top.Bucket([]byte(infra)).ForEach(func(k, _ []byte) error {
			keys[string(k)] = true
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// A spec reads back as the bytes written, in the file and its good copy,
// through Get, Head and a store opened afresh, whether it is kept in the
// record or in chunks and whatever it was before; the chunks stored are
// exactly the spec's.
func TestSpecChunksRoundTrip(t *testing.T) {
	dup := bytes.Repeat(vmsSpec(300, 0), 3) // the same chunks over again
	steps := []struct {
		name string
		spec []byte
	}{
		{"small", []byte("name: big\n")},
		{"large", vmsSpec(1000, 0)},
		{"one line added", vmsSpec(1000, 500)},
		{"a VM added", vmsSpec(1001, 500)},
		{"the same bytes over again", dup},
		{"random bytes", randomSpec(100 << 10)},
		{"small again", []byte("name: big\n# small\n")},
		{"empty", []byte{}},
		{"large again", vmsSpec(2000, 0)},
	}
	dir := t.TempDir()
	s := open(t, dir)
	for i, st := range steps {
		r := &Record{Name: "big", SpecFile: "big.yaml", Spec: st.spec, Realized: resources(3), Generation: i + 1}
		if err := s.Put(r); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for _, read := range []struct {
			name string
			fn   func(string) (*Record, error)
		}{{"Get", s.Get}, {"Head", s.Head}, {"a new store's Head", open(t, dir).Head}} {
			got, err := read.fn("big")
			if err != nil {
				t.Fatalf("%s: %s: %v", st.name, read.name, err)
			}
			if !bytes.Equal(got.Spec, st.spec) || got.Spec == nil || got.Generation != i+1 {
				t.Fatalf("%s: %s read back %d bytes of generation %d, want %d of %d", st.name, read.name, len(got.Spec), got.Generation, len(st.spec), i+1)
			}
		}
		w := newSpecWrite(st.spec)
		for _, path := range []string{filepath.Join(dir, dbFile), filepath.Join(dir, goodFile)} {
			if got := records(t, path)["big"]; !bytes.Equal(got.Spec, st.spec) {
				t.Errorf("%s: %s holds %d bytes of spec, want %d", st.name, path, len(got.Spec), len(st.spec))
			}
			want := map[string]bool{}
			if w != nil {
				for _, k := range w.keys {
					want[string(k)] = true
				}
			}
			if got := specChunkKeys(t, path, "big"); len(got) != len(want) {
				t.Errorf("%s: %s holds %d chunks, want the spec's %d", st.name, path, len(got), len(want))
			}
		}
	}
	if err := s.Delete("big"); err != nil {
		t.Fatal(err)
	}
	if got := specChunkKeys(t, filepath.Join(dir, dbFile), "big"); len(got) != 0 {
		t.Errorf("a deleted record left %d chunks", len(got))
	}
}

// A record written whole (by a build before chunks) reads as it was, and
// the next write keeps its spec in chunks.
func TestWholeSpecReadAndConverted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record *Record
	}{
		{"compressed", largeRecord(400)},
		{"JSON", &Record{Name: "big", Spec: vmsSpec(400, 0), Generation: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir)
			v, err := EncodeValue(tc.record)
			if err != nil {
				t.Fatal(err)
			}
			if err := update(s, func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte("big"), v) }); err != nil {
				t.Fatal(err)
			}
			got, err := open(t, dir).Get("big")
			if err != nil || !bytes.Equal(got.Spec, tc.record.Spec) {
				t.Fatalf("the whole spec read back as %d bytes (%v), want %d", len(got.Spec), err, len(tc.record.Spec))
			}
			got.Generation++
			if err := s.Put(got); err != nil {
				t.Fatal(err)
			}
			if n := len(specChunkKeys(t, filepath.Join(dir, dbFile), "big")); n == 0 {
				t.Fatal("the next write kept the spec whole")
			}
			again, err := open(t, dir).Get("big")
			if err != nil || !bytes.Equal(again.Spec, tc.record.Spec) || again.Generation != tc.record.Generation+1 {
				t.Fatalf("converted, the spec read back as %d bytes (%v), want %d", len(again.Spec), err, len(tc.record.Spec))
			}
		})
	}
}

// A record whose spec is in chunks is refused, with a reason, by a reader
// of whole records: as etcd's reader and earlier builds of vnet, which
// read only version 1 of the compressed form, refuse it.
func TestChunkedRecordRefusedByWholeReaders(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.Put(&Record{Name: "big", Spec: vmsSpec(1000, 0)}); err != nil {
		t.Fatal(err)
	}
	var v []byte
	if err := s.view(func(tx *bolt.Tx) error {
		v = bytes.Clone(tx.Bucket(bucket).Get([]byte("big")))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !IsCompressedValue(v) || v[len(ValueMagic)] == valueVersion {
		t.Fatalf("a record in chunks is stored as version %d of the compressed form, which earlier builds read", v[len(ValueMagic)])
	}
	if r, err := DecodeValue(v); err == nil {
		t.Fatalf("DecodeValue read %d bytes of spec from a record in chunks", len(r.Spec))
	}
}

// A chunk lost or changed makes the store damaged, never another spec.
func TestDamagedSpecChunk(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(b *bolt.Bucket, k, v []byte) error
	}{
		{"missing", func(b *bolt.Bucket, k, _ []byte) error { return b.Delete(k) }},
		{"changed", func(b *bolt.Bucket, k, v []byte) error {
			c := bytes.Clone(v)
			c[len(c)-1] ^= 1
			return b.Put(k, c)
		}},
		{"another chunk's bytes", func(b *bolt.Bucket, k, _ []byte) error {
			var other []byte
			b.ForEach(func(k2, v2 []byte) error {
				if other == nil && !bytes.Equal(k2, k) {
					other = bytes.Clone(v2)
				}
				return nil
			})
			return b.Put(k, other)
		}},
		{"unknown form", func(b *bolt.Bucket, k, v []byte) error { return b.Put(k, append([]byte{9}, v[1:]...)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir)
			if err := s.Put(&Record{Name: "big", Spec: randomSpec(64 << 10)}); err != nil {
				t.Fatal(err)
			}
			if err := update(s, func(tx *bolt.Tx) error {
				b := tx.Bucket(specsBucket).Bucket([]byte("big"))
				k, v := b.Cursor().First()
				return tc.spoil(b, bytes.Clone(k), bytes.Clone(v))
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get("big"); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Get: %v, want ErrCorrupt", err)
			}
			if _, err := OpenBolt(dir); !errors.Is(err, ErrCorrupt) {
				t.Errorf("open: %v, want ErrCorrupt", err)
			}
		})
	}
}
