package store

import (
	"encoding/json"
	"fmt"
	"hash/maphash"

	bolt "go.etcd.io/bbolt"
)

// cachedHead is a record's head and a hash of the bytes it was stored as.
type cachedHead struct {
	sum  uint64
	size int
	rec  Record
}

var headSeed = maphash.MakeSeed()

// cachedHeadOf returns the head kept for name when v, the record's
// stored bytes, is what it was kept for. Its byte slices are shared with
// every other caller's: they are read, never changed.
func (b *Bolt) cachedHeadOf(name string, v []byte, sum uint64) (*Record, bool) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	h, ok := b.heads[name]
	if !ok || h.size != len(v) || h.sum != sum {
		return nil, false
	}
	r := h.rec
	return &r, true
}

// keepHead keeps r, name's head, as stored in bytes whose hash is sum.
func (b *Bolt) keepHead(name string, size int, sum uint64, r *Record) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	if b.heads == nil {
		b.heads = map[string]cachedHead{}
	}
	h := *r
	h.Realized = nil
	b.heads[name] = cachedHead{sum: sum, size: size, rec: h}
}

func (b *Bolt) forgetHead(name string) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	delete(b.heads, name)
	delete(b.nsJSON, name)
}

// Head returns the record of an infrastructure without what was realized
// (Realized is nil), which is most of a large record's decoding.
// A head read before from the same bytes is not decoded again; its byte
// slices (Spec, SpecEncoded) are shared and must not be changed.
func (b *Bolt) Head(name string) (*Record, error) {
	var r *Record
	err := b.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get([]byte(name))
		if v == nil {
			return fmt.Errorf("%q: %w", name, ErrNotFound)
		}
		sum := maphash.Bytes(headSeed, v)
		var ok bool
		if r, ok = b.cachedHeadOf(name, v, sum); ok {
			return nil
		}
		var err error
		if r, err = decodeHead(tx, name, v); err == nil {
			b.keepHead(name, len(v), sum, r)
		}
		return err
	})
	return r, err
}

// decodeHead decodes a record but what was realized.
func decodeHead(tx *bolt.Tx, name string, v []byte) (*Record, error) {
	if IsCompressedValue(v) {
		return decodeRecord(tx, name, v) // written without what was realized
	}
	var h struct {
		*Record
		Realized skipJSON `json:"realized"`
	}
	h.Record = &Record{}
	if err := json.Unmarshal(v, &h); err != nil {
		return nil, &damage{fmt.Errorf("record %q: %w", name, err)}
	}
	return h.Record, nil
}

// skipJSON takes any JSON value and keeps nothing of it.
type skipJSON struct{}

func (*skipJSON) UnmarshalJSON([]byte) error { return nil }
