package dataplane

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A file that is no namespace (an unfinished entry, a plain file) has no
// ID: the ownership check then reads the entry's mark, which finds none.
// The process's own namespace has one, the same by any of its files.
func TestNamespaceIDOnlyOfNamespaces(t *testing.T) {
	plain := filepath.Join(t.TempDir(), "vnet.x.esx1")
	if err := os.WriteFile(plain, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if id, err := nsIDOf(plain); err == nil {
		t.Errorf("a plain file has namespace ID %d", id)
	}
	if !nsIDs() {
		t.Skip("this kernel tells no namespace's ID (NS_GET_ID, Linux 6.18)")
	}
	a, errA := nsIDOf("/proc/self/ns/net")
	b, errB := nsIDOf("/proc/thread-self/ns/net")
	if errA != nil || errB != nil || a == 0 || a != b {
		t.Errorf("IDs of this namespace: %d (%v) and %d (%v)", a, errA, b, errB)
	}
	if id, err := nsIDOf("/proc/self/ns/uts"); !errors.Is(err, errNotNetns) {
		t.Errorf("a namespace of another type has network namespace ID %d (%v)", id, err)
	}
}
