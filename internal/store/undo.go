package store

import (
	"encoding/binary"
	"errors"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// undoLog is what a write transaction replaced: enough to write back, in a
// transaction of its own, the file as it was before it. A write that
// reached state.db but not its good copy is taken back so (see update),
// and it writes back only the values it replaced: the space the undo
// takes is what the write freed, so a file system the write filled still
// has room for it.
type undoLog struct {
	steps []undoStep
}

// undoStep is one thing a write changed: a key of a bucket (its value
// before, or that it had none), or a bucket it made or removed (with what
// the bucket held).
type undoStep struct {
	path   [][]byte // the bucket the key is in, from the top
	key    []byte
	prior  []byte // the value before; nil when absent
	bucket bool   // key names a bucket: made by the write (kids nil, absent) or removed
	absent bool   // the key, or bucket, did not exist before
	seq    bool   // the bucket at path's sequence was set; prior holds it before (8 bytes)
	kids   []undoKV
}

// undoKV is a key and value of a removed bucket.
type undoKV struct{ k, v []byte }

// put sets key in b, the bucket at path, noting its value before.
func (u *undoLog) put(b *bolt.Bucket, path [][]byte, key, val []byte) error {
	if u != nil {
		prior := b.Get(key)
		u.steps = append(u.steps, undoStep{path: path, key: slices.Clone(key), prior: slices.Clone(prior), absent: prior == nil})
	}
	return b.Put(key, val)
}

// delete removes key from b, the bucket at path, noting its value before.
func (u *undoLog) delete(b *bolt.Bucket, path [][]byte, key []byte) error {
	prior := b.Get(key)
	if prior == nil {
		return nil
	}
	if u != nil {
		u.steps = append(u.steps, undoStep{path: path, key: slices.Clone(key), prior: slices.Clone(prior)})
	}
	return b.Delete(key)
}

// setSequence sets the sequence of b, the bucket at path, noting it
// before.
func (u *undoLog) setSequence(b *bolt.Bucket, path [][]byte, seq uint64) error {
	if u != nil {
		u.steps = append(u.steps, undoStep{path: path, seq: true, prior: binary.BigEndian.AppendUint64(nil, b.Sequence())})
	}
	return b.SetSequence(seq)
}

// bucket returns the bucket named key under parent (the top when nil),
// at path, making it if it does not exist and noting that it was made.
func (u *undoLog) bucket(tx *bolt.Tx, parent *bolt.Bucket, path [][]byte, key []byte) (*bolt.Bucket, error) {
	var b *bolt.Bucket
	if parent == nil {
		b = tx.Bucket(key)
	} else {
		b = parent.Bucket(key)
	}
	if b != nil {
		return b, nil
	}
	if u != nil {
		u.steps = append(u.steps, undoStep{path: path, key: slices.Clone(key), bucket: true, absent: true})
	}
	if parent == nil {
		return tx.CreateBucket(key)
	}
	return parent.CreateBucket(key)
}

// deleteBucket removes the bucket named key under parent, at path, noting
// every key and value it held (a bucket of chunks holds no buckets).
func (u *undoLog) deleteBucket(parent *bolt.Bucket, path [][]byte, key []byte) error {
	b := parent.Bucket(key)
	if b == nil {
		return nil
	}
	if u != nil {
		step := undoStep{path: path, key: slices.Clone(key), bucket: true}
		if err := b.ForEach(func(k, v []byte) error {
			step.kids = append(step.kids, undoKV{slices.Clone(k), slices.Clone(v)})
			return nil
		}); err != nil {
			return err
		}
		u.steps = append(u.steps, step)
	}
	return parent.DeleteBucket(key)
}

// size is about how many bytes writing the log back takes in pages: what
// it holds, twice over for pages half filled, and some pages for the
// buckets' branches and the free list.
func (u *undoLog) size() int64 {
	n := int64(16 << 12)
	for _, s := range u.steps {
		n += 2 * int64(len(s.key)+len(s.prior)+16)
		for _, kv := range s.kids {
			n += 2 * int64(len(kv.k)+len(kv.v)+16)
		}
	}
	return n
}

// apply writes back, last change first, what the logged write replaced.
func (u *undoLog) apply(tx *bolt.Tx) error {
	for i := len(u.steps) - 1; i >= 0; i-- {
		if err := u.steps[i].undo(tx); err != nil {
			return err
		}
	}
	return nil
}

func (s *undoStep) undo(tx *bolt.Tx) error {
	var parent *bolt.Bucket
	for _, name := range s.path {
		if parent == nil {
			parent = tx.Bucket(name)
		} else {
			parent = parent.Bucket(name)
		}
		if parent == nil {
			return errUndoPath
		}
	}
	switch {
	case s.seq:
		if parent == nil || len(s.prior) != 8 {
			return errUndoPath
		}
		return parent.SetSequence(binary.BigEndian.Uint64(s.prior))
	case s.bucket && s.absent:
		if parent == nil {
			return tx.DeleteBucket(s.key)
		}
		return parent.DeleteBucket(s.key)
	case s.bucket:
		if parent == nil {
			return errUndoPath // only nested buckets are removed
		}
		b, err := parent.CreateBucket(s.key)
		if err != nil {
			return err
		}
		for _, kv := range s.kids {
			if err := b.Put(kv.k, kv.v); err != nil {
				return err
			}
		}
		return nil
	case parent == nil:
		return errUndoPath
	case s.absent:
		return parent.Delete(s.key)
	default:
		return parent.Put(s.key, s.prior)
	}
}

// errUndoPath says a bucket an undo step writes to is gone: the log is
// not of this file as it is.
var errUndoPath = errors.New("undo: a bucket the write changed is missing")
