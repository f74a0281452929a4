package dataplane

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/plan"
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
// flock on a file of the namespace itself (nsfs), so it names the
// namespace and nothing else, needs no file of vnet's that would outlive
// it, and goes with the process that holds it, killed or not. flock,
// unlike a process's mutex, also parts two holders in one process, as
// long as each opens the file itself.
func (l *Linux) lockPortPrograms(ns string, exclusive bool) (func(), error) {
	nh, err := l.nsHandle(ns)
	if err != nil {
		return nil, err
	}
	path := nsLockFile(ns)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("port programs of %s: %w", nsLabel(ns), err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Ino != nh.ino {
		unix.Close(fd)
		if err == nil {
			err = errNamespaceReplaced
		}
		return nil, fmt.Errorf("port programs of %s (%s): %w", nsLabel(ns), path, err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(fd, how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock the port programs of %s (%s): %w", nsLabel(ns), path, err)
	}
	return func() { unix.Close(fd) }, nil
}

// errNamespaceReplaced is a namespace's name that has come to stand for
// another namespace since this command opened it.
var errNamespaceReplaced = errors.New("the name stands for another namespace now")

// nsLockFile is a file of the namespace to lock: its name under NetnsDir,
// this process's own for the one vnet runs in, or the handle this process
// keeps of one known to it alone.
func nsLockFile(ns string) string {
	if ns == plan.CurrentNS || ns == "" {
		return "/proc/self/ns/net"
	}
	if h, ok := anonNS(ns); ok {
		return fmt.Sprintf("/proc/self/fd/%d", int(h))
	}
	return filepath.Join(NetnsDir, ns)
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
