package dataplane

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Exec replaces this process with argv, running inside the named network
// namespace and, when cgroup is not empty, the VM's cgroup. Standard I/O and
// the exit status are the command's own, since the process becomes it.
// Equivalent to: ip netns exec NS CMD ARGS... (with the cgroup added)
func Exec(nsName string, cg *Cgroups, cgroup string, argv []string) error {
	path, err := exec.LookPath(argv[0])
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
	return syscall.Exec(path, argv, os.Environ())
}

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
