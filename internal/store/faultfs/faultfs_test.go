package faultfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestMain(m *testing.M) {
	ServeIfChild()
	os.Exit(m.Run())
}

// Each kind of fault fails the request it is armed for, and only that one
// unless it persists; what passes reaches the directory beneath.
func TestFaults(t *testing.T) {
	f := Mount(t)
	path := filepath.Join(f.Dir, "a")
	write := func() error {
		fh, err := os.Create(path)
		if err != nil {
			return err
		}
		defer fh.Close()
		if _, err := fh.Write(make([]byte, 8192)); err != nil {
			return err
		}
		return fh.Sync()
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	n, fired := f.Disarm(t)
	if n < 3 || fired {
		t.Fatalf("%d requests counted, fired %v; want create, write(s) and sync", n, fired)
	}
	for _, c := range []struct {
		name  string
		at    int
		fault Fault
		want  error
	}{
		{"create fails", 1, Fault{Errno: syscall.ENOSPC}, syscall.ENOSPC},
		{"write fails", 2, Fault{Errno: syscall.EIO}, syscall.EIO},
		{"short write then full", 2, Fault{Errno: syscall.ENOSPC, Short: true}, syscall.ENOSPC},
		{"sync fails", n, Fault{Errno: syscall.EIO}, syscall.EIO},
		{"read-only from the write on", 2, Fault{Errno: syscall.EROFS, Persist: true}, syscall.EROFS},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.Arm(t, c.at, c.fault)
			err := write()
			if _, fired := f.Disarm(t); !fired || !errors.Is(err, c.want) {
				t.Fatalf("err = %v, fired %v; want %v", err, fired, c.want)
			}
		})
	}
	if err := write(); err != nil {
		t.Fatalf("after disarming: %v", err)
	}
	if info, err := os.Stat(filepath.Join(f.Backing, "a")); err != nil || info.Size() != 8192 {
		t.Fatalf("beneath: %v, %v", info, err)
	}
}
