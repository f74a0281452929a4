package store

import (
	"fmt"
	"os"
	"path/filepath"
)

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
