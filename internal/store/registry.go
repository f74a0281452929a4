package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/vnet-project/vnet/internal/atomicfile"
	"github.com/vnet-project/vnet/internal/rundir"
)

// What a store made carries the store's ID (plan.Mark), and the directory
// it was in to name it by; a directory can be moved, so the ID, not the
// directory, is whose it is. The registry says where each store on this
// machine that records something was last opened: a file per ID in
// RegistryDir holding the directory, written whenever such a store is
// opened (or begins its first apply) somewhere else than it says, and
// removed when it records nothing again. So a store whose directory moved
// is found again at its new place as soon as any command opens it there,
// and what it made is left to it.
// The registry lives in /run, as do the namespaces: both go with a
// reboot.

// RegistryDir is where the registry is kept: the stores directory of the
// run directory (rundir.Dir), read at each use.
func RegistryDir() string {
	return filepath.Join(rundir.Dir(), "stores")
}

// storeID is what an ID looks like (NewID); anything else is not a file
// of the registry's.
var storeID = regexp.MustCompile(`^[0-9a-f]{16}$`)

// register notes that the store with id is in dir, unless the registry
// says so already. A registry that cannot be written (not root) notes
// nothing: only finding moved stores again depends on it.
func register(id, dir string) {
	if !storeID.MatchString(id) || registered(id) == dir {
		return
	}
	reg := RegistryDir()
	if err := os.MkdirAll(reg, 0o755); err != nil {
		return
	}
	_ = atomicfile.Write(filepath.Join(reg, id), []byte(dir+"\n"), 0o644) // not noted is as above
}

// registered is the directory the registry names for id, "" for none.
func registered(id string) string {
	if !storeID.MatchString(id) {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(RegistryDir(), id))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Whereabouts is where a store is, found by its ID.
type Whereabouts struct {
	ID string
	// Dir is where the store is now: the directory holds a store with
	// this ID. "" when it was not found.
	Dir string
	// Named is the directory that named it (a mark's), and Last where the
	// registry last saw it ("" when it never did).
	Named, Last string
}

// Found reports whether the store exists on this machine.
func (w Whereabouts) Found() bool { return w.Dir != "" }

// Moved reports whether it was found elsewhere than where it was named.
func (w Whereabouts) Moved() bool { return w.Found() && w.Named != "" && w.Dir != w.Named }

// Find looks for the store with id: in dir, the directory that named it
// (a mark's; "" when unknown), then where the registry last saw it. A
// store not found is not known to be gone: its directory may have moved
// and not been opened since, or be on a file system not mounted now.
func Find(id, dir string) Whereabouts {
	w := Whereabouts{ID: id, Named: dir, Last: registered(id)}
	for _, d := range []string{dir, w.Last} {
		if d != "" && filepath.IsAbs(d) && IDAt(d) == id {
			w.Dir = d
			return w
		}
	}
	return w
}

// Registered lists the stores the registry knows of, by ID, with the
// directory it last saw each in.
func Registered() (map[string]string, error) {
	entries, err := os.ReadDir(RegistryDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		if storeID.MatchString(e.Name()) {
			if dir := registered(e.Name()); dir != "" {
				out[e.Name()] = dir
			}
		}
	}
	return out, nil
}

// Forget drops ids from the registry: stores gone for good, whose objects
// are gone too.
func Forget(ids ...string) {
	for _, id := range ids {
		if storeID.MatchString(id) {
			os.Remove(filepath.Join(RegistryDir(), id))
		}
	}
}

// Names lists the infrastructures recorded by the store with id in dir,
// read without a lock and without changing anything; none when dir holds
// no store with that ID.
func Names(id, dir string) ([]string, error) {
	if IDAt(dir) != id {
		return nil, nil
	}
	_, names, err := verify(filepath.Join(dir, dbFile))
	return names, err
}
