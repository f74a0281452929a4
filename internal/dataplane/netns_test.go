package dataplane

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// An unmounted entry is abandoned only when nobody holds its lock: its
// maker holds it from before the name appears until the mount.
func TestEntryAbandonedOnlyWithoutItsMaker(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vnet.x.esx1")
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if state, err := entryStateOf(path); err != nil || state != entryUnfinished {
		t.Fatalf("state of a plain file: %v, %v", state, err)
	}
	maker, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(maker.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if abandoned, err := entryAbandoned(path, nil); err != nil || abandoned {
		t.Errorf("an entry being made reads as abandoned (%v)", err)
	}
	if err := removeAbandonedEntry(path); err == nil {
		t.Errorf("an entry being made was removed")
	}
	maker.Close() // its maker died
	if abandoned, err := entryAbandoned(path, nil); err != nil || !abandoned {
		t.Errorf("an entry whose maker is gone does not read as abandoned (%v)", err)
	}
	if err := removeAbandonedEntry(path); err != nil {
		t.Fatal(err)
	}
	if state, _ := entryStateOf(path); state != entryAbsent {
		t.Errorf("abandoned entry not removed")
	}
}
