package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vnet-project/vnet/internal/atomicfile"
	bolt "go.etcd.io/bbolt"
)

// assignID gives a store made before stores had IDs one.
func (b *Bolt) assignID() (string, error) {
	id := readIDFile(b.dir)
	if id == "" {
		id = NewID()
	}
	_, err := b.update(fileWrite{file: func(tx *bolt.Tx, _ *undoLog) error {
		mb, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if v := mb.Get(idKey); v != nil {
			id = string(v) // another command named it first
			return nil
		}
		return mb.Put(idKey, []byte(id))
	}})
	return id, err
}

// createDB makes a new store with the ID given (a new one if ""). It is
// made whole under another name and then linked into place, so that
// state.db never exists half made; an empty state.db is always damage.
func createDB(dir, path, id string) error {
	if id == "" {
		id = NewID()
	}
	tmp := tempName(path, "new")
	defer os.Remove(tmp)
	os.Remove(tmp)
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: fileLockWait})
	if err != nil {
		return fmt.Errorf("create state store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucket(bucket); err != nil {
			return err
		}
		mb, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		return mb.Put(idKey, []byte(id))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create state store %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create state store %s: %w", path, err)
	}
	return atomicfile.SyncDir(dir)
}

// NewID makes a random store ID.
func NewID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

func readIDFile(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, idFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// IDAt returns the ID of the store in dir ("" when dir holds none): a
// mark naming a store that is gone makes its namespaces orphans.
func IDAt(dir string) string { return readIDFile(dir) }

// tempName is a scratch name beside path, unique to this call: two
// goroutines of one process (the API server's) may write the same file at
// once, and a name by pid alone had one remove the other's.
func tempName(path, tag string) string {
	return fmt.Sprintf("%s.%s-%d-%s", path, tag, os.Getpid(), NewID()[:8])
}
