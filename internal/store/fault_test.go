package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/rundir/rundirtest"
	"github.com/vnet-project/vnet/internal/store/faultfs"
	bolt "go.etcd.io/bbolt"
)

func TestMain(m *testing.M) {
	faultfs.ServeIfChild()
	os.Exit(rundirtest.Run(m))
}

// faults are the ways a write fails that the tests try at every request.
var faults = []struct {
	name  string
	fault faultfs.Fault
}{
	{"no space", faultfs.Fault{Errno: syscall.ENOSPC}},
	{"I/O error", faultfs.Fault{Errno: syscall.EIO}},
	{"short write, then no space", faultfs.Fault{Errno: syscall.ENOSPC, Short: true}},
	{"read-only from then on", faultfs.Fault{Errno: syscall.EROFS, Persist: true}},
	{"I/O errors from then on", faultfs.Fault{Errno: syscall.EIO, Persist: true}},
}

// holding says what a store file holds of one record: its generation, or
// -1 for none; absent is a file that is not there.
type holding struct {
	gen    int
	absent bool
}

func (h holding) String() string {
	switch {
	case h.absent:
		return "no file"
	case h.gen < 0:
		return "no record"
	}
	return fmt.Sprintf("generation %d", h.gen)
}

// holds reads what the file at path holds of the record, checking the
// whole file first and that the record's resources are its generation's.
func (w *writeCheck) holds(path string) holding {
	t := w.t
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return holding{absent: true}
	}
	if _, _, err := verify(path); err != nil {
		t.Fatalf("%s does not check out: %v", path, err)
	}
	r := records(t, path)["a"]
	if r == nil {
		return holding{gen: -1}
	}
	if want := resources(w.size + w.grow*(r.Generation%2)); !slices.Equal(byKey(r.Realized), byKey(want)) {
		t.Fatalf("%s: generation %d holds the resources of another", path, r.Generation)
	}
	if !bytes.Equal(r.Spec, w.spec(r.Generation)) {
		t.Fatalf("%s: generation %d holds the spec of another", path, r.Generation)
	}
	if w.history {
		// One entry per generation, the last the record's: a record
		// never stands without its entry, nor an entry without its record.
		heads := historyHeads(t, path, "a")
		if len(heads) != min(r.Generation, history.DefaultMaxEntries) || heads[len(heads)-1].Generation != r.Generation || heads[len(heads)-1].Seq != r.Generation {
			t.Fatalf("%s: generation %d beside the history %v", path, r.Generation, heads)
		}
	}
	return holding{gen: r.Generation}
}

// writeCheck writes generation after generation of one record, and
// checks what each write that failed left.
type writeCheck struct {
	t          *testing.T
	path, good string
	put        func(gen int) error
	gen        int // what both files hold
	size, grow int // resources of an even generation, and how many more an odd one has
	// history: each write keeps its history entry in the record's write
	// (PutWithHistory).
	history  bool
	spec     func(gen int) []byte // the spec of each generation
	outcomes map[string]int
}

func newWriteCheck(t *testing.T, dir string, writer writer, size, grow int) *writeCheck {
	s := open(t, dir)
	w := &writeCheck{t: t, path: filepath.Join(dir, dbFile), good: filepath.Join(dir, goodFile), size: size, grow: grow,
		history: writer.history, outcomes: map[string]int{}}
	w.spec = func(g int) []byte { return []byte(fmt.Sprintf("name: a # %d", g)) }
	if writer.chunks {
		// A spec in chunks, of which each generation changes one or two.
		w.spec = func(g int) []byte { return vmsSpec(1000, g) }
	}
	withHistory := writer.history
	w.put = func(g int) error {
		st := s
		if writer.fresh {
			st = open(t, dir)
		}
		r := &Record{Name: "a", Spec: w.spec(g), Realized: resources(size + grow*(g%2)), Generation: g}
		if !withHistory {
			return st.Put(r)
		}
		_, err := st.PutWithHistory(r, history.Entry{Infra: "a", Generation: g, Verb: history.Apply, Who: "t", Via: history.CLI, Spec: history.Text(r.Spec)})
		return err
	}
	w.gen = 1
	if err := w.put(1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t.Logf("outcomes: %v", w.outcomes) })
	return w
}

// failed checks the files after a write of the next generation that met
// a failure (at), which returned err.
func (w *writeCheck) failed(at string, err error) {
	t := w.t
	t.Helper()
	if errors.Is(err, ErrWriteUnknown) {
		t.Fatalf("%s: the store cannot tell what it holds: %v", at, err)
	}
	file, copy := w.holds(w.path), w.holds(w.good)
	switch {
	case err == nil:
		w.outcomes["written"]++
		w.gen++
		if file.gen != w.gen || copy.gen != w.gen {
			t.Fatalf("%s, the write succeeded, yet the file holds %v, its copy %v", at, file, copy)
		}
	case errors.Is(err, ErrWriteKept):
		w.outcomes["kept in state.db"]++
		w.gen++
		if file.gen != w.gen || !copy.absent && copy.gen != w.gen-1 {
			t.Fatalf("%s: %v; the file holds %v, its copy %v", at, err, file, copy)
		}
	default:
		w.outcomes["not written"]++
		if file.gen != w.gen || copy.gen != w.gen {
			t.Fatalf("%s: %v; the file holds %v, its copy %v, not generation %d", at, err, file, copy, w.gen)
		}
	}
}

// next checks that the next write, with nothing failing, reaches both.
func (w *writeCheck) next(at string) {
	t := w.t
	t.Helper()
	w.gen++
	if err := w.put(w.gen); err != nil {
		t.Fatalf("after %s: %v", at, err)
	}
	if file, copy := w.holds(w.path), w.holds(w.good); file.gen != w.gen || copy.gen != w.gen {
		t.Fatalf("after %s, a write left the file at %v, its copy at %v", at, file, copy)
	}
}

// writers are the ways vnet writes: one process writing again and again
// (an agent, the API server), which knows what it wrote last, and a
// process per write (the CLI); a record alone, or with the history entry
// of its change in the same write; a small spec, or one kept in chunks.
var writers = []writer{
	{"one process", false, false, false}, {"a process per write", true, false, false},
	{"one process, with history", false, true, false}, {"a process per write, with history", true, true, false},
	{"one process, with history, a spec in chunks", false, true, true},
}

type writer struct {
	name                   string
	fresh, history, chunks bool
}

// A write reaches state.db and its good copy both, or neither: whichever
// request fails (a write, a sync, a create, a rename, a removal, in either
// file), in whichever way, the two hold the record as they did before the
// write, or as it wrote it, and the next write succeeds. The one
// exception is a write that reached state.db and could neither reach the
// copy nor be taken back (the file system stayed read-only): the error
// says so (ErrWriteKept), state.db holds the write and the copy, which
// does not, is gone or, on a file system that refuses its removal too,
// holds the record before.
func TestEveryWriteFailingInTurn(t *testing.T) {
	ffs := faultfs.Mount(t)
	for _, writer := range writers {
		for _, f := range faults {
			t.Run(writer.name+"/"+f.name, func(t *testing.T) {
				dir, err := os.MkdirTemp(ffs.Dir, "store-")
				if err != nil {
					t.Fatal(err)
				}
				w := newWriteCheck(t, dir, writer, 100, 1)
				ffs.Disarm(t)
				for k, fired := 1, true; fired; k++ {
					ffs.Arm(t, k, f.fault)
					err := w.put(w.gen + 1)
					_, fired = ffs.Disarm(t)
					at := fmt.Sprintf("request %d failed", k)
					w.failed(at, err)
					w.next(at)
				}
			})
		}
	}
}

// The same with a real file system that runs out of space, at each write
// in turn: a tmpfs filled but for 0, 8 KiB, 16 KiB... until a write fits.
// Each write tried adds 1,000 resources to the 100 before it, so that it
// needs space the write before it did not free.
func TestFullFileSystemAtEveryWrite(t *testing.T) {
	root := faultfs.Tmpfs(t, 64<<20)
	for _, writer := range writers {
		t.Run(writer.name, func(t *testing.T) {
			dir, err := os.MkdirTemp(root, "store-")
			if err != nil {
				t.Fatal(err)
			}
			w := newWriteCheck(t, dir, writer, 100, 1000)
			for leave := int64(0); ; leave += 8192 {
				for w.gen%2 == 1 {
					w.next("before")
				}
				free := faultfs.Fill(t, root, leave)
				err := w.put(w.gen + 1)
				free()
				at := fmt.Sprintf("with %d KiB free", leave>>10)
				w.failed(at, err)
				w.next(at)
				if err == nil {
					break
				}
			}
			if w.outcomes["not written"] == 0 {
				t.Fatal("no write failed: the file system never filled")
			}
		})
	}
}

// historyHeads is the history of infra in the file at path.
func historyHeads(t *testing.T, path, infra string) []history.Entry {
	t.Helper()
	db, err := openFile(path, true)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	var heads []history.Entry
	if err := db.View(func(tx *bolt.Tx) error {
		h := historyOf(tx, infra)
		if h == nil {
			return nil
		}
		var err error
		heads, err = headsIn(h, infra)
		return err
	}); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return heads
}
