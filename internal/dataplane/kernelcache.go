package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/atomicfile"
	"github.com/vnet-project/vnet/internal/dataplane/bpfpolicy"
	"github.com/vnet-project/vnet/internal/rundir"
)

// What a command finds out about the running kernel by loading programs
// (the verifier's work, 25 ms for the port programs; a few milliseconds for
// the probe of bpf_redirect_peer) is the same for every
// command until the machine boots again or vnet's programs change, so the
// first command that finds the kernel loads them notes it in kernelCacheDir
// and the others read the note. A note is only ever of success: a refusal
// may be passing (memory, a capability the command lacked), and is found
// out again by the next command. The note names what it holds for: what
// was found (of the port programs, this build's, by their object's
// digest), the boot (its random ID, new with every boot, kexec included)
// and the kernel release; any other note
// is not read as this one. A command whose load fails after a note said
// the kernel loads them drops the note (forgetPortProgSupport).

// kernelCacheDir is where the notes are kept: in the run directory, which
// goes with a reboot.
func kernelCacheDir() string { return filepath.Join(rundir.Dir(), "kernel") }

const portProgNote = "port-programs"

// fastPathNote notes that the kernel hands frames past the bridge
// (fastPathSupport).
const fastPathNote = "fast-path"

// probeCached reports whether load succeeds, reading a note of an earlier
// success for key instead when there is one, and writing one after a
// success. A key that cannot be had ("" with an error) makes it load.
func probeCached(name string, key func() (string, error), load func() error) error {
	k, keyErr := key()
	if keyErr == nil && readNote(name) == k {
		return nil
	}
	if err := load(); err != nil {
		return err
	}
	if keyErr == nil {
		writeNote(name, k)
	}
	return nil
}

// portProgKey is what a note of the port programs' load holds for.
func portProgKey() (string, error) { return kernelKey("programs " + bpfpolicy.Digest())() }

// kernelKey is the key of a note about what: what it is, the boot and the
// kernel release.
func kernelKey(what string) func() (string, error) {
	return func() (string, error) {
		boot := bootID()
		if boot == "" {
			return "", errors.New("boot id: /proc/sys/kernel/random/boot_id cannot be read")
		}
		rel, err := kernelRelease()
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s boot %s release %s", what, boot, rel), nil
	}
}

// readNote returns a note's content, "" when there is none or it is not
// one only this user (root) could have written.
func readNote(name string) string {
	path := filepath.Join(kernelCacheDir(), name)
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o022 != 0 || st.Size() > 4096 {
		return ""
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
		return ""
	}
	b := make([]byte, st.Size())
	n, _ := f.Read(b)
	return strings.TrimSuffix(string(b[:n]), "\n")
}

// writeNote writes a note whole or not at all; a directory that cannot be
// written (not root) keeps none, and every command loads.
func writeNote(name, content string) {
	dir := kernelCacheDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	_ = atomicfile.Write(filepath.Join(dir, name), []byte(content+"\n"), 0o644) // a note not kept is loaded again
}

// dropNote removes a note that proved wrong.
func dropNote(name string) {
	_ = os.Remove(filepath.Join(kernelCacheDir(), name)) // gone is as good
}

// kernelRelease is the running kernel's release (uname -r).
func kernelRelease() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}
