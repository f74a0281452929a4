package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A namespace's identity, for the ownership check (plan.NamespaceIDs): the
// 64-bit ID the kernel gives each namespace and never gives another during
// the same boot, which the nsfs ioctl NS_GET_ID (Linux 6.18) reads from
// any file of the namespace, /run/netns/NAME included, without entering
// it. The inode number of that file is no identity: the kernel reuses it
// once the namespace is gone. golang.org/x/sys does not define the ioctl
// yet, hence the number here: _IOR(NSIO, 0xd, __u64) of
// include/uapi/linux/nsfs.h.
const nsGetID = 2<<30 | 8<<16 | 0xb7<<8 | 0xd

// nsGetType is NS_GET_NSTYPE, _IO(NSIO, 0x3): the namespace's CLONE_NEW*
// type (Linux 4.11).
const nsGetType = 0xb7<<8 | 0x3

// errNotNetns says an nsfs file is of a namespace of another type.
var errNotNetns = errors.New("not a network namespace")

// nsIDAt is the ID of the network namespace of an open nsfs file. Its
// type is checked, so that no ID of a namespace of another type that
// something mounted at a namespace's name can stand for a network
// namespace's.
func nsIDAt(fd int) (uint64, error) {
	typ, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), nsGetType, 0)
	if errno != 0 {
		return 0, errno
	}
	if typ != unix.CLONE_NEWNET {
		return 0, errNotNetns
	}
	var id uint64
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), nsGetID, uintptr(unsafe.Pointer(&id))); errno != 0 {
		return 0, errno
	}
	return id, nil
}

// nsIDOf is the ID of the namespace a path names (0 with an error when
// it names none, or the kernel tells none).
func nsIDOf(path string) (uint64, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return nsIDAt(fd)
}

// nsIDs says whether the kernel tells namespaces' IDs: a kernel before
// 6.18 answers the ioctl with ENOTTY. Then every check reads marks.
var nsIDs = sync.OnceValue(func() bool {
	_, err := nsIDOf("/proc/self/ns/net")
	return err == nil
})

// bootID is the random ID of this boot, "" when it cannot be read.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

const nsIDNote = "namespace-ids-missing"

// NamespaceBoot is the boot the namespaces' IDs are of, "" when the
// kernel tells no IDs (or the boot cannot be named): then the ownership
// check reads every mark. missing says so, once a boot (a note in the
// run directory keeps the others quiet), for the caller to tell the user.
func (l *Linux) NamespaceBoot() (boot, missing string) {
	boot = bootID()
	if nsIDs() && boot != "" {
		return boot, ""
	}
	key := "boot " + boot
	if readNote(nsIDNote) == key {
		return "", ""
	}
	writeNote(nsIDNote, key)
	rel, _ := kernelRelease()
	return "", fmt.Sprintf("this kernel (%s) does not tell a namespace's ID (ioctl NS_GET_ID, Linux 6.18): every apply reads the marks of all the namespaces its record names", rel)
}

// NamespaceIDs is the current ID of each named namespace that exists, by
// name, read without entering it. Equivalent to: stat -L /run/netns/NAME
// (its ID rather than its inode)
func (l *Linux) NamespaceIDs(names []string) map[string]uint64 {
	out := make(map[string]uint64, len(names))
	if !nsIDs() {
		return out
	}
	for _, name := range names {
		if id, err := nsIDOf(filepath.Join(NetnsDir, name)); err == nil {
			out[name] = id
		}
	}
	return out
}

// seenMark is a namespace's mark as this dataplane last read or set it, in
// the namespace whose ID it names.
type seenMark struct {
	id   uint64
	mark string
}

// noteMark notes the mark a namespace carried, read or set through a
// file (or handle) of the namespace with that ID (0: unknown, nothing is
// noted).
func (l *Linux) noteMark(ns string, id uint64, mark string) {
	if id == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]seenMark{}
	}
	l.seen[ns] = seenMark{id: id, mark: mark}
}

// noteHandleMark is noteMark through the namespace's open handle.
func (l *Linux) noteHandleMark(ns, mark string) {
	l.mu.Lock()
	h, ok := l.handles[ns]
	l.mu.Unlock()
	if ok {
		l.noteMark(ns, h.id, mark)
	}
}

// MarkedNamespaceIDs is, of the named namespaces, the ID of each this
// dataplane last saw carrying mark (read in it or set on it), by name:
// what an apply records as its own (plan.NamespaceIDs).
func (l *Linux) MarkedNamespaceIDs(names []string, mark string) map[string]uint64 {
	out := map[string]uint64{}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, name := range names {
		if s, ok := l.seen[name]; ok && s.mark == mark {
			out[name] = s.id
		}
	}
	return out
}

// forgetSeenGone drops what was seen of namespaces that are no longer
// there, so that a dataplane that outlives one command keeps no more than
// the host holds. l.mu is held.
func (l *Linux) forgetSeenGone() {
	for name := range l.seen {
		if _, err := os.Lstat(filepath.Join(NetnsDir, name)); errors.Is(err, os.ErrNotExist) {
			delete(l.seen, name)
		}
	}
}

// threadNSID is the ID of the namespace the calling thread is in, 0 when
// the kernel tells none.
func threadNSID() uint64 {
	if !nsIDs() {
		return 0
	}
	id, err := nsIDOf("/proc/thread-self/ns/net")
	if err != nil {
		return 0
	}
	return id
}
