package dataplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Exec replaces this process with argv, running inside the named network
// namespace and, when cgroup is not empty, the VM's cgroup. Standard I/O and
// the exit status are the command's own, since the process becomes it.
// Equivalent to: ip netns exec NS CMD ARGS... (with the cgroup added)
//
// A command named plain "vnet" runs this very binary, and the command's PATH
// ends with this binary's directory, so `vnet exec web2 -- vnet netserver`
// (or a shell script calling vnet) works whether or not vnet is installed.
func Exec(nsName string, cg *Cgroups, cgroup string, argv []string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("exec: find the vnet binary: %w", err)
	}
	path, err := CommandPath(argv[0], self, exec.LookPath)
	if err != nil {
		return err
	}
	// The cgroup first: remounting /sys below hides the cgroup mounts.
	if cgroup != "" {
		if err := cg.Enter(cgroup, os.Getpid()); err != nil {
			return err
		}
	}
	runtime.LockOSThread() // never unlocked: this thread becomes the command
	target, err := netns.GetFromName(nsName)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", nsName, err)
	}
	if err := netns.Set(target); err != nil {
		return fmt.Errorf("enter netns %s: %w", nsName, err)
	}
	remountSys()
	return syscall.Exec(path, argv, PathWithSelf(os.Environ(), filepath.Dir(self)))
}

// CommandPath says which file runs for a command named name: self (the
// running vnet) for "vnet", else what lookPath finds on PATH, else a file of
// that name beside self (where PathWithSelf lets the command look too). A
// name with a slash is taken as given, so ./vnet or /usr/bin/vnet still
// mean those files.
func CommandPath(name, self string, lookPath func(string) (string, error)) (string, error) {
	if name == "vnet" {
		return self, nil
	}
	path, err := lookPath(name)
	if err == nil || strings.Contains(name, "/") {
		return path, err
	}
	if beside, err2 := lookPath(filepath.Join(filepath.Dir(self), name)); err2 == nil {
		return beside, nil
	}
	return "", err
}

// PathWithSelf returns env with dir appended to PATH unless PATH already
// holds it. Appended, not prepended: a command keeps finding what it would
// have found, and finds vnet's directory only where nothing else answered.
func PathWithSelf(env []string, dir string) []string {
	out := slices.Clone(env)
	for i, kv := range out {
		val, ok := strings.CutPrefix(kv, "PATH=")
		if !ok {
			continue
		}
		if slices.Contains(filepath.SplitList(val), dir) {
			return out
		}
		if val == "" {
			out[i] = "PATH=" + dir
		} else {
			out[i] = kv + string(filepath.ListSeparator) + dir
		}
		return out
	}
	// No PATH: a shell would use its default, which a PATH of dir alone
	// would take away.
	return append(out, "PATH="+defaultPath+string(filepath.ListSeparator)+dir)
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// remountSys gives the command a /sys that shows its namespace's links, as
// ip netns exec does. Failure only makes /sys/class/net show the host's.
func remountSys() {
	if unix.Unshare(unix.CLONE_NEWNS) != nil {
		return
	}
	if unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, "") != nil {
		return
	}
	if unix.Unmount("/sys", unix.MNT_DETACH) == nil {
		_ = unix.Mount("sysfs", "/sys", "sysfs", 0, "")
	}
}
