package faultfs

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs of size bytes over an empty directory of the
// test's, private to the mount it is on (nothing propagates to other
// mount namespaces), and unmounts it at cleanup: a real file system that
// runs out of space. It needs root.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: mounting a tmpfs needs root; CI runs this as root")
	}
	if testing.Short() {
		t.Skip("SKIPPED: mounts a file system, and -short runs unit tests only")
	}
	dir := t.TempDir()
	if err := unix.Mount("vnet-test", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)+",mode=0755"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
		t.Fatalf("make the tmpfs private: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount the tmpfs at %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes a file into dir's file system until at most leave bytes of
// it are free, and returns a function that frees the space again.
func Fill(t testing.TB, dir string, leave int64) (free func()) {
	t.Helper()
	path := filepath.Join(dir, ".filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	avail := int64(st.Bavail) * st.Bsize
	if n := avail - leave; n > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Errorf("free %s: %v", dir, err)
		}
	}
}

// Free is how many bytes dir's file system has free.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}
