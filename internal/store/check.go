package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// verify opens a file read-only and reads it all: every page a record
// lives on, bbolt's own consistency check, every record's JSON and every
// chunk of realized resources. It returns the store's ID ("" for a store
// made before stores had one) and the records' names. Recovery, and a
// writer before it copies the file whole to its good copy, check so.
func verify(path string) (id string, names []string, err error) {
	return verifyWith(path, checkTx)
}

// verifyOpening is the check of every open (OpenBolt): verify but for the
// chunks of realized resources, which are as many as the containers and
// VMs and most of the file. A chunk is checked when it is read instead
// (getRealized: one that does not decode is damage), so what a command
// uses is checked all the same, and an open costs the same whatever the
// size of what was realized. Each record the check decoded whole (a large
// one's) is handed to decoded with its stored bytes, so that the open's
// first read of it need not decode it again.
func verifyOpening(path string, decoded func(name string, v []byte, r *Record)) (id string, names []string, err error) {
	return verifyWith(path, func(tx *bolt.Tx, path string) ([]string, error) { return checkStructure(tx, path, decoded) })
}

func verifyWith(path string, check func(*bolt.Tx, string) ([]string, error)) (id string, names []string, err error) {
	db, err := openFile(path, true)
	if err != nil {
		return "", nil, err
	}
	defer db.Close()
	err = guard(func() error {
		return db.View(func(tx *bolt.Tx) (err error) {
			names, err = check(tx, path)
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
	names, err := checkStructure(tx, path, nil)
	if err != nil {
		return nil, err
	}
	if err := checkRealized(tx); err != nil {
		return nil, err
	}
	return names, nil
}

// checkStructure reads the file's pages and records, but not what their
// chunks of realized resources say: bbolt's consistency check (which
// visits every page, those of the chunks too), the length of the file,
// each record and the form of each chunk of its spec. A record it decodes
// goes to decoded (nil: nowhere). Run it under guard.
func checkStructure(tx *bolt.Tx, path string, decoded func(name string, v []byte, r *Record)) ([]string, error) {
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
			r, err := decodeRecord(tx, string(k), v)
			if err != nil {
				return err
			}
			if decoded != nil {
				decoded(string(k), v, r)
			}
		} else if !json.Valid(v) {
			_, err := decodeRecord(tx, string(k), v)
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
	if err := checkSpecChunks(tx); err != nil {
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
