package store

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vnet-project/vnet/internal/plan"
)

func open(t *testing.T, dir string) *Bolt {
	t.Helper()
	s, err := OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestBoltRoundTrip(t *testing.T) {
	s := open(t, t.TempDir())
	if _, err := s.Get("x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}
	for _, n := range []string{"b", "a"} {
		if err := s.Put(&Record{Name: n, Spec: []byte("name: " + n), Generation: 1}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Get("a")
	if err != nil || string(r.Spec) != "name: a" {
		t.Fatalf("Get = %+v, %v", r, err)
	}
	all, _ := s.List()
	if len(all) != 2 || all[0].Name != "a" {
		t.Fatalf("List = %v", all)
	}
	if err := s.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("a"); err != nil {
		t.Fatal("second delete:", err)
	}
}

func TestHeadIsTheRecordWithoutWhatWasRealized(t *testing.T) {
	s := open(t, t.TempDir())
	if _, err := s.Head("x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Head missing: %v", err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	full := &Record{Name: "a", SpecFile: "a.yaml", Spec: []byte("name: a"), Generation: 7, AppliedAt: at, Engine: "v1",
		Realized: []plan.Resource{{Kind: plan.KindNetns, Name: "vnet-a-h1"}}}
	if err := s.Put(full); err != nil {
		t.Fatal(err)
	}
	h, err := s.Head("a")
	if err != nil {
		t.Fatal(err)
	}
	want := *full
	want.Realized = nil
	if h.Name != want.Name || h.SpecFile != want.SpecFile || string(h.Spec) != string(want.Spec) ||
		h.Generation != want.Generation || !h.AppliedAt.Equal(at) || h.Engine != want.Engine || h.Realized != nil {
		t.Fatalf("Head = %+v, want %+v", h, want)
	}
}

// A large record's head is stored compressed, and reads back whole, as its
// head or with what was realized.
func TestLargeRecordIsStoredCompressed(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	r := largeRecord(1000)
	if err := s.Put(r); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := s.view(func(tx *bolt.Tx) error {
		stored = bytes.Clone(tx.Bucket(bucket).Get([]byte(r.Name)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !IsCompressedValue(stored) || len(stored) > len(r.Spec)/4 {
		t.Errorf("a record of %d bytes of spec is stored in %d bytes (compressed %v)", len(r.Spec), len(stored), IsCompressedValue(stored))
	}
	want := asJSONReadsIt(t, r)
	for _, read := range []func(string) (*Record, error){s.Get, s.Head, open(t, dir).Get} {
		got, err := read(r.Name)
		if err != nil {
			t.Fatal(err)
		}
		w := *want
		if got.Realized == nil {
			w.Realized = nil
		}
		if !reflect.DeepEqual(got, &w) {
			t.Errorf("read back %s generation %d, want generation %d", got.Name, got.Generation, w.Generation)
		}
	}
}

// TestHeadKeptIsHeadDecoded: a head read back without decoding (the one a
// write or an earlier read left) is the head decoded afresh from the
// file, whichever process wrote it last.
func TestHeadKeptIsHeadDecoded(t *testing.T) {
	dir := t.TempDir()
	s, other := open(t, dir), open(t, dir)
	decoded := func(name string) *Record {
		t.Helper()
		var h *Record
		err := s.view(func(tx *bolt.Tx) (err error) {
			h, err = decodeHead(tx, name, tx.Bucket(bucket).Get([]byte(name)))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	check := func(step string, w *Bolt, r *Record) {
		t.Helper()
		if err := w.Put(r); err != nil {
			t.Fatal(err)
		}
		for i := range 2 { // kept by the write, then by the read
			h, err := s.Head(r.Name)
			if err != nil {
				t.Fatal(err)
			}
			if want := decoded(r.Name); !reflect.DeepEqual(h, want) {
				t.Fatalf("%s, read %d: Head = %+v, decoded %+v", step, i, h, want)
			}
		}
	}
	east := time.FixedZone("east", 3600)
	res := []plan.Resource{{Kind: plan.KindNetns, Name: "vnet-a-h1"}}
	check("a write", s, &Record{Name: "a", SpecFile: "a.yaml", Spec: []byte("name: a"), Generation: 1,
		AppliedAt: time.Now(), Engine: "v1", Realized: res})
	check("another process's write", other, &Record{Name: "a", SpecFile: "a.yaml", Spec: []byte("name: a\n"), Generation: 2,
		AppliedAt: time.Now().In(east), Realized: res})
	check("a write after it", s, &Record{Name: "a", Spec: []byte{}, SpecEncoded: []byte{}, Generation: 3})
	check("an encoded spec", s, &Record{Name: "a", Spec: []byte("name: a"), SpecEncoded: []byte{1, 2}, Generation: 4})
	check("a name JSON changes", s, &Record{Name: "b\xff", Generation: 1})
	large := largeRecord(1000)
	large.AppliedAt = time.Now().In(east)
	check("a large record, compressed", s, large)
	large = largeRecord(1000)
	large.SpecEncoded = []byte{}
	check("a large record with an empty encoding", other, large)

	// The caller's bytes are its own: changing them changes no head.
	src := []byte("name: c")
	if err := s.Put(&Record{Name: "c", Spec: src}); err != nil {
		t.Fatal(err)
	}
	src[0] = 'N'
	if h, err := s.Head("c"); err != nil || string(h.Spec) != "name: c" {
		t.Fatalf("Head = %+v, %v after the caller changed its spec", h, err)
	}
	if err := other.Delete("c"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Head("c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Head of a record another process deleted: %v", err)
	}
}

func TestStoreKeepsItsID(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir)
	if len(a.ID()) != 16 {
		t.Fatalf("ID %q", a.ID())
	}
	if b := open(t, dir); b.ID() != a.ID() {
		t.Errorf("reopened store has ID %s, was %s", b.ID(), a.ID())
	}
	if c := open(t, t.TempDir()); c.ID() == a.ID() {
		t.Errorf("two stores share ID %s", a.ID())
	}
	if got := readIDFile(dir); got != a.ID() {
		t.Errorf("store.id holds %q, want %q", got, a.ID())
	}
}

// A store made before stores had IDs gets one and keeps its records.
func TestStoreWithoutIDGetsOne(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, dbFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucket)
		if err != nil {
			return err
		}
		return b.Put([]byte("old"), []byte(`{"name":"old","generation":3}`))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := open(t, dir)
	if s.ID() == "" {
		t.Fatal("no ID")
	}
	if r, err := s.Get("old"); err != nil || r.Generation != 3 {
		t.Fatalf("Get = %+v, %v", r, err)
	}
	if again := open(t, dir); again.ID() != s.ID() {
		t.Errorf("ID changed: %s -> %s", s.ID(), again.ID())
	}
}

// filled makes a store with enough records to span many pages.
func filled(t *testing.T, dir string) int64 {
	t.Helper()
	s := open(t, dir)
	big := make([]plan.Resource, 40)
	for i := range big {
		big[i] = plan.Resource{Kind: plan.KindNetns, Name: strings.Repeat("n", 60)}
	}
	for _, n := range []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta"} {
		if err := s.Put(&Record{Name: n, Spec: bytes.Repeat([]byte("x"), 3000), Realized: big}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(largeRecord(400)); err != nil { // stored compressed
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, dbFile))
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

func spoil(t *testing.T, path string, fn func(b []byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, fn(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// wantCorrupt checks the error a damaged store gives: ErrCorrupt, the
// file's name and the way back.
func wantCorrupt(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error %v, want ErrCorrupt", err)
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "recover") {
		t.Errorf("error does not name the file and the recovery: %s", msg)
	}
}

func TestDamagedStoreIsAnErrorNeverAPanicNorEmpty(t *testing.T) {
	const page = 4096
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"random bytes in the pages", func(b []byte) []byte {
			copy(b[2*page:], randomBytes(rng, len(b)-2*page))
			return b
		}},
		{"random bytes everywhere", func(b []byte) []byte { return randomBytes(rng, len(b)) }},
		{"zeroed", func(b []byte) []byte { return make([]byte, len(b)) }},
		{"emptied", func([]byte) []byte { return nil }},
		{"garbage", func([]byte) []byte { return []byte("this is not a database\n") }},
		// Cut within the pages in use: the file may end in free pages,
		// whose loss is no damage.
		{"truncated", func(b []byte) []byte { return b[:len(b)*3/8] }},
		{"truncated to the meta pages", func(b []byte) []byte { return b[:2*page] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			filled(t, dir)
			path := filepath.Join(dir, dbFile)
			spoil(t, path, tc.damage)
			_, err := OpenBolt(dir)
			wantCorrupt(t, err, path)
			var ce *CorruptError
			if !errors.As(err, &ce) || !ce.GoodCopy || !strings.Contains(err.Error(), goodFile) {
				t.Errorf("error does not offer the good copy: %v", err)
			}
		})
	}
}

// Random bytes in any one page, many times over: every open either works
// or says the file is damaged.
func TestRandomPageDamageNeverPanics(t *testing.T) {
	const page = 4096
	dir := t.TempDir()
	size := filled(t, dir)
	path := filepath.Join(dir, dbFile)
	pristine, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	damaged := 0
	for p := int64(0); p < size/page; p++ {
		for round := 0; round < 4; round++ {
			b := bytes.Clone(pristine)
			off := p*page + int64(rng.UintN(page))
			n := 1 + int(rng.UintN(page))
			copy(b[off:min(off+int64(n), size)], randomBytes(rng, n))
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := OpenBolt(dir)
			if err != nil {
				wantCorrupt(t, err, path)
				damaged++
				continue
			}
			if _, err := s.List(); err != nil {
				wantCorrupt(t, err, path)
			}
			s.Close()
		}
	}
	t.Logf("%d pages, %d damaged opens", size/page, damaged)
	if damaged == 0 {
		t.Error("no damage was noticed")
	}
}

// Damage after the store was opened is found by the next operation.
func TestDamageUnderAnOpenStore(t *testing.T) {
	dir := t.TempDir()
	filled(t, dir)
	s := open(t, dir)
	path := filepath.Join(dir, dbFile)
	spoil(t, path, func(b []byte) []byte { return make([]byte, len(b)) })
	_, err := s.Get("alpha")
	wantCorrupt(t, err, path)
	_, err = s.List()
	wantCorrupt(t, err, path)
	wantCorrupt(t, s.Put(&Record{Name: "x"}), path)
}

// The copy kept at each good write brings back everything up to the last
// write before the damage.
func TestRecoverRestoresTheGoodCopy(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	id := s.ID()
	for _, n := range []string{"a", "b"} {
		if err := s.Put(&Record{Name: n, Generation: 1}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, dbFile)
	spoil(t, path, func(b []byte) []byte { return []byte("garbage") })
	// A write that meets the damage fails and loses nothing already kept.
	wantCorrupt(t, s.Put(&Record{Name: "c"}), path)

	got, err := Recover(dir, RecoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Restored || got.ID != id || strings.Join(got.Records, ",") != "a,b" {
		t.Fatalf("Recover = %+v", got)
	}
	s2 := open(t, dir)
	if s2.ID() != id {
		t.Errorf("ID %s after recovery, was %s", s2.ID(), id)
	}
	if r, err := s2.Get("b"); err != nil || r.Generation != 1 {
		t.Errorf("Get b = %+v, %v", r, err)
	}
	if again, err := Recover(dir, RecoverOptions{}); err != nil || !again.Healthy {
		t.Errorf("second Recover = %+v, %v", again, err)
	}
	// A second damage within the same second keeps both damaged files.
	spoil(t, path, func([]byte) []byte { return []byte("more garbage") })
	again, err := Recover(dir, RecoverOptions{})
	if err != nil || !again.Restored || again.Moved == got.Moved {
		t.Fatalf("Recover = %+v, %v", again, err)
	}
	for f, want := range map[string]string{got.Moved: "garbage", again.Moved: "more garbage"} {
		if b, err := os.ReadFile(f); err != nil || string(b) != want {
			t.Errorf("%s holds %q, %v; want %q", f, b, err, want)
		}
	}
}

// Without a good copy, recovery starts empty with the same ID, so that
// what the old store made is still its own.
func TestRecoverStartsEmptyWithTheSameID(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	id := s.ID()
	if err := s.Put(&Record{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, goodFile))
	path := filepath.Join(dir, dbFile)
	spoil(t, path, func(b []byte) []byte { return make([]byte, len(b)) })
	_, err := OpenBolt(dir)
	wantCorrupt(t, err, path)
	if strings.Contains(err.Error(), goodFile) {
		t.Errorf("offers a good copy there is none of: %v", err)
	}
	got, err := Recover(dir, RecoverOptions{ID: "ignored-the-dir-knows-its-id"})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Empty || got.ID != id || len(got.Records) != 0 {
		t.Fatalf("Recover = %+v", got)
	}
	// With store.id gone too, the ID the caller found on the host is taken.
	dir2 := t.TempDir()
	open(t, dir2)
	for _, f := range []string{goodFile, idFile} {
		os.Remove(filepath.Join(dir2, f))
	}
	spoil(t, filepath.Join(dir2, dbFile), func([]byte) []byte { return nil })
	got, err = Recover(dir2, RecoverOptions{ID: "0123456789abcdef"})
	if err != nil || got.ID != "0123456789abcdef" {
		t.Fatalf("Recover = %+v, %v", got, err)
	}
	if s := open(t, dir2); s.ID() != "0123456789abcdef" {
		t.Errorf("ID %s", s.ID())
	}
}

// A missing state.db beside a good copy is loss, not a fresh start.
func TestMissingStoreWithAGoodCopy(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.Put(&Record{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, dbFile))
	_, err := OpenBolt(dir)
	wantCorrupt(t, err, filepath.Join(dir, dbFile))
	got, err := Recover(dir, RecoverOptions{})
	if err != nil || !got.Restored || len(got.Records) != 1 {
		t.Fatalf("Recover = %+v, %v", got, err)
	}
}

func TestLocksArePerInfrastructure(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir) // two commands
	a.LockWait, b.LockWait = 0, 100*time.Millisecond
	unlockA, err := a.Lock("alpha")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := b.Lock("beta")
	if err != nil {
		t.Fatalf("another infrastructure: %v", err)
	}
	// Reading and writing records goes on under both locks.
	if err := b.Put(&Record{Name: "beta"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.List(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = b.Lock("alpha")
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("same infrastructure: %v", err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("gave up after %s, LockWait is 100ms", waited)
	}
	if msg := err.Error(); !strings.Contains(msg, "alpha") || !strings.Contains(msg, "pid ") {
		t.Errorf("error does not say what is locked and by whom: %s", msg)
	}
	// Nested locking on one store shares the lock.
	again, err := a.Lock("alpha")
	if err != nil {
		t.Fatalf("nested: %v", err)
	}
	again()
	if _, err := b.Lock("alpha"); !errors.Is(err, ErrLocked) {
		t.Fatalf("released by the nested unlock: %v", err)
	}
	unlockA()
	unlockA() // twice is harmless
	unlock, err := b.Lock("alpha")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock()
	unlockB()
}

// A waiting command gets the lock when the holder lets go.
func TestLockWaitsForTheHolder(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	unlock, err := a.Lock("alpha")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, unlock)
	b.LockWait = 10 * time.Second
	start := time.Now()
	unlockB, err := b.Lock("alpha")
	if err != nil {
		t.Fatal(err)
	}
	unlockB()
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("got the lock after %s while it was held", waited)
	}
}

// A state file another process holds past the open's wait is ErrLocked, so
// that callers tell "try again" from damage by errors.Is, not by its text.
func TestHeldStateFileIsErrLocked(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(&Record{Name: "alpha"}); err != nil {
		t.Fatal(err)
	}
	holder, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, nil) // bbolt's exclusive file lock
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	defer func(was time.Duration) { fileLockWait = was }(fileLockWait)
	fileLockWait = 100 * time.Millisecond
	_, err = st.List()
	if !errors.Is(err, ErrLocked) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("a held state file: %v; want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "another vnet process holds it") {
		t.Errorf("the error does not say why: %v", err)
	}
}
