package store

import (
	"hash/maphash"
	"slices"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Put stores a record, replacing any with the same name, in one
// transaction: the record and its realized resources, of which it writes
// only the chunks that changed since this value's last write.
func (b *Bolt) Put(r *Record) error {
	head := *r
	head.Realized = nil
	v, err := EncodeValue(&head)
	if err != nil {
		return err
	}
	// Where each resource goes is worked out once, for the file and its
	// good copy both.
	split := splitChunks(r.Realized)
	b.wmu.Lock()
	defer b.wmu.Unlock()
	put := func(cache map[string]*chunkCache, wrote **chunkCache) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucket).Put([]byte(r.Name), v); err != nil {
				return err
			}
			var err error
			*wrote, err = putRealized(tx, r.Name, r.Realized, split, cache[r.Name])
			return err
		}
	}
	var wrote, wroteGood *chunkCache
	err = b.update(put(b.written, &wrote), func() {
		b.written = keepChunks(b.written, r.Name, wrote)
	}, put(b.writtenGood, &wroteGood), func(kept goodWrite) {
		b.goodWritten(kept)
		if kept == goodMirrored {
			b.writtenGood = keepChunks(b.writtenGood, r.Name, wroteGood)
		}
	})
	if wrote == nil {
		delete(b.written, r.Name)
	}
	if h, ok := storedHead(r); ok && err == nil {
		// The next apply reads what this one wrote.
		b.keepHead(r.Name, len(v), maphash.Bytes(headSeed, v), h)
	}
	return err
}

// storedHead is the head a record's JSON decodes to, made without the
// JSON, and false when it cannot tell (a string JSON would change).
func storedHead(r *Record) (*Record, bool) {
	if !utf8.ValidString(r.Name) || !utf8.ValidString(r.SpecFile) || !utf8.ValidString(r.Engine) {
		return nil, false
	}
	h := *r
	h.Realized = nil
	// The caller keeps its slices; the time keeps what JSON does of it
	// (no monotonic reading, its offset as a zone).
	h.Spec, h.SpecEncoded = slices.Clone(r.Spec), slices.Clone(r.SpecEncoded)
	if len(h.SpecEncoded) == 0 {
		h.SpecEncoded = nil
	}
	t, err := r.AppliedAt.MarshalJSON()
	if err != nil || h.AppliedAt.UnmarshalJSON(t) != nil {
		return nil, false
	}
	return &h, true
}

// keepChunks notes in m what a write left of name's chunks (nil: unknown).
func keepChunks(m map[string]*chunkCache, name string, c *chunkCache) map[string]*chunkCache {
	if c == nil {
		delete(m, name)
		return m
	}
	if m == nil {
		m = map[string]*chunkCache{}
	}
	m[name] = c
	return m
}

// Delete removes a record; removing a missing one is not an error.
func (b *Bolt) Delete(name string) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	delete(b.written, name)
	delete(b.writtenGood, name)
	b.forgetHead(name)
	del := func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucket).Delete([]byte(name)); err != nil {
			return err
		}
		return deleteRealized(tx, name)
	}
	return b.update(del, nil, del, b.goodWritten)
}

// update runs fn in a write transaction, then committed (when set), and
// then brings the good copy to the file as it now is: by running mirror,
// the same write, on the copy when the copy is the file as it was before
// this write (see mirrorGood), else by copying the whole file once it
// checks out (keepGood). mirrored, when set, is told which it was, under
// wmu when the caller holds it.
//
// The copy is never made of the file's bytes unchecked: a mirrored write
// is made of the caller's values, so damage to the file cannot reach the
// copy, and a whole copy is checked first. The file stays locked for
// writing throughout, so the writes of other processes reach the copy in
// the order they reached the file.
func (b *Bolt) update(fn func(*bolt.Tx) error, committed func(), mirror func(*bolt.Tx) error, mirrored func(goodWrite)) error {
	db, err := b.open(false)
	if err != nil {
		return err
	}
	defer db.Close()
	var txid uint64
	if err := b.classify(guard(func() error {
		return db.Update(func(tx *bolt.Tx) error {
			txid = uint64(tx.ID())
			return fn(tx)
		})
	})); err != nil {
		return err
	}
	if committed != nil {
		committed()
	}
	kept := goodMirrored
	if mirror == nil || b.mirrorGood(txid, mirror) != nil {
		if err = b.keepGood(db); err == nil {
			kept = goodCopied
		} else {
			kept = goodFailed
		}
	}
	if mirrored != nil {
		mirrored(kept)
	}
	return err
}
