package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/vnet-project/vnet/internal/history"
)

// HistoryStore keeps each infrastructure's history (history.Entry): an
// entry per change, with the spec stored after it, bounded by the
// store's retention. Entries outlive their infrastructure's record, so a
// destroyed infrastructure's history still lists what it was and a
// rollback can bring it back.
type HistoryStore interface {
	// AppendHistory keeps e, giving it the next Seq of its infrastructure
	// (and At, when zero), then drops what the retention no longer keeps,
	// e's generation being the current one. It returns e as kept.
	AppendHistory(e history.Entry) (history.Entry, error)
	// HistoryHeads lists an infrastructure's entries without their specs,
	// oldest first; none is not an error.
	HistoryHeads(infra string) ([]history.Entry, error)
	// HistoryEntry is one entry with its spec; an entry the history does
	// not keep is history.ErrNotFound.
	HistoryEntry(infra string, seq int) (history.Entry, error)
	// HistoryRetention is how many entries, and of what age, the store
	// keeps; SetHistoryRetention changes it and prunes every history to it.
	HistoryRetention() (history.Retention, error)
	SetHistoryRetention(r history.Retention) error
}

var _ HistoryStore = (*Bolt)(nil)

// In the local store, the history is a bucket of its own, with a bucket
// per infrastructure holding, per entry, its head (the entry without its
// spec, JSON) and its spec, apart so that a listing reads no spec:
//
//	history/<infra>/h<seq, 8 bytes big-endian>   head
//	history/<infra>/s<seq, 8 bytes big-endian>   spec (EncodeHistorySpec, or
//	                                             chunked: see historySpecOf)
//
// The infrastructure's bucket's sequence is the last Seq given, which
// never goes back, whatever pruning removed.
var (
	historyBucket = []byte("history")
	retentionKey  = []byte("history-retention")
)

func historyKey(kind byte, seq int) []byte {
	return binary.BigEndian.AppendUint64([]byte{kind}, uint64(seq))
}

// AppendHistory keeps an entry in one transaction of its own. A change of
// a record keeps its entry in the record's own transaction instead
// (PutWithHistory), so that no record's generation lacks its entry.
func (b *Bolt) AppendHistory(e history.Entry) (history.Entry, error) {
	a, err := newEntryWrite(e)
	if err != nil {
		return e, err
	}
	err = b.updateHistory(func(tx *bolt.Tx) error { return a.write(tx, nil) })
	return a.e, err
}

// entryWrite is the write of one history entry, made alike in state.db
// and in its good copy: the file's transaction gives the entry its Seq and
// the copy's takes the same, and both prune by the same clock.
type entryWrite struct {
	e    history.Entry
	spec []byte // e.Spec as kept, made by the first write (see historySpecOf)
	now  time.Time
}

// newEntryWrite checks e and prepares its write; At, when zero, is now.
func newEntryWrite(e history.Entry) (*entryWrite, error) {
	now := time.Now()
	if e.At.IsZero() {
		e.At = now.UTC()
	}
	if err := checkEntry(e); err != nil {
		return nil, err
	}
	e.Seq = 0 // given by the store
	return &entryWrite{e: e, now: now}, nil
}

// specOf has the entry keep its spec as w's chunks, where it is the
// spec w cut: the record written with it has its chunks compressed
// already.
func (a *entryWrite) specOf(w *specWrite, spec []byte) {
	if w != nil && len(a.e.Spec) == len(spec) && bytes.Equal(a.e.Spec, spec) {
		a.spec = encodeChunkedHistorySpec(w, len(spec))
	}
}

// write keeps the entry in tx, giving it the next Seq of its
// infrastructure unless an earlier write (the file's, for the copy) gave
// it one, and drops what the retention no longer keeps; u (nil: none)
// notes what it replaces, so that the write can be taken back.
func (a *entryWrite) write(tx *bolt.Tx, u *undoLog) error {
	top, err := u.bucket(tx, nil, nil, historyBucket)
	if err != nil {
		return err
	}
	name := []byte(a.e.Infra)
	infra, err := u.bucket(tx, top, [][]byte{historyBucket}, name)
	if err != nil {
		return err
	}
	path := [][]byte{historyBucket, name}
	if a.e.Seq == 0 {
		a.e.Seq = int(infra.Sequence()) + 1
	}
	if err := u.setSequence(infra, path, uint64(a.e.Seq)); err != nil {
		return err
	}
	head, err := json.Marshal(a.e.Head())
	if err != nil {
		return err
	}
	if err := u.put(infra, path, historyKey('h', a.e.Seq), head); err != nil {
		return err
	}
	if len(a.e.Spec) > 0 {
		if a.spec == nil {
			a.spec = EncodeHistorySpec(a.e.Spec)
		}
		if err := u.put(infra, path, historyKey('s', a.e.Seq), a.spec); err != nil {
			return err
		}
	}
	r, err := retentionIn(tx)
	if err != nil {
		return err
	}
	return pruneHistory(infra, path, r, a.e.Generation, a.now, &a.e, u)
}

// updateHistory makes a write of the history in state.db and its good
// copy. A history's write is not taken back from state.db when the copy
// cannot take it: the copy is removed, as after a deletion, and the next
// write makes it anew, since an entry describes a change the record
// already holds.
func (b *Bolt) updateHistory(write func(*bolt.Tx) error) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	kept, err := b.update(fileWrite{file: func(tx *bolt.Tx, _ *undoLog) error { return write(tx) }, mirror: write})
	b.goodWritten(kept)
	return err
}

// checkEntry refuses an entry no history should hold.
func checkEntry(e history.Entry) error {
	if err := checkInfraName(e.Infra); err != nil {
		return err
	}
	e.Seq = 1 // given by the store
	return e.Validate()
}

func checkInfraName(name string) error {
	if name == "" || len(name) > 255 {
		return fmt.Errorf("history of %q: %w: not an infrastructure name", name, history.ErrInvalid)
	}
	return nil
}

// historyOf is an infrastructure's history bucket; nil when it has none.
// (Writes make it through the undo log: see entryWrite.)
func historyOf(tx *bolt.Tx, infra string) *bolt.Bucket {
	top := tx.Bucket(historyBucket)
	if top == nil {
		return nil
	}
	return top.Bucket([]byte(infra))
}

// pruneHistory drops the entries r no longer keeps of the history bucket
// at path, current being the infrastructure's generation now and newest
// (nil: unknown) the entry just written; u (nil: none) notes what it
// drops. Where the retention follows from the entries' count (see
// history.Retention.DropsOldest), as it does after every change under the
// default retention, it decodes no head: a change then costs the same
// however long the history.
func pruneHistory(infra *bolt.Bucket, path [][]byte, r history.Retention, current int, now time.Time, newest *history.Entry, u *undoLog) error {
	if newest != nil {
		if drop, ok := r.DropsOldest(countHeads(infra), *newest, current); ok {
			return dropOldest(infra, path, drop, u)
		}
	}
	heads, err := headsIn(infra, string(path[len(path)-1]))
	if err != nil {
		return err
	}
	_, dropped := r.Prune(heads, current, now)
	for _, d := range dropped {
		if err := dropEntry(infra, path, d.Seq, u); err != nil {
			return err
		}
	}
	return nil
}

// countHeads is how many entries a history bucket holds.
func countHeads(infra *bolt.Bucket) int {
	n := 0
	c := infra.Cursor()
	for k, _ := c.Seek([]byte{'h'}); k != nil && k[0] == 'h'; k, _ = c.Next() {
		n++
	}
	return n
}

// dropOldest drops the n oldest entries of a history bucket.
func dropOldest(infra *bolt.Bucket, path [][]byte, n int, u *undoLog) error {
	var seqs []int
	c := infra.Cursor()
	for k, _ := c.Seek([]byte{'h'}); k != nil && k[0] == 'h' && len(seqs) < n; k, _ = c.Next() {
		if len(k) != 9 {
			return fmt.Errorf("history of %s: damaged: a key of %d bytes", path[len(path)-1], len(k))
		}
		seqs = append(seqs, int(binary.BigEndian.Uint64(k[1:])))
	}
	for _, seq := range seqs {
		if err := dropEntry(infra, path, seq, u); err != nil {
			return err
		}
	}
	return nil
}

// dropEntry removes an entry's head and spec.
func dropEntry(infra *bolt.Bucket, path [][]byte, seq int, u *undoLog) error {
	if err := u.delete(infra, path, historyKey('h', seq)); err != nil {
		return err
	}
	return u.delete(infra, path, historyKey('s', seq))
}

// headsIn decodes every head of a history bucket, in Seq order.
func headsIn(infra *bolt.Bucket, name string) ([]history.Entry, error) {
	var out []history.Entry
	c := infra.Cursor()
	for k, v := c.Seek([]byte{'h'}); k != nil && k[0] == 'h'; k, v = c.Next() {
		e, err := DecodeHistoryHead(name, v)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// HistoryHeads lists an infrastructure's entries without their specs.
func (b *Bolt) HistoryHeads(infra string) ([]history.Entry, error) {
	var out []history.Entry
	err := b.view(func(tx *bolt.Tx) error {
		h := historyOf(tx, infra)
		if h == nil {
			return nil
		}
		var err error
		out, err = headsIn(h, infra)
		return err
	})
	return out, err
}

// HistoryEntry is one entry with its spec.
func (b *Bolt) HistoryEntry(infra string, seq int) (history.Entry, error) {
	var e history.Entry
	err := b.view(func(tx *bolt.Tx) error {
		h := historyOf(tx, infra)
		var head []byte
		if h != nil {
			head = h.Get(historyKey('h', seq))
		}
		if head == nil {
			return fmt.Errorf("%s entry %d: %w", infra, seq, history.ErrNotFound)
		}
		var err error
		if e, err = DecodeHistoryHead(infra, head); err != nil {
			return err
		}
		if v := h.Get(historyKey('s', seq)); v != nil {
			e.Spec, err = DecodeHistorySpec(v)
		}
		return err
	})
	return e, err
}

// HistoryRetention is the store's retention; the zero value (the default)
// when none was set.
func (b *Bolt) HistoryRetention() (history.Retention, error) {
	var r history.Retention
	err := b.view(func(tx *bolt.Tx) (err error) {
		r, err = retentionIn(tx)
		return err
	})
	return r, err
}

func retentionIn(tx *bolt.Tx) (history.Retention, error) {
	var r history.Retention
	mb := tx.Bucket(metaBucket)
	if mb == nil {
		return r, nil
	}
	return DecodeRetention(mb.Get(retentionKey))
}

// SetHistoryRetention keeps r as the store's retention and prunes every
// history to it, in one transaction.
func (b *Bolt) SetHistoryRetention(r history.Retention) error {
	if err := r.Validate(); err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	now := time.Now()
	write := func(tx *bolt.Tx) error {
		mb, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if err := mb.Put(retentionKey, v); err != nil {
			return err
		}
		top := tx.Bucket(historyBucket)
		if top == nil {
			return nil
		}
		return top.ForEachBucket(func(name []byte) error {
			current := 0
			if rec := tx.Bucket(bucket).Get(name); rec != nil {
				if h, err := decodeHead(tx, string(name), rec); err == nil {
					current = h.Generation
				}
			}
			return pruneHistory(top.Bucket(name), [][]byte{historyBucket, name}, r, current, now, nil, nil)
		})
	}
	return b.updateHistory(write)
}

// DecodeRetention reads a stored retention; nothing stored is the default.
func DecodeRetention(v []byte) (history.Retention, error) {
	var r history.Retention
	if len(v) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return r, fmt.Errorf("history retention: %w", err)
	}
	return r, r.Validate()
}

// DecodeHistoryHead reads an entry's head as a store keeps it, checked.
func DecodeHistoryHead(infra string, v []byte) (history.Entry, error) {
	var e history.Entry
	if err := json.Unmarshal(v, &e); err != nil {
		return e, fmt.Errorf("history of %s: damaged entry: %w", infra, err)
	}
	if e.Infra != infra {
		return e, fmt.Errorf("history of %s: an entry of %q: %w", infra, e.Infra, history.ErrInvalid)
	}
	return e, e.Validate()
}

// A history entry's spec is kept as it was stored, compressed once it is
// large (most of a large spec's bytes repeat):
//
//	0x00, the spec
//	0x01, uvarint length, zstd frame of the spec
//	0x02, uvarint length, xxhash64 of the spec (8 bytes big-endian), then
//	      each of its chunks as the record keeps it (see specchunks.go):
//	      uvarint length, the chunk
//
// The last is the local store's for the spec of a record written with
// its entry: its chunks are compressed once, for both, and most of them
// were for the record's last write.
const (
	specPlain      = 0x00
	specCompressed = 0x01
	specChunked    = 0x02
	// compressSpecAbove is the spec size from which it is compressed.
	compressSpecAbove = 4 << 10
)

// EncodeHistorySpec makes the value a history entry's spec is kept as.
func EncodeHistorySpec(spec []byte) []byte {
	if len(spec) <= compressSpecAbove {
		return append([]byte{specPlain}, spec...)
	}
	v := binary.AppendUvarint([]byte{specCompressed}, uint64(len(spec)))
	return recordEncoder().EncodeAll(spec, v)
}

// encodeChunkedHistorySpec is the value of a history entry's spec of size
// bytes, cut by w.
func encodeChunkedHistorySpec(w *specWrite, size int) []byte {
	n := 1 + 2*binary.MaxVarintLen64 + 8
	for i := range w.chunks {
		n += binary.MaxVarintLen64 + len(w.stored(i))
	}
	v := append(make([]byte, 0, n), specChunked)
	v = binary.AppendUvarint(v, uint64(size))
	v = binary.BigEndian.AppendUint64(v, w.sum)
	for i := range w.chunks {
		c := w.stored(i)
		v = binary.AppendUvarint(v, uint64(len(c)))
		v = append(v, c...)
	}
	return v
}

// DecodeHistorySpec reads what EncodeHistorySpec made, allocating no more
// than the value says it holds, and at most MaxValuePayload.
func DecodeHistorySpec(v []byte) ([]byte, error) {
	if len(v) == 0 {
		return nil, errors.New("history spec: damaged: empty")
	}
	switch v[0] {
	case specPlain:
		return append([]byte(nil), v[1:]...), nil
	case specCompressed:
		size, n := binary.Uvarint(v[1:])
		if n <= 0 || size > MaxValuePayload {
			return nil, errors.New("history spec: damaged: no length, or above what a spec may hold")
		}
		out, err := recordDecoder().DecodeAll(v[1+n:], make([]byte, 0, size))
		if err != nil || uint64(len(out)) != size {
			return nil, fmt.Errorf("history spec: damaged: %d bytes of the %d it says (%v)", len(out), size, err)
		}
		return out, nil
	case specChunked:
		return decodeChunkedHistorySpec(v[1:])
	}
	return nil, fmt.Errorf("history spec: form %d, which this build of vnet does not read: written by a newer vnet?", v[0])
}

// decodeChunkedHistorySpec reads the chunked form, after its form byte.
func decodeChunkedHistorySpec(v []byte) ([]byte, error) {
	size, n := binary.Uvarint(v)
	if n <= 0 || size > MaxValuePayload || len(v)-n < 8 {
		return nil, errors.New("history spec: damaged: no length, or above what a spec may hold")
	}
	sum := binary.BigEndian.Uint64(v[n:])
	out := make([]byte, 0, size)
	for rest := v[n+8:]; len(rest) > 0; {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l == 0 || l > uint64(len(rest)-n) {
			return nil, errors.New("history spec: damaged: a chunk runs past the value")
		}
		var err error
		if out, err = appendChunk(out, rest[n:n+int(l)]); err != nil || uint64(len(out)) > size {
			return nil, fmt.Errorf("history spec: damaged: a chunk does not read, or makes more than the %d bytes it says (%v)", size, err)
		}
		rest = rest[n+int(l):]
	}
	if uint64(len(out)) != size || xxhash.Sum64(out) != sum {
		return nil, errors.New("history spec: damaged: its chunks do not make the spec written")
	}
	return out, nil
}
