// Package atomicfile replaces files whole or not at all, durably: the one
// way vnet writes a file that a reader must find either as it was or as it
// is meant to be (the state store's ID and good copy, a device's record,
// the event journal). Replace does the same without the syncs, for a file
// whose reader checks it and can do without it (the spec cache).
//
// Every file is written under a temporary name in its own directory, so
// that the rename stays within one file system; its contents are synced
// before the rename, so that the name never points at unwritten blocks
// after a power cut; and the directory is synced after it, so that the new
// name is what the directory holds once the call returns. Any failure on
// the way (no space, an I/O error, a read-only file system, a short write)
// leaves the file as it was and removes the temporary one.
//
// It is written here rather than taken from github.com/google/renameio,
// which neither syncs the directory after the rename nor keeps the
// temporary file in the file's own directory (it may use $TMPDIR when that
// is on the same file system), and which has no way to write many files
// with one sync of the file system: vnet writes a device record for each
// of hundreds of TAPs before an apply's first step (WriteAll).
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// tempMark is in the name of every temporary file: ".NAME.tmp-RANDOM".
const tempMark = ".tmp-"

// Write replaces path with data, whole or not at all (see the package
// documentation), with the permissions perm.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteWith(path, perm, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// Replace puts data in place of path, whole or not at all while the
// machine runs, as Write does but without its syncs: after a power cut
// the file may be missing, empty or torn. It is for files whose readers
// check what they read and can do without it (the spec cache, whose
// files carry their checksum), where the syncs would cost more than the
// file saves.
func Replace(path string, data []byte, perm os.FileMode) error {
	p, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer p.Abort()
	if _, err := p.f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return p.put(false)
}

// WriteWith is Write with the contents written by fn into the temporary
// file.
func WriteWith(path string, perm os.FileMode, fn func(*os.File) error) error {
	p, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer p.Abort()
	if err := fn(p.File()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return p.Commit()
}

// Pending is a file being written under a temporary name until Commit puts
// it in place.
type Pending struct {
	f    *os.File
	path string
	done bool
}

// Create starts replacing path: the temporary file, in path's directory,
// is open for writing.
func Create(path string, perm os.FileMode) (*Pending, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+tempMark+"*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &Pending{f: f, path: path}, nil
}

// File is the temporary file, open for writing.
func (p *Pending) File() *os.File { return p.f }

// Name is the temporary file's path, for a writer that must open it
// itself (bbolt does).
func (p *Pending) Name() string { return p.f.Name() }

// Commit syncs the temporary file, renames it over the file it replaces
// and syncs the directory. After an error the file is as it was, unless
// only the directory's sync failed: then the rename was made, and a crash
// of the machine may still undo it.
func (p *Pending) Commit() error { return p.put(true) }

// put closes the temporary file and renames it over the file it
// replaces, with the syncs Commit makes when sync is set (Replace makes
// none).
func (p *Pending) put(sync bool) error {
	if p.done {
		return errors.New("atomicfile: committed twice")
	}
	var err error
	if sync {
		err = p.f.Sync()
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	p.done = true
	if err == nil {
		err = os.Rename(p.f.Name(), p.path)
	}
	if err != nil {
		os.Remove(p.f.Name())
		return fmt.Errorf("write %s: %w", p.path, err)
	}
	if !sync {
		return nil
	}
	if err := syncDir(filepath.Dir(p.path)); err != nil {
		return fmt.Errorf("write %s: %w", p.path, err)
	}
	return nil
}

// Abort drops the temporary file, unless Commit was called. It is meant
// to be deferred right after Create.
func (p *Pending) Abort() {
	if p.done {
		return
	}
	p.done = true
	p.f.Close()
	os.Remove(p.f.Name())
}

// File is one file of WriteAll: Data for Path, with permissions Perm.
type File struct {
	Path string
	Data []byte
	Perm os.FileMode
}

// WriteAll writes each file as Write does, with one sync of the file
// system for all their contents instead of one per file (the files are on
// one file system), then the renames and one sync of each directory. On
// an error, the files not yet renamed are as they were; those renamed
// before it stay written.
func WriteAll(files []File) error {
	if len(files) == 0 {
		return nil
	}
	pending := make([]*Pending, 0, len(files))
	defer func() {
		for _, p := range pending {
			p.Abort()
		}
	}()
	for _, f := range files {
		p, err := Create(f.Path, f.Perm)
		if err != nil {
			return err
		}
		pending = append(pending, p)
		_, err = p.f.Write(f.Data)
		if cerr := p.f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	if err := syncFS(filepath.Dir(files[0].Path)); err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, p := range pending {
		if err := os.Rename(p.f.Name(), p.path); err != nil {
			return fmt.Errorf("write %s: %w", p.path, err)
		}
		p.done = true
		dirs[filepath.Dir(p.path)] = true
	}
	for dir := range dirs {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("write %s: %w", dir, err)
		}
	}
	return nil
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// syncFS writes out everything of the file system that holds dir.
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// SyncDir makes a directory's entries durable: after a rename, a link or a
// removal the caller made there itself.
func SyncDir(dir string) error {
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
