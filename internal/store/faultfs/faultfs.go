// Package faultfs gives tests a directory whose writes fail when told to:
// a FUSE file system that passes every request through to a directory
// beneath it and fails the Nth request that changes something (a write,
// a sync, a create, a rename, a link, a removal, a truncation) with the
// errno asked for, or cuts a write short. It reaches the writes vnet does
// not make itself (bbolt's), which no hook inside vnet could.
//
// The file system is served by a child process, the test binary run again
// (a package's TestMain calls ServeIfChild first): served from the test's
// own process, a page fault on a file bbolt maps would wait for the server
// while the Go runtime stopped the world for a collection, which waits for
// the faulting thread.
//
// It needs root and /dev/fuse; Mount skips the test, loudly, without them.
// Tests only.
package faultfs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Env variables of the child process.
const (
	envBacking = "VNET_FAULTFS_BACKING"
	envMount   = "VNET_FAULTFS_MOUNT"
)

// Fault is how the Nth request fails.
type Fault struct {
	// Errno is the error the request fails with.
	Errno syscall.Errno
	// Short, for a write, writes half the data and says so, and fails the
	// request after it (the writer's write of the rest) with Errno: a
	// write cut short by a file system that filled.
	Short bool
	// Persist fails every request from the Nth on, as a file system
	// remounted read-only does, until Disarm.
	Persist bool
}

// FS is a mounted fault file system.
type FS struct {
	// Dir is where it is mounted: the directory to give the code under
	// test.
	Dir string
	// Backing is the directory beneath it, which holds what was written.
	Backing string

	cmd  *exec.Cmd
	ctl  *os.File
	resp *bufio.Reader
}

// Mount mounts a fault file system over an empty directory of the test's
// and unmounts it at cleanup. No request fails until Arm.
func Mount(t testing.TB) *FS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: a FUSE file system that fails writes needs root; CI runs this as root")
	}
	if testing.Short() {
		t.Skip("SKIPPED: mounts a file system, and -short runs unit tests only")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("SKIPPED: no /dev/fuse (%v): the kernel has no FUSE", err)
	}
	f := &FS{Dir: t.TempDir(), Backing: t.TempDir()}
	toChild, ctl, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromChild, out, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	f.cmd = exec.Command(os.Args[0], "-test.run=^$")
	f.cmd.Env = append(os.Environ(), envBacking+"="+f.Backing, envMount+"="+f.Dir)
	f.cmd.Stdin, f.cmd.Stdout, f.cmd.Stderr = toChild, out, os.Stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatalf("start the fault file system: %v", err)
	}
	toChild.Close()
	out.Close()
	f.ctl, f.resp = ctl, bufio.NewReader(fromChild)
	t.Cleanup(func() { f.unmount(t) })
	if line, err := f.read(); err != nil || line != "ready" {
		t.Fatalf("the fault file system did not start: %q, %v", line, err)
	}
	return f
}

func (f *FS) unmount(t testing.TB) {
	f.send("quit")
	done := make(chan error, 1)
	go func() { done <- f.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = f.cmd.Process.Kill()
		<-done
		t.Errorf("the fault file system at %s did not stop", f.Dir)
	}
	// A server that ended otherwise than by quitting leaves its mount.
	_ = unix.Unmount(f.Dir, unix.MNT_DETACH)
	f.ctl.Close()
}

// Arm fails the nth request that changes something from now on (the
// first is 1), as fault says, and restarts the count.
func (f *FS) Arm(t testing.TB, n int, fault Fault) {
	t.Helper()
	f.ask(t, fmt.Sprintf("arm %d %d %t %t", n, int(fault.Errno), fault.Short, fault.Persist))
}

// Disarm lets every request through again, and returns how many requests
// that change something were made since the last Arm (or Disarm), and
// whether the fault was met.
func (f *FS) Disarm(t testing.TB) (requests int, fired bool) {
	t.Helper()
	reply := f.ask(t, "disarm")
	var n int
	var hit bool
	if _, err := fmt.Sscanf(reply, "%d %t", &n, &hit); err != nil {
		t.Fatalf("fault file system: %q: %v", reply, err)
	}
	return n, hit
}

func (f *FS) ask(t testing.TB, cmd string) string {
	t.Helper()
	if err := f.send(cmd); err != nil {
		t.Fatalf("fault file system: %v", err)
	}
	line, err := f.read()
	if err != nil {
		t.Fatalf("fault file system: %v", err)
	}
	return line
}

func (f *FS) send(cmd string) error {
	_, err := fmt.Fprintln(f.ctl, cmd)
	return err
}

func (f *FS) read() (string, error) {
	line, err := f.resp.ReadString('\n')
	return strings.TrimSpace(line), err
}

// ServeIfChild serves the file system and exits when this process is a
// child Mount started; otherwise it returns at once. Call it first in the
// TestMain of a package whose tests use Mount.
func ServeIfChild() {
	backing, mnt := os.Getenv(envBacking), os.Getenv(envMount)
	if backing == "" || mnt == "" {
		return
	}
	if err := serve(backing, mnt, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "faultfs: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// parseArm reads "arm N ERRNO SHORT PERSIST".
func parseArm(line string) (int, Fault, error) {
	var n, errno int
	var f Fault
	if _, err := fmt.Sscanf(line, "arm %d %d %t %t", &n, &errno, &f.Short, &f.Persist); err != nil {
		return 0, Fault{}, fmt.Errorf("%q: %w", line, err)
	}
	f.Errno = syscall.Errno(errno)
	return n, f, nil
}
