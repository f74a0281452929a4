package store

import (
	"os"
	"path/filepath"
	"testing"
)

// withRegistry points the registry at a directory of the test's own.
func withRegistry(t *testing.T) string {
	t.Helper()
	old := RegistryDir
	RegistryDir = filepath.Join(t.TempDir(), "stores")
	t.Cleanup(func() { RegistryDir = old })
	return RegistryDir
}

// A store is found by its ID where its mark says, and, once opened at a
// new place, there: a moved directory is found again. One not found is
// not said to be anywhere.
func TestFindFollowsAMovedStore(t *testing.T) {
	withRegistry(t)
	base := t.TempDir()
	first := filepath.Join(base, "first")
	st, err := OpenBolt(first)
	if err != nil {
		t.Fatal(err)
	}
	id := st.ID()
	st.Close()
	if w := Find(id, first); !w.Found() || w.Dir != first || w.Moved() {
		t.Errorf("in place: %+v", w)
	}
	moved := filepath.Join(base, "moved")
	if err := os.Rename(first, moved); err != nil {
		t.Fatal(err)
	}
	if w := Find(id, first); w.Found() || w.Last != first {
		t.Errorf("moved, not opened since: %+v, want not found, last seen at %s", w, first)
	}
	st, err = OpenBolt(moved)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if w := Find(id, first); !w.Found() || w.Dir != moved || !w.Moved() {
		t.Errorf("moved and opened: %+v, want found at %s", w, moved)
	}
	if names, err := Names(id, moved); err != nil || len(names) != 0 {
		t.Errorf("names of an empty store: %v %v", names, err)
	}
	if reg, err := Registered(); err != nil || reg[id] != moved {
		t.Errorf("registered: %v %v", reg, err)
	}
	if err := os.RemoveAll(moved); err != nil {
		t.Fatal(err)
	}
	if w := Find(id, first); w.Found() {
		t.Errorf("deleted: %+v", w)
	}
	Forget(id)
	if w := Find(id, first); w.Found() || w.Last != "" {
		t.Errorf("forgotten: %+v", w)
	}
	// A forged ID, or a file that is none of the registry's, finds nothing.
	for _, bad := range []string{"../../etc/passwd", "", "ZZZZ"} {
		if w := Find(bad, ""); w.Found() || w.Last != "" {
			t.Errorf("Find(%q) = %+v", bad, w)
		}
	}
}
