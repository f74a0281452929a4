package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/vnet-project/vnet/internal/atomicfile"
)

// RecoverOptions say how Recover brings a store back.
type RecoverOptions struct {
	// Rebuild starts an empty store even when the file is fine or a good
	// copy exists.
	Rebuild bool
	// ID is the ID an empty store takes when the directory does not know
	// its own (store.id is gone too): the caller may find it in the marks
	// of namespaces on the host. "" makes a new one.
	ID string
}

// Recovered says what Recover did.
type Recovered struct {
	Healthy  bool     // the file was fine: nothing was done
	Restored bool     // the good copy replaced the file
	Empty    bool     // an empty store replaced the file
	Moved    string   // where the damaged file went ("" when there was none)
	Cause    error    // what was wrong with it
	ID       string   // the store's ID now
	Records  []string // the infrastructures the store now records
}

// Recover brings back the store in dir. A damaged (or, with Rebuild, any)
// state.db is moved aside, never deleted; then the copy kept at the last
// good write takes its place if it checks out, and otherwise an empty
// store with the same ID does, so the namespaces the old one marked are
// still recognized as its own.
func Recover(dir string, opt RecoverOptions) (*Recovered, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	path, good := filepath.Join(abs, dbFile), filepath.Join(abs, goodFile)
	out := &Recovered{}
	if !opt.Rebuild {
		id, names, err := verify(path)
		if err == nil {
			out.Healthy, out.ID, out.Records = true, id, names
			return out, nil
		}
		out.Cause = err
	}
	if _, err := os.Stat(path); err == nil {
		why := "damaged"
		if out.Cause == nil {
			why = "replaced"
		}
		out.Moved = asideName(path, why)
		if err := os.Rename(path, out.Moved); err != nil {
			return nil, fmt.Errorf("recover: move %s aside: %w", path, err)
		}
	}
	goodID, names, goodErr := verify(good)
	if !opt.Rebuild && goodErr == nil {
		if err := copyFile(good, path); err != nil {
			return nil, fmt.Errorf("recover: restore %s: %w", good, err)
		}
		out.Restored, out.ID, out.Records = true, goodID, names
	} else {
		id := readIDFile(abs)
		if id == "" && goodErr == nil {
			id = goodID
		}
		if id == "" {
			id = opt.ID
		}
		if id == "" {
			id = NewID()
		}
		if err := createDB(abs, path, id); err != nil {
			return nil, err
		}
		out.Empty, out.ID = true, id
	}
	if readIDFile(abs) != out.ID && out.ID != "" {
		if err := atomicfile.Write(filepath.Join(abs, idFile), []byte(out.ID+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	// Start the good copy afresh from what the store now is.
	b, err := OpenBolt(abs)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	out.ID = b.ID()
	return out, b.refreshGood()
}

// asideName is a name no file has yet: path.why-TIME, with a number
// added when one recovery follows another within a second.
func asideName(path, why string) string {
	base := fmt.Sprintf("%s.%s-%s", path, why, time.Now().Format("20060102-150405"))
	name := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s.%d", base, i)
	}
}

// copyFile copies a file whole or not at all.
func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	return atomicfile.WriteWith(to, 0o600, func(f *os.File) error {
		_, err := io.Copy(f, src)
		return err
	})
}
