package store

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/vnet-project/vnet/internal/plan"
)

// resources is n veths and addresses, as VMs' vNICs are realized.
func resources(n int) []plan.Resource {
	var out []plan.Resource
	for i := range n {
		ns := fmt.Sprintf("vnet.x.vm%d", i)
		out = append(out,
			plan.Resource{Kind: plan.KindNetns, Name: ns},
			plan.Resource{Kind: plan.KindAddr, NS: ns, Link: "eth0", CIDR: fmt.Sprintf("10.0.%d.%d/16", i/250, i%250+1)})
	}
	return out
}

func byKey(rs []plan.Resource) []plan.Resource {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b plan.Resource) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// chunkValues are the chunks (and token) a store's file holds for infra.
func chunkValues(t *testing.T, s *Bolt, infra string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.view(func(tx *bolt.Tx) error {
		top := tx.Bucket(realizedBucket)
		if top == nil || top.Bucket([]byte(infra)) == nil {
			return nil
		}
		return top.Bucket([]byte(infra)).ForEach(func(k, v []byte) error { out[string(k)] = string(v); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A record reads back as it was written, through any sequence of changes
// and whichever store value wrote it last; a write rewrites only the
// chunks whose resources changed.
func TestRealizedRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	all := resources(300)
	steps := []struct {
		name     string
		realized []plan.Resource
		by       *Bolt // nil: s
	}{
		{"first", all[:400], nil},
		{"one more", all[:402], nil},
		{"one less", all[:400], nil},
		{"one changed", append(slices.Clone(all[:399]), plan.Resource{Kind: plan.KindAddr, NS: all[399].NS, Link: "eth0", CIDR: "10.9.9.9/16"}), nil},
		{"another store value writes", all[:300], open(t, dir)},
		{"then this one again", all[:350], nil},
		{"a new store value changes one", append(slices.Clone(all[:349]), plan.Resource{Kind: plan.KindAddr, NS: all[349].NS, Link: "eth0", CIDR: "10.9.9.8/16"}), open(t, dir)},
		{"none", nil, nil},
		{"all", all, nil},
	}
	for _, st := range steps {
		by := st.by
		if by == nil {
			by = s
		}
		before := chunkValues(t, s, "x")
		if len(before) == 0 && st.name != "first" {
			t.Fatalf("%s: no chunks", st.name)
		}
		if err := by.Put(&Record{Name: "x", Spec: []byte("name: x"), Realized: st.realized, Generation: 1}); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got, err := open(t, dir).Get("x")
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if !slices.Equal(byKey(got.Realized), byKey(st.realized)) {
			t.Fatalf("%s: read back %d resources, wrote %d", st.name, len(got.Realized), len(st.realized))
		}
		if st.name == "one more" || st.name == "one changed" || st.name == "a new store value changes one" {
			after := chunkValues(t, s, "x")
			changed := 0
			for k, v := range after {
				if k != string(tokenKey) && before[k] != v {
					changed++
				}
			}
			if changed > 2 {
				t.Errorf("%s: %d chunks rewritten, want at most 2", st.name, changed)
			}
		}
	}
	if err := s.Delete("x"); err != nil {
		t.Fatal(err)
	}
	if err := s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(realizedBucket).Bucket([]byte("x")) != nil {
			t.Error("Delete left the record's chunks")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The chunks' sums are trusted only with the token of the write that
// made them: a writer that keeps no sums (another build of vnet) makes a
// new token, and the next write, by any store value, rewrites every chunk.
func TestChunkSumsOfAnotherWriterAreNotTrusted(t *testing.T) {
	dir := t.TempDir()
	all := resources(100)
	if err := open(t, dir).Put(&Record{Name: "x", Spec: []byte("name: x"), Realized: all, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	// Another writer puts every resource in one chunk, as a hash of its
	// own would, and a token of its own.
	v, err := json.Marshal(all[:50])
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	if err := update(s, func(tx *bolt.Tx) error {
		b := tx.Bucket(realizedBucket).Bucket([]byte("x"))
		var keys [][]byte
		if err := b.ForEach(func(k, _ []byte) error { keys = append(keys, slices.Clone(k)); return nil }); err != nil {
			return err
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		if err := b.Put(chunkKey(7), v); err != nil {
			return err
		}
		return b.Put(tokenKey, []byte("another writer's"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := open(t, dir).Put(&Record{Name: "x", Spec: []byte("name: x"), Realized: all, Generation: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := open(t, dir).Get("x")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(byKey(got.Realized), byKey(all)) {
		t.Errorf("read back %d resources, wrote %d", len(got.Realized), len(all))
	}
}

// A record written before records were chunked, its resources in it,
// reads back whole, and its next write moves them into chunks.
func TestRecordWithRealizedInside(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	old := &Record{Name: "old", Spec: []byte("name: old"), Realized: resources(5), Generation: 2}
	v, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := update(s, func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte("old"), v) }); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"as written before", "after a write"} {
		got, err := s.Get("old")
		if err != nil || !slices.Equal(byKey(got.Realized), byKey(old.Realized)) || got.Generation != 2 {
			t.Fatalf("%s: Get = %+v, %v", step, got, err)
		}
		if h, err := s.Head("old"); err != nil || h.Realized != nil || h.Generation != 2 {
			t.Fatalf("%s: Head = %+v, %v", step, h, err)
		}
		if err := s.Put(got); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(chunkValues(t, s, "old")); n < 2 {
		t.Errorf("%d chunks after a write, want the resources in chunks", n)
	}
}

// A chunk that is no longer JSON is damage, found by the read that reads
// it and by the whole check of recovery; opening, which reads no chunk,
// and a read of the head alone do not stop at it.
func TestDamagedChunk(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.Put(&Record{Name: "x", Realized: resources(3)}); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(realizedBucket).Bucket([]byte("x"))
		k, _ := b.Cursor().First()
		return b.Put(k, []byte(`[{"kind":`))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	path := filepath.Join(dir, dbFile)
	again, err := OpenBolt(dir)
	if err != nil {
		t.Fatalf("open: %v, want the damage found when the chunk is read", err)
	}
	if _, err := again.Head("x"); err != nil {
		t.Errorf("head: %v", err)
	}
	_, err = again.Get("x")
	wantCorrupt(t, err, path)
	_, err = again.List()
	wantCorrupt(t, err, path)
	again.Close()
	rec, err := Recover(dir, RecoverOptions{})
	if err != nil || rec.Healthy || !rec.Restored {
		t.Errorf("recover: %+v, %v: want the damage found and the good copy restored", rec, err)
	}
}

// Names lists the records without reading them.
func TestNames(t *testing.T) {
	s := open(t, t.TempDir())
	for _, n := range []string{"b", "a"} {
		if err := s.Put(&Record{Name: n, Realized: resources(2)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Names(); err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Names = %v, %v", got, err)
	}
}

// TestResourceHashSeesEveryField: a change to any one field of a resource,
// nested ones too, changes its hash, and the same value in two fields
// hashes apart, so a write never keeps a chunk whose resources changed.
func TestResourceHashSeesEveryField(t *testing.T) {
	var leaves [][]int // paths of the leaf fields, by index
	var walk func(typ reflect.Type, path []int)
	walk = func(typ reflect.Type, path []int) {
		for i := range typ.NumField() {
			p := append(slices.Clone(path), i)
			if f := typ.Field(i); f.Type.Kind() == reflect.Struct {
				walk(f.Type, p)
			} else {
				leaves = append(leaves, p)
			}
		}
	}
	walk(reflect.TypeFor[plan.Resource](), nil)
	if len(leaves) >= 128 {
		t.Fatalf("%d fields: resourceHash writes a field's number as one byte", len(leaves))
	}
	hash := func(r plan.Resource) uint64 {
		_, h := resourceHash(nil, &r)
		return h
	}
	set := func(r *plan.Resource, path []int, v int) {
		f := reflect.ValueOf(r).Elem().FieldByIndex(path)
		switch f.Kind() {
		case reflect.String:
			f.SetString(fmt.Sprint("v", v))
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(int64(v))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(v))
		default:
			t.Fatalf("field %v of kind %s: teach this test (and resourceHash) about it", path, f.Kind())
		}
	}
	sample := plan.Resource{Kind: plan.KindVeth, A: plan.End{NS: "h", Name: "p0", MTU: 1500}, B: plan.End{NS: "vm", Name: "eth0"}, Owner: "vm a eth0"}
	seen := map[uint64][]int{}
	for _, base := range []plan.Resource{{}, sample} {
		for _, p := range leaves {
			for _, v := range []int{1, 2} {
				r := base
				set(&r, p, v)
				if hash(r) == hash(base) {
					t.Errorf("field %v set to %d: the hash does not change", p, v)
				}
			}
		}
	}
	// The same value in each field, alone: every hash its own.
	for _, p := range leaves {
		var r plan.Resource
		set(&r, p, 1)
		h := hash(r)
		if q, ok := seen[h]; ok {
			t.Errorf("fields %v and %v hash alike", p, q)
		}
		seen[h] = p
	}
}

// update writes fn to the file and its good copy, as every write does.
func update(s *Bolt, fn func(*bolt.Tx) error) error {
	_, err := s.update(fileWrite{file: func(tx *bolt.Tx, _ *undoLog) error { return fn(tx) }})
	return err
}

// Resources hashed on every CPU hash as one by one, in their order.
func TestHashResourcesInParallel(t *testing.T) {
	for _, n := range []int{0, 1, hashInParallelFrom - 1, hashInParallelFrom, 3*hashInParallelFrom + 7} {
		rs := make([]plan.Resource, n)
		for i := range rs {
			rs[i] = plan.Resource{Kind: plan.KindNetns, Name: fmt.Sprint("ns", i), MTU: i}
		}
		got := hashResources(rs)
		for i := range rs {
			if _, want := resourceHash(nil, &rs[i]); got[i] != want {
				t.Fatalf("%d resources: resource %d hashes to %x, not %x", n, i, got[i], want)
			}
		}
	}
}

// The hashes taken from the last write are those of the resources as they
// are: the same list, some added, dropped or changed, one changed in place
// in the list written last, or none in common.
func TestHashResourcesAfter(t *testing.T) {
	last := resources(100)
	kept := &hashedResources{rs: last, hs: hashResources(last)}
	changed := slices.Clone(last)
	changed[50].CIDR = "10.9.9.9/16"
	inPlace := slices.Clone(last)
	inPlaceKept := &hashedResources{rs: inPlace, hs: hashResources(inPlace)}
	inPlace[7].Name = "vnet.x.moved"
	grownFrom := append(make([]plan.Resource, 0, 110), last...) // room past its end, as plan.Room leaves
	grownKept := &hashedResources{rs: grownFrom, hs: hashResources(grownFrom)}
	grown := append(grownFrom, resources(3)[:1]...)
	grown = append(grown, plan.Resource{Kind: plan.KindNetns, Name: "vnet.x.grown"})
	tests := []struct {
		name string
		last *hashedResources
		rs   []plan.Resource
	}{
		{"no last write", nil, last},
		{"the same", kept, slices.Clone(last)},
		{"some added", kept, slices.Concat(last[:40], resources(3)[:1], []plan.Resource{{Kind: plan.KindNetns, Name: "vnet.x.new"}}, last[40:])},
		{"some dropped", kept, slices.Concat(last[:10], last[15:60], last[61:])},
		{"more dropped in a row than looked ahead", kept, slices.Concat(last[:10], last[10+2*hashReuseLookahead:])},
		{"one changed", kept, changed},
		{"changed in place", inPlaceKept, inPlace},
		{"grown in place past its end", grownKept, grown},
		{"cut short in place", grownKept, grownFrom[:90]},
		{"none in common", kept, resources(3)},
		{"none", kept, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := hashResourcesAfter(tt.last, tt.rs), hashResources(tt.rs); !slices.Equal(got, want) {
				t.Errorf("hashes differ from the resources' own:\n got %x\nwant %x", got, want)
			}
		})
	}
}
