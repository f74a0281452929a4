package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// DefaultDir is where vnet keeps its state unless told otherwise.
const DefaultDir = "/var/lib/vnet"

// Files in the state directory.
const (
	dbFile   = "state.db"      // the store
	goodFile = "state.db.good" // a copy of the store as of its last good write
	idFile   = "store.id"      // the store's ID, kept apart so a rebuilt store keeps it
	lockDir  = "locks"         // one lock file per infrastructure
)

var (
	bucket     = []byte("infras")
	metaBucket = []byte("meta")
	idKey      = []byte("id")
)

// fileLockWait is how long an operation waits for bbolt's file lock, which
// others hold only for one short transaction. A variable so that a test
// need not wait as long.
var fileLockWait = 10 * time.Second

// DefaultLockWait is how long Lock waits for another command to finish with
// an infrastructure before it gives up.
const DefaultLockWait = 3 * time.Second

// Bolt is the embedded default store: one bbolt file under the state dir.
// The file is opened for each operation and closed after it, read-only for
// reads, so that a long command on one infrastructure never keeps others
// from reading or writing theirs; Lock serializes the commands that change
// one infrastructure. After each write, a checked copy of the file is kept
// as state.db.good, which `vnet recover` restores when the file is damaged.
type Bolt struct {
	dir, path string
	id        string
	// LockWait is how long Lock waits for another command; 0 does not wait.
	LockWait time.Duration

	mu   sync.Mutex
	held map[string]*heldLock
	// written is, per infrastructure, what this value last wrote of its
	// realized resources, so that the next write rewrites only what
	// changed (see putRealized).
	written map[string]*chunkCache
	// writtenGood is the same of the good copy, when this value's
	// writes were mirrored there (see update).
	writtenGood map[string]*chunkCache
	wmu         sync.Mutex // of written and writtenGood, held across a write

	// heads is, per infrastructure, the head of its record (see Head) as
	// this value last read or wrote it, with a hash of its stored bytes:
	// a read that finds the same bytes need not decode them again, which
	// for a spec of thousands of networks costs more than a change does.
	heads map[string]cachedHead
	hmu   sync.Mutex // of heads
}

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
}

// OpenBolt opens dir/state.db, creating it (and the store's ID) if the
// directory has none. A file that cannot be read as a store is an error
// wrapping ErrCorrupt that names the file and the way back, never a panic
// and never an empty store.
func OpenBolt(dir string) (*Bolt, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	b := &Bolt{dir: abs, path: filepath.Join(abs, dbFile), LockWait: DefaultLockWait, held: map[string]*heldLock{}}
	if _, err := os.Stat(b.path); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(b.goodPath()); err == nil {
			return nil, b.corrupt(errors.New("the file is missing"))
		}
		if err := createDB(b.dir, b.path, readIDFile(b.dir)); err != nil {
			return nil, err
		}
	}
	id, _, err := verify(b.path)
	if err != nil {
		return nil, b.corrupt(err)
	}
	if id == "" { // made by a vnet that did not name its stores
		if id, err = b.assignID(); err != nil {
			return nil, err
		}
	}
	b.id = id
	if readIDFile(b.dir) != id {
		if err := writeFileAtomic(filepath.Join(b.dir, idFile), []byte(id+"\n")); err != nil {
			return nil, fmt.Errorf("state dir: %w", err)
		}
	}
	register(id, b.dir)
	return b, nil
}

// ID is the store's random ID, made when the store was.
func (b *Bolt) ID() string { return b.id }

// Location is the state directory.
func (b *Bolt) Location() string { return b.dir }

func (b *Bolt) goodPath() string { return filepath.Join(b.dir, goodFile) }

// Get returns the record of an infrastructure.
func (b *Bolt) Get(name string) (*Record, error) {
	var r *Record
	err := b.view(func(tx *bolt.Tx) error {
		var err error
		r, err = getRecord(tx, name)
		return err
	})
	return r, err
}

// getRecord reads a record with its realized resources, wherever they are
// kept: in their chunks, or in the record as written before chunks.
func getRecord(tx *bolt.Tx, name string) (*Record, error) {
	v := tx.Bucket(bucket).Get([]byte(name))
	if v == nil {
		return nil, fmt.Errorf("%q: %w", name, ErrNotFound)
	}
	r, err := decodeRecord(name, v)
	if err != nil || r.Realized != nil {
		return r, err
	}
	r.Realized, err = getRealized(tx, name)
	return r, err
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
		if r, err = decodeHead(name, v); err == nil {
			b.keepHead(name, len(v), sum, r)
		}
		return err
	})
	return r, err
}

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

// List returns every record, by name.
func (b *Bolt) List() ([]*Record, error) {
	var out []*Record
	err := b.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, _ []byte) error {
			r, err := getRecord(tx, string(k))
			if err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// Names returns the names of the infrastructures the store records, by
// name, without reading their records.
func (b *Bolt) Names() ([]string, error) {
	var out []string
	err := b.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	return out, err
}

// Close releases the locks this value still holds.
func (b *Bolt) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, h := range b.held {
		h.release()
		delete(b.held, name)
	}
	return nil
}

// decodeHead decodes a record but what was realized.
func decodeHead(name string, v []byte) (*Record, error) {
	if IsCompressedValue(v) {
		return decodeRecord(name, v) // written without what was realized
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

func decodeRecord(name string, v []byte) (*Record, error) {
	r, err := DecodeValue(v)
	if err != nil {
		return nil, &damage{fmt.Errorf("record %q: %w", name, err)}
	}
	return r, nil
}

// view runs fn in a read transaction on a read-only open of the file,
// which shares the file with other readers.
func (b *Bolt) view(fn func(*bolt.Tx) error) error {
	db, err := b.open(true)
	if err != nil {
		return err
	}
	defer db.Close()
	return b.classify(guard(func() error { return db.View(fn) }))
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
func (b *Bolt) mirrorGood(txid uint64, fn func(*bolt.Tx) error) error {
	if info, err := os.Stat(b.goodPath()); err != nil || info.Size() == 0 {
		return errNotMirror // bbolt would make an empty file a new store
	}
	return guard(func() error {
		db, err := bolt.Open(b.goodPath(), 0o600, &bolt.Options{Timeout: fileLockWait, PreLoadFreelist: true})
		if err != nil {
			return err
		}
		defer db.Close()
		return db.Update(func(tx *bolt.Tx) error {
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
	})
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
	tmp := b.goodPath() + ".tmp"
	var txid uint64
	err := guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			if _, err := checkTx(tx, b.path); err != nil {
				return err
			}
			txid = uint64(tx.ID())
			return writeWith(tmp, func(f *os.File) error { _, err := tx.WriteTo(f); return err })
		})
	})
	if err == nil {
		err = noteMirror(tmp, txid)
	}
	if err != nil {
		os.Remove(tmp)
		return b.classify(err)
	}
	// The copy was synced before the rename, so whichever name the
	// directory holds after a power cut is a whole copy: this one or the
	// one before it. Syncing the directory too would only decide which.
	if err := os.Rename(tmp, b.goodPath()); err != nil {
		return fmt.Errorf("keep a good copy of %s: %w", b.path, err)
	}
	return nil
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

// open opens the file, read-only or for writing. bbolt itself would make
// an empty store of an empty file; here an empty file is damage.
func (b *Bolt) open(readOnly bool) (*bolt.DB, error) {
	db, err := openFile(b.path, readOnly)
	if err != nil {
		return nil, b.classify(err)
	}
	return db, nil
}

func openFile(path string, readOnly bool) (*bolt.DB, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &damage{errors.New("the file is missing")}
	}
	if err != nil {
		return nil, err
	}
	if info.Size() == 0 {
		return nil, &damage{errors.New("the file is empty")}
	}
	var db *bolt.DB
	err = guard(func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: readOnly, Timeout: fileLockWait, PreLoadFreelist: true})
		return err
	})
	switch {
	case errors.Is(err, bolt.ErrTimeout):
		return nil, lockedError(fmt.Sprintf("state store %s stayed locked for %s: another vnet process holds it", path, fileLockWait))
	case err == nil:
		return db, nil
	}
	var pe *fs.PathError
	var errno syscall.Errno
	if errors.As(err, &pe) || errors.As(err, &errno) {
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	return nil, &damage{err} // bbolt's invalid database, checksum error, file size too small, a panic
}

// verify opens a file read-only and reads it all: every page a record
// lives on, bbolt's own consistency check, and every record's JSON. It
// returns the store's ID ("" for a store made before stores had one) and
// the records' names.
func verify(path string) (id string, names []string, err error) {
	db, err := openFile(path, true)
	if err != nil {
		return "", nil, err
	}
	defer db.Close()
	err = guard(func() error {
		return db.View(func(tx *bolt.Tx) (err error) {
			names, err = checkTx(tx, path)
			if mb := tx.Bucket(metaBucket); mb != nil {
				id = string(mb.Get(idKey))
			}
			return err
		})
	})
	return id, names, err
}

// checkTx reads everything the transaction sees. Run it under guard:
// bbolt panics on some damaged pages.
func checkTx(tx *bolt.Tx, path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if tx.Size() > info.Size() {
		return nil, &damage{fmt.Errorf("the file is %d bytes, its pages reach %d: truncated", info.Size(), tx.Size())}
	}
	b := tx.Bucket(bucket)
	if b == nil {
		return nil, &damage{errors.New("not a vnet state store: no infrastructures bucket")}
	}
	var names []string
	if err := b.ForEach(func(k, v []byte) error {
		// Damage shows as a compressed record whose checksum fails, or
		// JSON that no longer parses; checking the syntax costs a fifth
		// of decoding a large record.
		if IsCompressedValue(v) {
			if _, err := decodeRecord(string(k), v); err != nil {
				return err
			}
		} else if !json.Valid(v) {
			_, err := decodeRecord(string(k), v)
			if err == nil {
				err = &damage{fmt.Errorf("record %q: not JSON", k)}
			}
			return err
		}
		names = append(names, string(k))
		return nil
	}); err != nil {
		return nil, err
	}
	if err := checkRealized(tx); err != nil {
		return nil, err
	}
	var problems []string
	for err := range tx.Check() {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		if len(problems) > 3 {
			problems = append(problems[:3], fmt.Sprintf("and %d more", len(problems)-3))
		}
		return nil, &damage{errors.New(strings.Join(problems, "; "))}
	}
	return names, nil
}

// damage is what makes a file unreadable as a store.
type damage struct{ err error }

func (d *damage) Error() string { return d.err.Error() }
func (d *damage) Unwrap() error { return d.err }

// guard runs fn and turns a panic into a damage error: bbolt panics on
// some damaged pages ("invalid freelist page"), and a page past the end of
// a truncated file faults, which SetPanicOnFault makes a panic too.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &damage{fmt.Errorf("%v", r)}
		}
	}()
	return fn()
}

func (b *Bolt) classify(err error) error {
	var d *damage
	if errors.As(err, &d) {
		return b.corrupt(d.err)
	}
	return err
}

func (b *Bolt) corrupt(cause error) error {
	var d *damage
	if errors.As(cause, &d) {
		cause = d.err
	}
	_, good := os.Stat(b.goodPath())
	return &CorruptError{Path: b.path, Cause: cause, GoodCopy: good == nil, Dir: b.dir}
}

// CorruptError says that the state file cannot be read as a store, why,
// and how to get back.
type CorruptError struct {
	Path     string
	Cause    error
	GoodCopy bool   // a copy from the last good write exists
	Dir      string // the state directory
}

func (e *CorruptError) Error() string {
	cmd := "vnet recover"
	if e.Dir != DefaultDir {
		cmd = "vnet --state-dir " + e.Dir + " recover"
	}
	what := "start an empty store that finds this store's infrastructures on the host by their marks"
	if e.GoodCopy {
		what = "restore the copy kept at the last good write (" + goodFile + ")"
	}
	return fmt.Sprintf("state store %s is damaged (%v): run `%s` to %s", e.Path, e.Cause, cmd, what)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Cause} }

// assignID gives a store made before stores had IDs one.
func (b *Bolt) assignID() (string, error) {
	id := readIDFile(b.dir)
	if id == "" {
		id = NewID()
	}
	err := b.update(func(tx *bolt.Tx) error {
		mb, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if v := mb.Get(idKey); v != nil {
			id = string(v) // another command named it first
			return nil
		}
		return mb.Put(idKey, []byte(id))
	}, nil, nil, nil)
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
	return syncDir(dir)
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

// writeWith writes a file through fn and syncs it.
func writeWith(path string, fn func(*os.File) error) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = fn(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeFileAtomic replaces a file with data so that a reader sees the old
// or the new, never a part.
func writeFileAtomic(path string, data []byte) error {
	tmp := tempName(path, "tmp")
	if err := writeWith(tmp, func(f *os.File) error { _, err := f.Write(data); return err }); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// tempName is a scratch name beside path, unique to this call: two
// goroutines of one process (the API server's) may write the same file at
// once, and a name by pid alone had one remove the other's.
func tempName(path, tag string) string {
	return fmt.Sprintf("%s.%s-%d-%s", path, tag, os.Getpid(), NewID()[:8])
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// IDAt returns the ID of the store in dir ("" when dir holds none): a
// mark naming a store that is gone makes its namespaces orphans.
func IDAt(dir string) string { return readIDFile(dir) }
