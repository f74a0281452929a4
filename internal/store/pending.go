package store

import (
	"errors"
	"os"
	"path/filepath"
)

// pendingDir holds one empty file per infrastructure whose apply began
// changing the host and has not finished (recorded or rolled back).
const pendingDir = "pending"

// Pending is a store that remembers an apply that began changing the host
// and never finished, so that the next apply can read the whole host
// rather than only what its change touches: a killed apply leaves changes
// the difference between two specs does not name.
type Pending interface {
	// SetPending notes that an apply of name begins changing the host.
	SetPending(name string) error
	// ClearPending notes that the host is again as the record says.
	ClearPending(name string) error
	// IsPending reports whether an apply of name began and did not finish.
	IsPending(name string) bool
}

// SetPending makes pending/<name>. It is not synced: what it guards is in
// the kernel, which a lost write to disk outlives only through a crash of
// the machine, after which no namespace is left either.
func (b *Bolt) SetPending(name string) error {
	register(b.id, b.dir) // before the kernel holds anything of the store's
	dir := filepath.Join(b.dir, pendingDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	return f.Close()
}

// ClearPending removes pending/<name>.
func (b *Bolt) ClearPending(name string) error {
	err := os.Remove(filepath.Join(b.dir, pendingDir, name))
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err == nil && !b.holdsAny() {
		Forget(b.id) // a first apply undone: nothing of the store's is left
	}
	return err
}

// IsPending reports whether pending/<name> exists.
func (b *Bolt) IsPending(name string) bool {
	_, err := os.Stat(filepath.Join(b.dir, pendingDir, name))
	return err == nil
}
