package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"

	"github.com/vnet-project/vnet/internal/atomicfile"
	bolt "go.etcd.io/bbolt"
)

// goodWrite is how a write reached the good copy.
type goodWrite int

const (
	goodFailed   goodWrite = iota // it did not: the copy is the one before
	goodMirrored                  // the write was made there too
	goodCopied                    // the copy was made anew of the whole file
)

// goodWritten keeps writtenGood true to the good copy after a write: a
// whole copy holds the file's chunks, of which written is what this value
// knows, and a copy that may be another than the one written before holds
// chunks this value knows nothing of. (A chunk cache is only trusted
// where its token is in the bucket.)
func (b *Bolt) goodWritten(kept goodWrite) {
	switch kept {
	case goodCopied:
		b.writtenGood = maps.Clone(b.written)
	case goodFailed:
		b.writtenGood = nil
	}
}

// mirrorKey holds, in the good copy's meta bucket, the ID of the file's
// transaction that the copy is as of (8 bytes, big-endian).
var mirrorKey = []byte("mirrors")

// errNotMirror says the good copy is not the file as of the write before:
// it must be made anew.
var errNotMirror = errors.New("the good copy is not the file as of its last write")

// mirrorGood runs fn, the write of the file's transaction txid, on the good
// copy, when the copy is the file as of the transaction before it.
// Otherwise (no copy, a copy of another transaction or made by a vnet that
// did not note it, a copy that does not open) it changes nothing and fails.
// bbolt commits the copy's write whole or not at all, as it does the
// file's.
func (b *Bolt) mirrorGood(txid uint64, fn func(*bolt.Tx) error, laps *writeLaps) error {
	if info, err := os.Stat(b.goodPath()); err != nil || info.Size() == 0 {
		return errNotMirror // bbolt would make an empty file a new store
	}
	return guard(func() error {
		db, err := bolt.Open(b.goodPath(), 0o600, &bolt.Options{Timeout: fileLockWait, PreLoadFreelist: true})
		if err != nil {
			return err
		}
		defer db.Close()
		laps.lap("good copy: opened")
		err = db.Update(func(tx *bolt.Tx) error {
			mb := tx.Bucket(metaBucket)
			if mb == nil || tx.Bucket(bucket) == nil {
				return errNotMirror
			}
			if v := mb.Get(mirrorKey); len(v) != 8 || binary.BigEndian.Uint64(v) != txid-1 {
				return errNotMirror
			}
			if err := fn(tx); err != nil {
				return err
			}
			return mb.Put(mirrorKey, binary.BigEndian.AppendUint64(nil, txid))
		})
		if err == nil {
			laps.committed("good copy", db)
		}
		return err
	})
}

// goodAsOf is the transaction of the file the good copy is as of (see
// mirrorGood), 0 when there is no copy or it does not tell.
func (b *Bolt) goodAsOf() uint64 {
	var txid uint64
	_ = guard(func() error {
		db, err := openFile(b.goodPath(), true)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.View(func(tx *bolt.Tx) error {
			if mb := tx.Bucket(metaBucket); mb != nil {
				if v := mb.Get(mirrorKey); len(v) == 8 {
					txid = binary.BigEndian.Uint64(v)
				}
			}
			return nil
		})
	})
	return txid
}

// renoteGood notes in the good copy that it is the file as of transaction
// to, when it is as of from: the two hold the same records. A copy that
// cannot be noted is made anew at the next write.
func (b *Bolt) renoteGood(from, to uint64) {
	if info, err := os.Stat(b.goodPath()); err != nil || info.Size() == 0 {
		return
	}
	_ = guard(func() error {
		db, err := bolt.Open(b.goodPath(), 0o600, &bolt.Options{Timeout: fileLockWait})
		if err != nil {
			return err
		}
		defer db.Close()
		return db.Update(func(tx *bolt.Tx) error {
			mb := tx.Bucket(metaBucket)
			if mb == nil {
				return errNotMirror
			}
			if v := mb.Get(mirrorKey); len(v) != 8 || binary.BigEndian.Uint64(v) != from {
				return errNotMirror
			}
			return mb.Put(mirrorKey, binary.BigEndian.AppendUint64(nil, to))
		})
	})
}

// removeGood removes the good copy, for one that would name what the file
// no longer holds. Removing takes no space, so it works on a full file
// system.
func (b *Bolt) removeGood() error {
	err := os.Remove(b.goodPath())
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// refreshGood makes the good copy anew from the file as it is.
func (b *Bolt) refreshGood() error {
	db, err := b.open(false)
	if err != nil {
		return err
	}
	defer db.Close()
	return b.keepGood(db)
}

// keepGood checks the file as it is after a write and copies it to
// state.db.good, noting in the copy which of the file's transactions it is
// as of, so that later writes can be mirrored there. A check that fails
// leaves the previous copy in place.
func (b *Bolt) keepGood(db *bolt.DB) error {
	b.dropStaleCopies()
	p, err := atomicfile.Create(b.goodPath(), 0o600)
	if err != nil {
		return fmt.Errorf("keep a good copy of %s: %w", b.path, err)
	}
	defer p.Abort()
	var txid uint64
	err = guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			if _, err := checkTx(tx, b.path); err != nil {
				return err
			}
			txid = uint64(tx.ID())
			_, err := tx.WriteTo(p.File())
			return err
		})
	})
	if err == nil {
		err = noteMirror(p.Name(), txid)
	}
	if err == nil {
		err = p.Commit()
	}
	if err != nil {
		return fmt.Errorf("keep a good copy of %s: %w", b.path, b.classify(err))
	}
	return nil
}

// dropStaleCopies removes whole copies that a process killed while making
// one left behind. Only a writer makes copies, and it holds the file's
// exclusive lock, so no other is being made.
func (b *Bolt) dropStaleCopies() {
	stale, _ := filepath.Glob(filepath.Join(b.dir, "."+goodFile+".tmp-*"))
	for _, f := range stale {
		os.Remove(f)
	}
}

// noteMirror notes in a copy of the file which of the file's transactions
// it is as of (see mirrorGood).
func noteMirror(path string, txid uint64) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: fileLockWait})
	if err != nil {
		return fmt.Errorf("keep a good copy: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		mb, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		return mb.Put(mirrorKey, binary.BigEndian.AppendUint64(nil, txid))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("keep a good copy: %w", err)
	}
	return nil
}
