package store

import (
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"slices"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/plan"
)

// Put stores a record, replacing any with the same name: the record and
// its realized resources, of which it writes only the chunks that changed
// since this value's last write. It reaches state.db and its good copy
// both, or neither: a write the copy cannot take is taken back from the
// file (see update), so that after an error the store holds the record it
// held before, unless the error wraps ErrWriteKept (the file holds the new
// record) or ErrWriteUnknown.
func (b *Bolt) Put(r *Record) error { return b.put(r, nil) }

// PutWithHistory is Put that keeps e, the history entry of the change
// (see AppendHistory), in the same transaction as the record, in state.db
// and in its good copy: one commit on each file for the change, and a
// record never stands without its entry, nor an entry without its record,
// whatever kills the process. A write taken back takes both back. It
// returns e as kept. An entry no history should hold does not keep the
// change from standing: the record is written alone, and the error wraps
// ErrHistoryNotKept.
func (b *Bolt) PutWithHistory(r *Record, e history.Entry) (history.Entry, error) {
	a, err := newEntryWrite(e)
	if err != nil {
		if perr := b.put(r, nil); perr != nil {
			return e, perr
		}
		return e, fmt.Errorf("%w: %w", ErrHistoryNotKept, err)
	}
	err = b.put(r, a)
	return a.e, err
}

// put is Put, keeping entry (nil: none) in the same transaction.
func (b *Bolt) put(r *Record, entry *entryWrite) error {
	laps := b.laps()
	head := *r
	head.Realized = nil
	// A large spec goes in chunks, of which a write puts only those the
	// store lacks (see specchunks.go).
	spec := newSpecWrite(r.Spec)
	laps.lap("spec cut into chunks")
	var v []byte
	var err error
	if spec == nil {
		v, err = EncodeValue(&head)
		laps.lap("value encoded (%d bytes)", len(v))
	} else {
		v, err = encodeChunkedValue(&head, spec.manifest, b.namespacesOf(r.Name), laps)
	}
	if err != nil {
		return err
	}
	// Where each resource goes is worked out once, for the file and its
	// good copy both.
	split := splitChunks(b.hashRealized(r.Name, r.Realized))
	laps.lap("resources hashed (%d)", len(r.Realized))
	register(b.id, b.dir)
	b.wmu.Lock()
	defer b.wmu.Unlock()
	laps.lap("waited for this process's other writes")
	b.reuseSpecChunks(r.Name, spec)
	if entry != nil {
		entry.specOf(spec, r.Spec)
	}
	put := func(file string, cache *chunkCache, wrote **chunkCache, u *undoLog) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			if err := u.put(tx.Bucket(bucket), [][]byte{bucket}, []byte(r.Name), v); err != nil {
				return err
			}
			if err := spec.put(tx, r.Name, u); err != nil {
				return err
			}
			var err error
			if *wrote, err = putRealized(tx, r.Name, r.Realized, split, cache, u); err != nil {
				return err
			}
			laps.lap("%s: value, spec's and resources' chunks put", file)
			if entry == nil {
				return nil
			}
			err = entry.write(tx, u)
			laps.lap("%s: history entry put", file)
			return err
		}
	}
	var wrote, wroteGood *chunkCache
	kept, err := b.update(fileWrite{
		file:     func(tx *bolt.Tx, u *undoLog) error { return put("state.db", b.written[r.Name], &wrote, u)(tx) },
		mirror:   put("good copy", b.writtenGood[r.Name], &wroteGood, nil),
		takeBack: true,
		laps:     laps,
	})
	laps.lap("files closed, writer's lock released")
	defer laps.lap("caches kept")
	switch {
	case err == nil:
		b.written = keepChunks(b.written, r.Name, wrote)
		b.goodWritten(kept)
		if kept == goodMirrored {
			b.writtenGood = keepChunks(b.writtenGood, r.Name, wroteGood)
		}
		if h, ok := storedHead(r); ok {
			// The next apply reads what this one wrote.
			b.keepHead(r.Name, len(v), maphash.Bytes(headSeed, v), h)
		}
	case errors.Is(err, ErrWriteKept):
		b.written = keepChunks(b.written, r.Name, wrote)
		b.writtenGood = nil
		b.forgetHead(r.Name)
	case errors.Is(err, ErrWriteUnknown):
		delete(b.written, r.Name)
		b.writtenGood = nil
		b.forgetHead(r.Name)
	}
	// Otherwise neither file has the write: both hold the chunks they
	// held, which the caches still describe.
	b.keepSpecChunks(r.Name, spec)
	return err
}

// reuseSpecChunks has w take the stored forms of the chunks of infra's
// spec this value made last (see specWrite.reuse). The caller holds wmu.
func (b *Bolt) reuseSpecChunks(infra string, w *specWrite) {
	if w != nil {
		w.reuse(b.specStored[infra])
	}
}

// keepSpecChunks keeps the stored forms of the chunks of infra's spec
// that w made or took (nil: none), for the next write. The caller holds
// wmu.
func (b *Bolt) keepSpecChunks(infra string, w *specWrite) {
	if w == nil {
		delete(b.specStored, infra)
		return
	}
	if b.specStored == nil {
		b.specStored = map[string]map[string][]byte{}
	}
	b.specStored[infra] = w.storedByKey()
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

// Delete removes a record; removing a missing one is not an error. It is
// made after what the record names is gone, so a deletion that reaches
// state.db stays there: a good copy that cannot take it is removed, since
// it would name what is no longer there, and the next write makes a new
// one. After an error wrapping ErrWriteKept, the file no longer holds the
// record but the copy still does.
func (b *Bolt) Delete(name string) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	delete(b.written, name)
	delete(b.writtenGood, name)
	delete(b.specStored, name)
	b.forgetHead(name)
	del := func(tx *bolt.Tx, u *undoLog) error {
		if err := u.delete(tx.Bucket(bucket), [][]byte{bucket}, []byte(name)); err != nil {
			return err
		}
		if err := deleteSpecChunks(tx, name, u); err != nil {
			return err
		}
		return deleteRealized(tx, name, u)
	}
	kept, err := b.update(fileWrite{file: del, mirror: func(tx *bolt.Tx) error { return del(tx, nil) }})
	b.goodWritten(kept)
	if err == nil && !b.holdsAny() {
		Forget(b.id) // nothing of the store's is left to find it by
	}
	return err
}

// fileWrite is a write to the store: to state.db, and the same to its
// good copy.
type fileWrite struct {
	// file makes the write in a transaction of state.db, noting in u (nil
	// unless takeBack) what it replaces.
	file func(tx *bolt.Tx, u *undoLog) error
	// mirror makes the same write in a transaction of the good copy.
	mirror func(tx *bolt.Tx) error
	// takeBack says that a write the good copy cannot take is taken back
	// from state.db, so that it reaches neither (a record's put, which its
	// caller then undoes on the host too); otherwise state.db keeps it and
	// the copy, which would name what is no longer there, is removed (a
	// record's deletion, made once what it records is gone).
	takeBack bool
	// laps times the write's parts (nil: not traced).
	laps *writeLaps
}

// update makes a write in state.db and then brings the good copy to the
// file as it now is: by the same write, on the copy, when the copy is the
// file as it was before this write (see mirrorGood), else by copying the
// whole file once it checks out (keepGood). It returns how the copy got
// the write, for the chunk caches.
//
// The write reaches both files or neither. Each file's write is whole or
// not at all (a bbolt transaction, or a copy renamed into place), so the
// one case to mend is a write that reached state.db and not the copy (no
// space for the copy, an I/O error, a read-only file system): the values
// it replaced are written back to state.db (see undoLog) when w.takeBack,
// and the copy is removed otherwise. A handle on which a commit failed is
// not trusted to show the file as it is (a write that failed may have
// reached the pages it maps, or its free pages): the file is opened anew
// and asked which transaction it holds. When taking back fails too, the
// error wraps ErrWriteKept (state.db holds the write, and the copy, which
// does not, is removed where it can be), or ErrWriteUnknown when the file
// cannot say what it holds.
//
// The copy is never made of the file's bytes unchecked: a mirrored write
// is made of the caller's values, so damage to the file cannot reach the
// copy, and a whole copy is checked first. The writer's lock (see
// lockWriter) is held throughout, so the writes of other processes reach
// the copy in the order they reached the file, and none comes between a
// write and its taking back.
func (b *Bolt) update(w fileWrite) (goodWrite, error) {
	unlock, err := b.lockWriter()
	if err != nil {
		return goodFailed, err
	}
	defer unlock()
	w.laps.lap("writer's lock taken")
	db, err := b.open(false)
	if err != nil {
		return goodFailed, err
	}
	defer func() { db.Close() }()
	w.laps.lap("state.db: opened")
	var log *undoLog
	release := func() {}
	defer func() { release() }()
	if w.takeBack {
		log = &undoLog{}
	}
	txid, err := b.commit(db, func(tx *bolt.Tx) error {
		if err := w.file(tx, log); err != nil || log == nil {
			return err
		}
		// Before the write takes space, the space to take it back.
		var err error
		release, err = b.reserve(log.size())
		w.laps.lap("state.db: space set aside to take it back (%d KiB)", log.size()>>10)
		return err
	})
	if err == nil {
		w.laps.committed("state.db", db)
	}
	if err != nil {
		var at uint64
		db, at = b.reopen(db)
		switch {
		case at == 0:
			return goodFailed, fmt.Errorf("%w (%w)", err, ErrWriteUnknown)
		case at < txid:
			return goodFailed, err // the file does not hold it
		}
		// The write is in the file after all.
	}
	kept, gerr := b.toGood(db, txid, w.mirror, w.laps)
	if gerr == nil {
		return kept, nil
	}
	if b.goodAsOf() == txid {
		return goodFailed, nil // the copy has it after all; what it holds is not known
	}
	if !w.takeBack {
		if rerr := b.removeGood(); rerr != nil {
			return goodFailed, fmt.Errorf("%w; removing it failed too (%v), so it still holds what %s no longer does: %w", gerr, rerr, b.path, ErrWriteKept)
		}
		return goodFailed, nil // the next write makes a new copy
	}
	release()
	undoID, uerr := b.commit(db, log.apply)
	if uerr != nil {
		var at uint64
		db, at = b.reopen(db)
		switch {
		case at == 0:
			return goodFailed, fmt.Errorf("%w; taking the write back from %s failed too (%v): %w", gerr, b.path, uerr, ErrWriteUnknown)
		case at < undoID:
			what := "was removed"
			if rerr := b.removeGood(); rerr != nil {
				what = fmt.Sprintf("could not be removed (%v)", rerr)
			}
			return goodFailed, fmt.Errorf("%w; taking the write back from %s failed too (%v), so it holds the write, and its good copy, which does not, %s: %w",
				gerr, b.path, uerr, what, ErrWriteKept)
		}
	}
	// Both hold what they held before the write; the copy is the file as
	// of the undo too, which spares the next write a whole copy.
	b.renoteGood(txid-1, undoID)
	return goodFailed, fmt.Errorf("%w; nothing was written (the write to %s was taken back)", gerr, b.path)
}

// reserve sets aside, in a file beside state.db, the space a write's
// taking back needs (see update), and returns what gives it back. A file
// system too full for it fails the write before it is made; one that
// cannot set space aside (no fallocate) gets no reserve.
func (b *Bolt) reserve(size int64) (release func(), err error) {
	path := b.path + ".reserve"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return func() {}, fmt.Errorf("set aside the space to take the write back: %w", err)
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	f.Close()
	release = func() { os.Remove(path) }
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return release, nil
	}
	if err != nil {
		release()
		return func() {}, fmt.Errorf("set aside the space to take the write back (%d KiB): %w", size>>10, err)
	}
	return release, nil
}

// reopen closes a handle on which a commit failed and opens the file
// anew, and returns the new handle (nil when the file did not open) and
// the transaction the file holds (0 when it cannot tell).
func (b *Bolt) reopen(db *bolt.DB) (*bolt.DB, uint64) {
	db.Close()
	fresh, err := b.open(false)
	if err != nil {
		return db, 0 // closed: closing it again does nothing
	}
	var at uint64
	if err := b.classify(guard(func() error {
		return fresh.View(func(tx *bolt.Tx) error {
			at = uint64(tx.ID())
			return nil
		})
	})); err != nil {
		return fresh, 0
	}
	return fresh, at
}

// lockWriter takes the writers' lock of the state directory, an flock on
// state.db.lock that every write holds from its first change of state.db
// to its last of the good copy. bbolt's own lock on state.db serves the
// same while the file stays open, but a write that failed reopens it.
func (b *Bolt) lockWriter() (func(), error) {
	f, err := os.OpenFile(b.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s for writing: %w", b.path, err)
	}
	deadline := time.Now().Add(fileLockWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("state store %s stayed locked for %s: another vnet process holds it", b.path, fileLockWait)
			}
			return nil, fmt.Errorf("lock %s for writing: %w", b.path, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// commit runs fn in a write transaction of db and returns the
// transaction's ID, whether or not it committed.
func (b *Bolt) commit(db *bolt.DB, fn func(*bolt.Tx) error) (uint64, error) {
	var txid uint64
	err := b.classify(guard(func() error {
		return db.Update(func(tx *bolt.Tx) error {
			txid = uint64(tx.ID())
			return fn(tx)
		})
	}))
	return txid, err
}

// toGood brings the good copy to the file as of transaction txid.
func (b *Bolt) toGood(db *bolt.DB, txid uint64, mirror func(*bolt.Tx) error, laps *writeLaps) (goodWrite, error) {
	if mirror != nil && b.mirrorGood(txid, mirror, laps) == nil {
		return goodMirrored, nil
	}
	err := b.keepGood(db)
	laps.lap("good copy: made anew of the whole file")
	if err != nil {
		return goodFailed, err
	}
	return goodCopied, nil
}

// hashRealized is the hash of each of infra's resources rs (see
// hashResourcesAfter), taken from this value's last write of infra where
// they are the same; rs and their hashes are kept for the next write.
func (b *Bolt) hashRealized(infra string, rs []plan.Resource) []uint64 {
	b.rmu.Lock()
	last := b.hashed[infra]
	b.rmu.Unlock()
	hs := hashResourcesAfter(last, rs)
	b.rmu.Lock()
	defer b.rmu.Unlock()
	if b.hashed == nil {
		b.hashed = map[string]*hashedResources{}
	}
	b.hashed[infra] = &hashedResources{rs: rs, hs: hs}
	return hs
}
