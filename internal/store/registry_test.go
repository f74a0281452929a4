package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vnet-project/vnet/internal/rundir"
)

// withRegistry points the registry at a directory of the test's own.
func withRegistry(t *testing.T) string {
	t.Helper()
	t.Setenv(rundir.Env, t.TempDir())
	return RegistryDir()
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
	if reg, _ := Registered(); len(reg) != 0 {
		t.Errorf("an empty store is registered: %v", reg)
	}
	if err := st.SetPending("infra"); err != nil { // an apply begins
		t.Fatal(err)
	}
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
		t.Errorf("names of a store without records: %v %v", names, err)
	}
	if reg, err := Registered(); err != nil || reg[id] != moved {
		t.Errorf("registered: %v %v", reg, err)
	}
	// The apply undone, the store holds nothing: it leaves the registry.
	if err := st.ClearPending("infra"); err != nil {
		t.Fatal(err)
	}
	if reg, _ := Registered(); len(reg) != 0 {
		t.Errorf("a store emptied stays registered: %v", reg)
	}
	if err := st.SetPending("infra"); err != nil {
		t.Fatal(err)
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

// A store is in the registry while it records an infrastructure: its last
// record deleted, it leaves, so a store made and emptied leaves nothing.
func TestRegisteredWhileItRecordsSomething(t *testing.T) {
	withRegistry(t)
	st, err := OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{"a", "b"} {
		if err := st.Put(&Record{Name: name, Spec: []byte("name: " + name), Generation: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if reg, _ := Registered(); reg[st.ID()] != st.Location() {
		t.Fatalf("a store with records is not registered: %v", reg)
	}
	if err := st.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if reg, _ := Registered(); reg[st.ID()] != st.Location() {
		t.Errorf("a store with a record left is not registered: %v", reg)
	}
	if err := st.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if reg, _ := Registered(); len(reg) != 0 {
		t.Errorf("an emptied store stays registered: %v", reg)
	}
}

// The registry is in the stores directory of rundir.Env's directory, else
// of /run/vnet: tests keep theirs out of the machine's, and the vnet
// commands they run follow them.
func TestRegistryIsWhereTheRunDirectorySays(t *testing.T) {
	run := t.TempDir()
	t.Setenv(rundir.Env, run)
	if got, want := RegistryDir(), filepath.Join(run, "stores"); got != want {
		t.Errorf("registry at %s, want %s", got, want)
	}
	st, err := OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SetPending("infra"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(run, "stores", st.ID())); err != nil {
		t.Errorf("a store that records something is not registered in the run directory: %v", err)
	}
	t.Setenv(rundir.Env, "")
	if got := RegistryDir(); got != "/run/vnet/stores" {
		t.Errorf("without %s the registry is at %s, want /run/vnet/stores", rundir.Env, got)
	}
}
