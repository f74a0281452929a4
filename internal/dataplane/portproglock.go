package dataplane

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/rundir"
)

// lockPortPrograms takes a namespace's port-program lock, which every
// process that changes those programs shares, and returns its release.
//
// The programs of a namespace are one pair for all its ports, and on a
// machine's own namespace the ports are several infrastructures', each
// changed under its own infrastructure's lock alone. A sweep deletes the
// rules and tables no port's settings name, which is also what another
// command has staged and not yet set. So staging-then-setting takes the
// lock shared (commands that stage do not disturb one another: each
// writes tables of its own and then its ports' settings), and a sweep
// takes it exclusive: it runs only when no one is between the two. The
// lock is held around those steps alone, never across an apply. It is an
// flock on a file of the run directory named by the namespace's inode (a
// namespace's identity while it lives), so it goes with the process that
// holds it, killed or not. flock, unlike a process's mutex, also parts two
// holders in one process, as long as each opens the file itself.
func (l *Linux) lockPortPrograms(ns string, exclusive bool) (func(), error) {
	nh, err := l.nsHandle(ns)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(rundir.Dir(), "portprog")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("port programs of %s: %w", nsLabel(ns), err)
	}
	path := filepath.Join(dir, fmt.Sprintf("netns-%d.lock", nh.ino))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("port programs of %s: %w", nsLabel(ns), err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the port programs of %s (%s): %w", nsLabel(ns), path, err)
	}
	return func() { f.Close() }, nil
}

// sweepPortPrograms sweeps a namespace's port programs under its lock,
// taken exclusive (lockPortPrograms).
func (l *Linux) sweepPortPrograms(ns string, p sweeper) error {
	unlock, err := l.lockPortPrograms(ns, true)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := p.Sweep(); err != nil {
		return fmt.Errorf("sweep the port programs of %s: %w", ns, err)
	}
	return nil
}

type sweeper interface{ Sweep() (int, error) }
