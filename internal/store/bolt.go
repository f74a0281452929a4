package store

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

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
// others hold only for one short transaction.
const fileLockWait = 10 * time.Second

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
	wmu     sync.Mutex // of written, held across a write
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
func (b *Bolt) Head(name string) (*Record, error) { return b.read(name, decodeHead) }

// read decodes an infrastructure's record with decode.
func (b *Bolt) read(name string, decode func(string, []byte) (*Record, error)) (*Record, error) {
	var r *Record
	err := b.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get([]byte(name))
		if v == nil {
			return fmt.Errorf("%q: %w", name, ErrNotFound)
		}
		var err error
		r, err = decode(name, v)
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
	v, err := json.Marshal(&head)
	if err != nil {
		return err
	}
	b.wmu.Lock()
	defer b.wmu.Unlock()
	var wrote *chunkCache
	err = b.update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucket).Put([]byte(r.Name), v); err != nil {
			return err
		}
		var err error
		wrote, err = putRealized(tx, r.Name, r.Realized, b.written[r.Name])
		return err
	}, func() {
		if b.written == nil {
			b.written = map[string]*chunkCache{}
		}
		b.written[r.Name] = wrote
	})
	if wrote == nil {
		delete(b.written, r.Name)
	}
	return err
}

// Delete removes a record; removing a missing one is not an error.
func (b *Bolt) Delete(name string) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	delete(b.written, name)
	return b.update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucket).Delete([]byte(name)); err != nil {
			return err
		}
		return deleteRealized(tx, name)
	}, nil)
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
	r := &Record{}
	if err := json.Unmarshal(v, r); err != nil {
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
// then keeps a checked copy of the file as it now is.
func (b *Bolt) update(fn func(*bolt.Tx) error, committed func()) error {
	db, err := b.open(false)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := b.classify(guard(func() error { return db.Update(fn) })); err != nil {
		return err
	}
	if committed != nil {
		committed()
	}
	return b.keepGood(db)
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
// state.db.good. A check that fails leaves the previous copy in place.
func (b *Bolt) keepGood(db *bolt.DB) error {
	tmp := b.goodPath() + ".tmp"
	err := guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			if _, err := checkTx(tx, b.path); err != nil {
				return err
			}
			return writeWith(tmp, func(f *os.File) error { _, err := tx.WriteTo(f); return err })
		})
	})
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
		return nil, fmt.Errorf("state store %s stayed locked for %s: another vnet process holds it", path, fileLockWait)
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
		// Damage shows as JSON that no longer parses; checking the
		// syntax costs a fifth of decoding a large record.
		if !json.Valid(v) {
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
	}, nil)
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
