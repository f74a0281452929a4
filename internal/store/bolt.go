package store

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/vnet-project/vnet/internal/atomicfile"
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
	// Trace receives where each record's write spends its time (see
	// writeLaps); nil: nowhere. Set it before the value is shared.
	Trace io.Writer

	mu   sync.Mutex
	held map[string]*heldLock
	// written is, per infrastructure, what this value last wrote of its
	// realized resources, so that the next write rewrites only what
	// changed (see putRealized).
	written map[string]*chunkCache
	// writtenGood is the same of the good copy, when this value's
	// writes were mirrored there (see update).
	writtenGood map[string]*chunkCache
	// specStored is, per infrastructure, the stored form of each chunk of
	// the spec this value wrote last, by key: the next write compresses
	// only the chunks that are new (see specWrite.reuse).
	specStored map[string]map[string][]byte
	wmu        sync.Mutex // of written, writtenGood and specStored, held across a write

	// heads is, per infrastructure, the head of its record (see Head) as
	// this value last read or wrote it, with a hash of its stored bytes:
	// a read that finds the same bytes need not decode them again, which
	// for a spec of thousands of networks costs more than a change does.
	heads map[string]cachedHead
	// nsJSON is, per infrastructure, the JSON of its namespaces' IDs as
	// this value last wrote them (see namespacesJSON).
	nsJSON map[string]*namespacesJSON
	hmu    sync.Mutex // of heads and nsJSON

	// hashed is, per infrastructure, the realized resources this value
	// last wrote, with the hash of each (see hashResourcesAfter).
	hashed map[string]*hashedResources
	rmu    sync.Mutex // of hashed
}

// Exists says whether dir holds a store, without making one as OpenBolt
// would.
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, dbFile))
	return err == nil
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
	id, names, err := verifyOpening(b.path, func(name string, v []byte, r *Record) {
		b.keepHead(name, len(v), maphash.Bytes(headSeed, v), r)
	})
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
		if err := atomicfile.Write(filepath.Join(b.dir, idFile), []byte(id+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("state dir: %w", err)
		}
	}
	if len(names) > 0 || b.pendingAny() { // the check read the names already
		register(id, b.dir)
	}
	return b, nil
}

// holdsAny reports whether the store records an infrastructure or an apply
// begun: whether the kernel may hold objects marked as its own. Only such a
// store is in the registry, so that one made and emptied (a test's, a
// trial's) leaves nothing behind in /run. An unreadable store counts as
// holding some.
func (b *Bolt) holdsAny() bool {
	if b.pendingAny() {
		return true
	}
	names, err := b.Names()
	return err != nil || len(names) > 0
}

// pendingAny reports whether an apply began and did not finish.
func (b *Bolt) pendingAny() bool {
	pending, _ := os.ReadDir(filepath.Join(b.dir, pendingDir))
	return len(pending) > 0
}

// ID is the store's random ID, made when the store was.
func (b *Bolt) ID() string { return b.id }

// Location is the state directory.
func (b *Bolt) Location() string { return b.dir }

// File is the store's file in the state directory: a value kept across
// operations is one of this file only while the path names the same file
// (os.SameFile); a recovery puts another in its place.
func (b *Bolt) File() string { return b.path }

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
	r, err := decodeRecord(tx, name, v)
	if err != nil || r.Realized != nil {
		return r, err
	}
	r.Realized, err = getRealized(tx, name)
	return r, err
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

// decodeRecord reads a record's stored value, and its spec from its
// chunks when it is kept in chunks.
func decodeRecord(tx *bolt.Tx, name string, v []byte) (*Record, error) {
	r, manifest, err := decodeStored(v)
	if err != nil {
		return nil, &damage{fmt.Errorf("record %q: %w", name, err)}
	}
	if manifest != nil {
		if r.Spec, err = readSpec(tx, name, manifest); err != nil {
			return nil, err
		}
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
