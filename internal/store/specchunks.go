package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"
	bolt "go.etcd.io/bbolt"
)

// A large record's spec is kept apart from the rest of the record, in
// chunks, so that a change of one VM in a spec of thousands writes the
// chunk or two that hold its lines rather than the whole spec, to the file
// and its good copy alike:
//
//	specs/<infra>/<chunk key>   a form byte (0: as is, 1: zstd), the chunk
//
// A chunk's key is the xxhash64 of its bytes and their length (12 bytes),
// so a write puts only the chunks the bucket lacks and removes those the
// spec no longer has, and needs to know nothing of what an earlier write
// left. Where the spec is cut follows from its bytes alone (cutSpec): an
// edit moves the cuts around it only, and every other chunk keeps its key.
// The record's value then holds, instead of the spec, its manifest
// (valueChunked, see value.go): the spec's length and xxhash64 and its
// chunks' keys in order; a read puts the chunks back together and checks
// the whole against the hash, so that it gives back exactly the bytes
// applied or an error, never other bytes. A small spec, and a spec written
// by a build before chunks, is kept in the record itself.
var specsBucket = []byte("specs")

const (
	// chunkSpecAbove is the size of spec from which it is kept in chunks:
	// below it, the whole spec is a write or two of pages anyway.
	chunkSpecAbove = 16 << 10
	// A spec is cut where the gear hash of the bytes before has its top
	// specCutBits bits zero, but never into a chunk shorter than
	// specChunkMin or longer than specChunkMax: chunks of about 5 KiB,
	// a page or two once compressed.
	specChunkMin = 1 << 10
	specChunkMax = 16 << 10
	specCutBits  = 12
	specKeyLen   = 12
)

// gear is the table of the rolling hash that finds the cuts: fixed, so
// that every build and process cuts the same bytes alike (splitmix64 from
// a constant; a build that cut otherwise would only rewrite every chunk
// once).
var gear = func() (t [256]uint64) {
	x := uint64(0x5EED_0F_5EC5)
	for i := range t {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		t[i] = z ^ z>>31
	}
	return t
}()

// cutSpec cuts spec into chunks where its content says (see gear): the
// top bits of a gear hash depend on the last 64 bytes only, so an edit
// moves no cut beyond the chunk it falls in and the next.
func cutSpec(spec []byte) [][]byte {
	var out [][]byte
	for len(spec) > 0 {
		n := cutAt(spec)
		out = append(out, spec[:n:n])
		spec = spec[n:]
	}
	return out
}

// cutAt is the length of the first chunk of b.
func cutAt(b []byte) int {
	if len(b) <= specChunkMin {
		return len(b)
	}
	end := min(len(b), specChunkMax)
	var h uint64
	for i := 0; i < end; i++ {
		h = h<<1 + gear[b[i]]
		if i+1 >= specChunkMin && h>>(64-specCutBits) == 0 {
			return i + 1
		}
	}
	return end
}

func specChunkKey(c []byte) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, specKeyLen), xxhash.Sum64(c))
	return binary.BigEndian.AppendUint32(k, uint32(len(c)))
}

// specWrite is a large spec cut and ready to be written, once for the
// file and its good copy both.
type specWrite struct {
	chunks   [][]byte
	keys     [][]byte
	sum      uint64 // xxhash64 of the spec
	manifest []byte
	encoded  map[int][]byte // the chunks' stored forms, made as needed
}

// newSpecWrite cuts spec for writing; nil for a spec kept whole.
func newSpecWrite(spec []byte) *specWrite {
	if len(spec) <= chunkSpecAbove {
		return nil
	}
	w := &specWrite{chunks: cutSpec(spec), sum: xxhash.Sum64(spec), encoded: map[int][]byte{}}
	w.manifest = binary.AppendUvarint(nil, uint64(len(spec)))
	w.manifest = binary.BigEndian.AppendUint64(w.manifest, w.sum)
	w.manifest = binary.AppendUvarint(w.manifest, uint64(len(w.chunks)))
	for _, c := range w.chunks {
		k := specChunkKey(c)
		w.keys = append(w.keys, k)
		w.manifest = append(w.manifest, k...)
	}
	return w
}

// put writes infra's spec chunks: those the bucket lacks, removing those
// the spec no longer has. A nil w (a spec kept in the record) removes
// them all. u (nil: none) notes what it replaces.
func (w *specWrite) put(tx *bolt.Tx, infra string, u *undoLog) error {
	if w == nil {
		return deleteSpecChunks(tx, infra, u)
	}
	top, err := u.bucket(tx, nil, nil, specsBucket)
	if err != nil {
		return err
	}
	name := []byte(infra)
	b, err := u.bucket(tx, top, [][]byte{specsBucket}, name)
	if err != nil {
		return err
	}
	path := [][]byte{specsBucket, name}
	wanted := make(map[string]bool, len(w.keys))
	for i, k := range w.keys {
		if wanted[string(k)] {
			continue // the same bytes twice in the spec: one chunk
		}
		wanted[string(k)] = true
		if b.Get(k) != nil {
			continue
		}
		if err := u.put(b, path, k, w.stored(i)); err != nil {
			return err
		}
	}
	var stale [][]byte
	if err := b.ForEach(func(k, _ []byte) error {
		if !wanted[string(k)] {
			stale = append(stale, slices.Clone(k))
		}
		return nil
	}); err != nil {
		return err
	}
	for _, k := range stale {
		if err := u.delete(b, path, k); err != nil {
			return err
		}
	}
	return nil
}

// stored is chunk i as the bucket keeps it: compressed when that makes it
// smaller.
func (w *specWrite) stored(i int) []byte {
	if v, ok := w.encoded[i]; ok {
		return v
	}
	c := w.chunks[i]
	v := recordEncoder().EncodeAll(c, []byte{specCompressed})
	if len(v) >= len(c)+1 {
		v = append([]byte{specPlain}, c...)
	}
	w.encoded[i] = v
	return v
}

// reuse takes the stored forms of chunks an earlier write made (by key),
// which the same bytes always have: a write then compresses only the
// chunks that are new.
func (w *specWrite) reuse(stored map[string][]byte) {
	for i, k := range w.keys {
		if v, ok := stored[string(k)]; ok {
			w.encoded[i] = v
		}
	}
}

// storedByKey is the stored form of every chunk made or taken so far,
// by key, for reuse by the next write.
func (w *specWrite) storedByKey() map[string][]byte {
	out := make(map[string][]byte, len(w.encoded))
	for i, v := range w.encoded {
		out[string(w.keys[i])] = v
	}
	return out
}

// deleteSpecChunks removes infra's spec chunks, if it has any.
func deleteSpecChunks(tx *bolt.Tx, infra string, u *undoLog) error {
	top := tx.Bucket(specsBucket)
	if top == nil {
		return nil
	}
	return u.deleteBucket(top, [][]byte{specsBucket}, []byte(infra))
}

var errSpecChunks = errors.New("spec chunks damaged")

// readSpec puts infra's spec back together from its manifest and chunks,
// and checks it whole against the manifest's length and hash.
func readSpec(tx *bolt.Tx, infra string, manifest []byte) ([]byte, error) {
	bad := func(what string, args ...any) error {
		return &damage{fmt.Errorf("record %q: %w: %s", infra, errSpecChunks, fmt.Sprintf(what, args...))}
	}
	size, n := binary.Uvarint(manifest)
	if n <= 0 || size > MaxValuePayload || len(manifest[n:]) < 8 {
		return nil, bad("no length, or above what a spec may hold")
	}
	sum := binary.BigEndian.Uint64(manifest[n:])
	rest := manifest[n+8:]
	count, n := binary.Uvarint(rest)
	if n <= 0 || uint64(len(rest)-n) != count*specKeyLen {
		return nil, bad("the list of chunks is %d bytes, not %d keys", len(rest), count)
	}
	rest = rest[n:]
	var b *bolt.Bucket
	if top := tx.Bucket(specsBucket); top != nil {
		b = top.Bucket([]byte(infra))
	}
	if b == nil {
		return nil, bad("no chunks")
	}
	spec := make([]byte, 0, size)
	for ; len(rest) > 0; rest = rest[specKeyLen:] {
		k := rest[:specKeyLen]
		want := binary.BigEndian.Uint32(k[8:])
		if uint64(len(spec))+uint64(want) > size || want > specChunkMax {
			return nil, bad("chunks longer than the spec")
		}
		v := b.Get(k)
		if len(v) == 0 {
			return nil, bad("chunk %x missing", k)
		}
		before := len(spec)
		var err error
		spec, err = appendChunk(spec, v)
		if err != nil || len(spec)-before != int(want) {
			return nil, bad("chunk %x: %d bytes of the %d its key says (%v)", k, len(spec)-before, want, err)
		}
	}
	if uint64(len(spec)) != size || xxhash.Sum64(spec) != sum {
		return nil, bad("the chunks do not make the spec written")
	}
	return spec, nil
}

// appendChunk appends to spec the bytes of a chunk as stored (see
// specWrite.stored); a compressed chunk no further than spec's capacity.
func appendChunk(spec, v []byte) ([]byte, error) {
	switch v[0] {
	case specPlain:
		return append(spec, v[1:]...), nil
	case specCompressed:
		return recordDecoder().DecodeAll(v[1:], spec)
	}
	return spec, fmt.Errorf("form %d", v[0])
}

// checkSpecChunks checks that every chunk of every spec is a form this
// build reads (see checkTx; the records' reads check the rest).
func checkSpecChunks(tx *bolt.Tx) error {
	top := tx.Bucket(specsBucket)
	if top == nil {
		return nil
	}
	return top.ForEachBucket(func(name []byte) error {
		return top.Bucket(name).ForEach(func(k, v []byte) error {
			if len(k) != specKeyLen || len(v) == 0 || v[0] > specCompressed {
				return &damage{fmt.Errorf("record %q: %w", name, errSpecChunks)}
			}
			return nil
		})
	})
}
