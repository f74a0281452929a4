package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DefaultDir is where vnet keeps its state unless told otherwise.
const DefaultDir = "/var/lib/vnet"

var bucket = []byte("infras")

// Bolt is the embedded default store: one bbolt file under the state dir.
// Its file lock also keeps two vnet commands from changing the host at once.
type Bolt struct{ db *bolt.DB }

// OpenBolt opens (creating if needed) dir/state.db.
func OpenBolt(dir string) (*Bolt, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	path := filepath.Join(dir, "state.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("state store %s is locked: another vnet command is running", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("init state store: %w", err)
	}
	return &Bolt{db: db}, nil
}

// Get returns the record of an infrastructure.
func (b *Bolt) Get(name string) (*Record, error) {
	var r *Record
	err := b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get([]byte(name))
		if v == nil {
			return fmt.Errorf("%q: %w", name, ErrNotFound)
		}
		r = &Record{}
		return json.Unmarshal(v, r)
	})
	return r, err
}

// Put stores a record, replacing any with the same name.
func (b *Bolt) Put(r *Record) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte(r.Name), v) })
}

// Delete removes a record; removing a missing one is not an error.
func (b *Bolt) Delete(name string) error {
	return b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Delete([]byte(name)) })
}

// List returns every record, by name.
func (b *Bolt) List() ([]*Record, error) {
	var out []*Record
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(_, v []byte) error {
			r := &Record{}
			if err := json.Unmarshal(v, r); err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// Close releases the file and its lock.
func (b *Bolt) Close() error { return b.db.Close() }
