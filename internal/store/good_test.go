package store

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// records reads every record of a store file, by name.
func records(t *testing.T, path string) map[string]*Record {
	t.Helper()
	db, err := openFile(path, true)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	out := map[string]*Record{}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, _ []byte) error {
			r, err := getRecord(tx, string(k))
			out[string(k)] = r
			return err
		})
	}); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return out
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Ino
}

// The good copy follows every write: by the same write where it is the
// file as of the write before (the copy's file stays), and by a checked
// whole copy otherwise (a new file): when there is none, when a write
// reached the file and not the copy (a process killed between the two),
// when the copy is damaged, and when an earlier vnet made it.
func TestGoodCopyFollowsEveryWrite(t *testing.T) {
	dir := t.TempDir()
	path, good := filepath.Join(dir, dbFile), filepath.Join(dir, goodFile)
	s, other := open(t, dir), open(t, dir)
	gen := 0
	put := func(s *Bolt, name string, n int) func(*testing.T) {
		return func(t *testing.T) {
			gen++
			if err := s.Put(&Record{Name: name, Spec: []byte("name: " + name), Realized: resources(n), Generation: gen}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, step := range []struct {
		name     string
		before   func(*testing.T)
		write    func(*testing.T)
		mirrored bool
	}{
		{"the first write, no copy yet", nil, put(s, "a", 300), false},
		{"a second write", nil, put(s, "a", 301), true},
		{"another record", nil, put(s, "b", 10), true},
		{"a write of another process", nil, put(other, "a", 299), true},
		{"and of this one again", nil, put(s, "a", 302), true},
		{"a delete", nil, func(t *testing.T) {
			if err := s.Delete("b"); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"after a write that did not reach the copy", func(t *testing.T) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucket).Put([]byte("c"), []byte(`{"name":"c","generation":9}`))
			}); err != nil {
				t.Fatal(err)
			}
		}, put(s, "a", 303), false},
		{"then mirrored again", nil, put(s, "a", 304), true},
		{"after the copy was damaged", func(t *testing.T) {
			if err := os.WriteFile(good, []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, put(s, "a", 305), false},
		{"after a copy made by an earlier vnet", func(t *testing.T) {
			if err := copyFile(path, good); err != nil {
				t.Fatal(err)
			}
		}, put(other, "a", 306), false},
		{"after the copy was removed", func(t *testing.T) {
			if err := os.Remove(good); err != nil {
				t.Fatal(err)
			}
		}, put(s, "a", 307), false},
		{"and a write with chunks the copy has", nil, put(s, "a", 300), true},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.before != nil {
				step.before(t)
			}
			var was uint64
			if _, err := os.Stat(good); err == nil {
				was = inode(t, good)
			}
			step.write(t)
			if mirrored := inode(t, good) == was; mirrored != step.mirrored {
				t.Errorf("mirrored = %v, want %v", mirrored, step.mirrored)
			}
			if _, _, err := verify(good); err != nil {
				t.Fatalf("the good copy does not check out: %v", err)
			}
			want, got := records(t, path), records(t, good)
			if len(got) != len(want) {
				t.Fatalf("the good copy holds %d records, the file %d", len(got), len(want))
			}
			for name, w := range want {
				g := got[name]
				if g == nil || g.Generation != w.Generation || string(g.Spec) != string(w.Spec) ||
					!slices.Equal(byKey(g.Realized), byKey(w.Realized)) {
					t.Errorf("record %s: the good copy's differs from the file's", name)
				}
			}
		})
	}
}
