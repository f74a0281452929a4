package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/plan"
)

// NetnsDir is where named namespaces are bind-mounted, as ip-netns(8) does.
const NetnsDir = "/run/netns"

// onOwnThread runs fn on a locked OS thread and brings the thread back to
// its namespace afterwards. fn may switch the thread's namespace (setns, or
// unshare to make a new one); if the thread cannot be brought back it stays
// locked, and the runtime discards it when the goroutine ends instead of
// running other goroutines in the wrong namespace.
func onOwnThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("return to the original netns: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// inNS runs fn on an OS thread that has entered the named namespace.
func inNS(name string, fn func() error) error {
	target, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", name, err)
	}
	defer target.Close()
	return onOwnThread(func() error {
		if err := netns.Set(target); err != nil {
			return fmt.Errorf("enter netns %s: %w", name, err)
		}
		return fn()
	})
}

// createNetns makes a named namespace with its loopback up and its
// settings as sysctls gives them (a netns resource's Sysctls).
// Equivalent to: ip netns add NAME && ip -n NAME link set lo up
func createNetns(name, sysctls string) error {
	if !netnsExists(name) {
		err := onOwnThread(func() error {
			h, err := netns.NewNamed(name) // moves this thread into the new namespace
			if err == nil {
				h.Close()
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("ip netns add %s: %w", name, err)
		}
	}
	h, err := handleFor(name)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("netns %s: find lo: %w", name, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("netns %s: set lo up: %w", name, err)
	}
	return setSysctls(name, sysctls)
}

// setSysctls makes vnet's settings in a namespace (plan.NamespaceSysctls
// says what and why) as a netns resource's Sysctls give them: vnet's own
// values, or those found before a failed apply, when rolling back to them.
// Equivalent to: ip netns exec NS sysctl -w net.ipv4.conf.all.arp_ignore=1 ... net.bridge.bridge-nf-call-arptables=0
func setSysctls(ns, sysctls string) error {
	return writeSysctls(ns, "", plan.NamespaceSysctls, sysctls)
}

// readSysctls reads vnet's settings in a namespace as a netns resource's
// Sysctls.
func readSysctls(ns string) (string, error) {
	return readSysctlSet(ns, "", plan.NamespaceSysctls)
}

// bridgeConf is where a bridge's IPv4 settings live under /proc/sys, the
// directory plan.BridgeSysctls' keys are relative to.
func bridgeConf(bridge string) string { return "net/ipv4/conf/" + bridge + "/" }

// writeSysctls writes the settings of set that text gives a value, each
// under /proc/sys/dir.
func writeSysctls(ns, dir string, set []plan.Sysctl, text string) error {
	values := plan.SysctlValues(text)
	return inNS(ns, func() error {
		for _, s := range set {
			v, ok := values[s.Key]
			if !ok || v == "?" {
				continue
			}
			err := os.WriteFile("/proc/sys/"+dir+s.Key, []byte(v), 0o644)
			if s.Optional && errors.Is(err, os.ErrNotExist) {
				continue // no module, nothing to set
			}
			if err != nil {
				return fmt.Errorf("netns %s: sysctl %s=%s: %w", ns, strings.ReplaceAll(dir+s.Key, "/", "."), v, err)
			}
		}
		return nil
	})
}

// readSysctlSet reads set's settings under /proc/sys/dir as a resource's
// Sysctls. A missing optional one reads as wanted: there is nothing to set.
func readSysctlSet(ns, dir string, set []plan.Sysctl) (string, error) {
	values := map[string]string{}
	err := inNS(ns, func() error {
		for _, s := range set {
			b, err := os.ReadFile("/proc/sys/" + dir + s.Key)
			switch {
			case err == nil:
				values[s.Key] = strings.TrimSpace(string(b))
			case s.Optional && errors.Is(err, os.ErrNotExist):
				values[s.Key] = s.Value
			default:
				return fmt.Errorf("netns %s: read sysctl %s: %w", ns, strings.ReplaceAll(dir+s.Key, "/", "."), err)
			}
		}
		return nil
	})
	return plan.SysctlText(set, values), err
}

// deleteNetns kills whatever still runs inside the namespace, then removes it.
// A process left inside would keep the namespace, and its links, alive
// after its name is gone. Equivalent to: ip netns pids NAME | xargs kill -9; ip netns del NAME
func deleteNetns(name string) error {
	if !netnsExists(name) {
		return nil
	}
	if err := killNetnsProcesses(name); err != nil {
		return fmt.Errorf("ip netns del %s: %w", name, err)
	}
	if err := netns.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ip netns del %s: %w", name, err)
	}
	return nil
}

func netnsExists(name string) bool {
	_, err := os.Stat(filepath.Join(NetnsDir, name))
	return err == nil
}

// listNetns returns the named namespaces that start with prefix.
func listNetns(prefix string) ([]string, error) {
	entries, err := os.ReadDir(NetnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func netnsInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// NetnsPIDs returns the processes whose network namespace is the named one.
// Equivalent to: ip netns pids NAME
func NetnsPIDs(name string) ([]int, error) {
	ino, err := netnsInode(filepath.Join(NetnsDir, name))
	if err != nil {
		return nil, err
	}
	want := fmt.Sprintf("net:[%d]", ino)
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if link, err := os.Readlink(filepath.Join("/proc", p.Name(), "ns/net")); err == nil && link == want {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func killNetnsProcesses(name string) error {
	for attempt := 0; attempt < 50; attempt++ {
		pids, err := NetnsPIDs(name)
		if err != nil || len(pids) == 0 {
			return err
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("processes in netns %s do not die", name)
}

// handleFor opens a netlink handle inside the named namespace.
func handleFor(name string) (*netlink.Handle, error) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", name, err)
	}
	return h, nil
}
