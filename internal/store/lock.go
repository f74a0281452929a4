package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// heldLock is an infrastructure's lock file, flocked, with how many
// callers of this Bolt share it.
type heldLock struct {
	f     *os.File
	count int
}

func (h *heldLock) release() {
	_ = unix.Flock(int(h.f.Fd()), unix.LOCK_UN)
	h.f.Close()
}

// Lock takes the infrastructure's lock: an flock on locks/<name>.lock in
// the state directory, which the kernel drops when the process ends, so a
// killed command leaves no stale lock. Locks of different infrastructures
// are independent. Nested calls on one Bolt share the lock; another Bolt
// or process waits up to LockWait, then fails with ErrLocked naming the
// command that holds it.
func (b *Bolt) Lock(name string) (unlock func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.held[name]; ok {
		h.count++
		return b.unlocker(name, h), nil
	}
	dir := filepath.Join(b.dir, lockDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	path := filepath.Join(dir, name+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	deadline := time.Now().Add(b.LockWait)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: flock %s: %w", name, path, err)
		}
		if time.Now().After(deadline) {
			holder := holderOf(path)
			f.Close()
			return nil, fmt.Errorf("%s is being changed by another vnet command (%s): try again when it has finished: %w", name, holder, ErrLocked)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Who holds it, for the message another command gives.
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "pid %d: %s\n", os.Getpid(), strings.Join(os.Args, " "))
	}
	h := &heldLock{f: f, count: 1}
	b.held[name] = h
	return b.unlocker(name, h), nil
}

func (b *Bolt) unlocker(name string, h *heldLock) func() {
	done := false
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if done {
			return
		}
		done = true
		if h.count--; h.count == 0 && b.held[name] == h {
			delete(b.held, name)
			h.release()
		}
	}
}

func holderOf(path string) string {
	b, err := os.ReadFile(path)
	if s := strings.TrimSpace(string(b)); err == nil && s != "" {
		return s
	}
	return "holder unknown"
}

// lockedError says what is locked in its own words and is ErrLocked to
// errors.Is: bbolt's timeout on its file lock wraps no sentinel of its own.
type lockedError string

func (e lockedError) Error() string { return string(e) }

// Is makes errors.Is(err, ErrLocked) true.
func (e lockedError) Is(target error) bool { return target == ErrLocked }
