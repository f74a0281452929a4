package dataplane

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/nsthread"
	"github.com/vnet-project/vnet/internal/killpoint"
	"github.com/vnet-project/vnet/internal/plan"
)

// NetnsDir is where named namespaces are bind-mounted, as ip-netns(8) does.
const NetnsDir = "/run/netns"

// inNS runs fn on an OS thread that has entered the named namespace.
func inNS(name string, fn func() error) error {
	target, err := openNS(name)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", name, err)
	}
	defer target.Close()
	return nsthread.In(name, target, fn)
}

// createNetns makes a named namespace, marked as its owner's (see
// ensureNetns), with its loopback up and its settings as sysctls gives them
// (a netns resource's Sysctls).
// Equivalent to: ip netns add NAME && ip -n NAME link set lo alias MARK up
// A new namespace is set up before it is mounted, so that no kill shows it
// half set up; an existing one is converged in place.
func createNetns(name, sysctls, mark string) error {
	if !netnsExists(name) {
		if err := makeNetnsEntry(name, sysctls, mark); err != nil {
			return fmt.Errorf("ip netns add %s: %w", name, err)
		}
		return nil
	}
	return configureNetns(name, sysctls)
}

func configureNetns(name, sysctls string) error {
	return inNS(name, func() error { return setUpCurrentNetns(name, sysctls, true) })
}

// setUpCurrentNetns brings up the loopback of the namespace the calling
// thread is in and writes its settings; visible says whether others can
// see the namespace meanwhile, so that each change is a kill point.
func setUpCurrentNetns(name, sysctls string, visible bool) error {
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netns %s: netlink: %w", name, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("netns %s: find lo: %w", name, err)
	}
	if lo.Attrs().Flags&net.FlagUp == 0 {
		if err := h.LinkSetUp(lo); err != nil {
			return fmt.Errorf("netns %s: set lo up: %w", name, err)
		}
		if visible {
			changed("netns lo up: %s", name)
		}
	}
	return writeSysctlsHere(name, "", plan.NamespaceSysctlSet(name), sysctls, visible)
}

// setSysctls makes vnet's settings in a namespace (plan.NamespaceSysctls
// says what and why) as a netns resource's Sysctls give them: vnet's own
// values, or those found before a failed apply, when rolling back to them.
// Equivalent to: ip netns exec NS sysctl -w net.ipv4.conf.all.arp_ignore=1 ... net.bridge.bridge-nf-call-arptables=0
func setSysctls(ns, sysctls string) error {
	return writeSysctls(ns, "", plan.NamespaceSysctlSet(ns), sysctls)
}

// bridgeIPv6 is where a bridge's IPv6 settings live under /proc/sys.
func bridgeIPv6(bridge string) string { return "net/ipv6/conf/" + bridge + "/disable_ipv6" }

// writeBridgeSysctls makes a bridge's settings (plan.BridgeSysctls, and
// its IPv6 on or off as plan.BridgeIPv6Off says) in one entry into its
// namespace. IPv6 is turned on again only where it is off.
// Equivalent to: ip netns exec NS sysctl -w net.ipv4.conf.BRIDGE.rp_filter=1 net.ipv6.conf.BRIDGE.disable_ipv6=1|0
func writeBridgeSysctls(ns, bridge, text string) error {
	return inNS(ns, func() error {
		if err := writeSysctlsHere(ns, bridgeConf(bridge), plan.BridgeSysctls, text, true); err != nil {
			return err
		}
		want := "0"
		if plan.BridgeWantsIPv6Off(text) {
			want = "1"
		}
		var dirs procSysDirs = procSysDirs{}
		defer dirs.close()
		cur, err := dirs.read(bridgeIPv6(bridge))
		if errors.Is(err, os.ErrNotExist) || (err == nil && cur == want) {
			return nil // a kernel without IPv6, or as wanted
		}
		var root procSysNet
		defer root.close()
		if err := root.write(bridgeIPv6(bridge), want); err != nil {
			return fmt.Errorf("netns %s: sysctl %s=%s: %w", ns, strings.ReplaceAll(bridgeIPv6(bridge), "/", "."), want, err)
		}
		changed("sysctl %s in %s", bridgeIPv6(bridge), ns)
		return nil
	})
}

// readBridgeIPv6Off reads, in the calling thread's namespace, whether a
// bridge has IPv6 off (on a kernel without IPv6, every link has).
func readBridgeIPv6Off(dirs procSysDirs, bridge string) (bool, error) {
	v, err := dirs.read(bridgeIPv6(bridge))
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	return v == "1", err
}

// bridgeConf is where a bridge's IPv4 settings live under /proc/sys, the
// directory plan.BridgeSysctls' keys are relative to.
func bridgeConf(bridge string) string { return "net/ipv4/conf/" + bridge + "/" }

// writeSysctls writes the settings of set that text gives a value, each
// under /proc/sys/dir.
func writeSysctls(ns, dir string, set []plan.Sysctl, text string) error {
	return inNS(ns, func() error { return writeSysctlsHere(ns, dir, set, text, true) })
}

// writeSysctlsHere writes them in the namespace the calling thread is in;
// a value already there is not written again. Paths are looked up from
// the namespace's /proc/sys/net, opened once (procSysNet).
func writeSysctlsHere(ns, dir string, set []plan.Sysctl, text string, visible bool) error {
	values := plan.SysctlValues(text)
	var root procSysNet
	defer root.close()
	for _, s := range set {
		v, ok := values[s.Key]
		if !ok || v == "?" {
			continue
		}
		key := dir + s.Key
		if cur, err := root.read(key); err == nil && cur == v {
			continue
		}
		err := root.write(key, v)
		if s.Optional && errors.Is(err, os.ErrNotExist) {
			continue // no module, nothing to set
		}
		if err != nil {
			return fmt.Errorf("netns %s: sysctl %s=%s: %w", ns, strings.ReplaceAll(key, "/", "."), v, err)
		}
		if visible {
			changed("sysctl %s in %s", key, ns)
		}
	}
	return nil
}

// procSysNet opens settings under /proc/sys relative to the calling
// thread's namespace's /proc/sys/net, which it looks up once. The kernel
// keeps a /proc/sys/net of every namespace that was looked at under the
// one /proc/sys, all of the same name, and a path lookup compares its way
// through all of them: with 20,000 VM namespaces that one step was most of
// the kernel's time in making a namespace (docs/benchmarks.md, "Virtual
// networks at scale"). Below it, each namespace's entries are its own.
type procSysNet struct {
	fd     int
	err    error
	opened bool
}

// open returns a file of key ("net/..." or any other path under
// /proc/sys) with flags.
func (p *procSysNet) open(key string, flags int) (int, error) {
	rest, ok := strings.CutPrefix(key, "net/")
	if !ok {
		return unix.Open("/proc/sys/"+key, flags|unix.O_CLOEXEC, 0)
	}
	if !p.opened {
		p.fd, p.err = unix.Open("/proc/sys/net", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		p.opened = true
	}
	if p.err != nil {
		return -1, p.err
	}
	return unix.Openat(p.fd, rest, flags|unix.O_CLOEXEC, 0)
}

func (p *procSysNet) read(key string) (string, error) {
	f, err := p.open(key, unix.O_RDONLY)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: "/proc/sys/" + key, Err: err}
	}
	defer unix.Close(f)
	var buf [128]byte
	n, err := unix.Read(f, buf[:])
	if err != nil {
		return "", &os.PathError{Op: "read", Path: "/proc/sys/" + key, Err: err}
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

func (p *procSysNet) write(key, v string) error {
	f, err := p.open(key, unix.O_WRONLY)
	if err != nil {
		return &os.PathError{Op: "open", Path: "/proc/sys/" + key, Err: err}
	}
	defer unix.Close(f)
	if _, err := unix.Write(f, []byte(v)); err != nil {
		return &os.PathError{Op: "write", Path: "/proc/sys/" + key, Err: err}
	}
	return nil
}

func (p *procSysNet) close() {
	if p.opened && p.err == nil {
		unix.Close(p.fd)
	}
}

// readSysctlSet reads set's settings under /proc/sys/dir as a resource's
// Sysctls.
func readSysctlSet(ns, dir string, set []plan.Sysctl) (text string, err error) {
	err = inNS(ns, func() error {
		text, err = readSysctlsHere(ns, dir, set)
		return err
	})
	return text, err
}

// readSysctlsHere reads set's settings under /proc/sys/dir in the calling
// thread's namespace (ns names it in errors). A missing optional one reads
// as wanted: there is nothing to set.
func readSysctlsHere(ns, dir string, set []plan.Sysctl) (string, error) {
	values := map[string]string{}
	dirs := procSysDirs{}
	defer dirs.close()
	for _, s := range set {
		v, err := dirs.read(dir + s.Key)
		switch {
		case err == nil:
			values[s.Key] = v
		case s.Optional && errors.Is(err, os.ErrNotExist):
			values[s.Key] = s.Value
		default:
			return "", fmt.Errorf("netns %s: read sysctl %s: %w", ns, strings.ReplaceAll(dir+s.Key, "/", "."), err)
		}
	}
	return plan.SysctlText(set, values), nil
}

// procSysDirs reads settings under /proc/sys, opening each directory
// once: looking a path up under /proc/sys costs more than reading the
// file, in a namespace other than the first.
type procSysDirs map[string]procSysDir

type procSysDir struct {
	fd  int
	err error // why it could not be opened
}

func (d procSysDirs) read(key string) (string, error) {
	path := "/proc/sys/" + key
	dir, base := filepath.Split(path)
	pd, ok := d[dir]
	if !ok {
		pd = d.openDir(dir)
		d[dir] = pd
	}
	if pd.err != nil {
		return "", &os.PathError{Op: "open", Path: path, Err: pd.err}
	}
	f, err := unix.Openat(pd.fd, base, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(f)
	var buf [128]byte
	n, err := unix.Read(f, buf[:])
	if err != nil {
		return "", &os.PathError{Op: "read", Path: path, Err: err}
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

// openDir opens a directory under /proc/sys/net relative to the
// namespace's /proc/sys/net, opened once (procSysNet says why).
func (d procSysDirs) openDir(dir string) procSysDir {
	const root = "/proc/sys/net/"
	var pd procSysDir
	rest, ok := strings.CutPrefix(dir, root)
	if !ok || rest == "" {
		pd.fd, pd.err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return pd
	}
	r, ok := d[root]
	if !ok {
		r = d.openDir(root)
		d[root] = r
	}
	if r.err != nil {
		return r
	}
	pd.fd, pd.err = unix.Openat(r.fd, rest, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	return pd
}

func (d procSysDirs) close() {
	for _, pd := range d {
		if pd.err == nil {
			unix.Close(pd.fd)
		}
	}
}

// deleteNetns kills whatever still runs inside the namespace, then removes it.
// A process left inside would keep the namespace, and its links, alive
// after its name is gone. An entry that was never mounted, or whose mount
// is already gone, is removed as it is.
// Equivalent to: ip netns pids NAME | xargs kill -9; ip netns del NAME
func deleteNetns(name string) error {
	return deleteNetnsEntry(name, true)
}

// deleteNetnsEntry is deleteNetns; kill says whether to kill what runs in
// the namespace first, which a caller deleting many does for all at once.
func deleteNetnsEntry(name string, kill bool) error {
	path := filepath.Join(NetnsDir, name)
	state, err := entryStateOf(path)
	if err != nil {
		return fmt.Errorf("ip netns del %s: %w", name, err)
	}
	switch state {
	case entryAbsent:
		return nil
	case entryUnfinished:
		return removeAbandonedEntry(path)
	}
	if kill {
		if err := killNetnsProcesses(name); err != nil {
			return fmt.Errorf("ip netns del %s: %w", name, err)
		}
	}
	killpoint.At("netns unmount: " + name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("ip netns del %s: unmount: %w", name, err)
	}
	killpoint.At("netns unmounted, not yet removed: " + name)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ip netns del %s: %w", name, err)
	}
	return nil
}

// netnsExists reports whether the named namespace is there to be used: a
// mounted entry (or the probe's unnamed namespace), not an unfinished one.
func netnsExists(name string) bool {
	if name == plan.CurrentNS {
		return true
	}
	if _, ok := anonNS(name); ok {
		return true
	}
	state, err := entryStateOf(filepath.Join(NetnsDir, name))
	return err == nil && state == entryMounted
}

// listNetns returns the named namespaces that start with prefix. Unfinished
// entries are not namespaces; Leftovers finds them.
func listNetns(prefix string) ([]string, error) {
	names, err := netnsEntries(prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range names {
		if state, err := entryStateOf(filepath.Join(NetnsDir, name)); err == nil && state == entryMounted {
			out = append(out, name)
		}
	}
	return out, nil
}

// listNetnsIn is listNetns of only the names in scope (all when nil).
func listNetnsIn(prefix string, scope plan.Scope) ([]string, error) {
	if scope.Full() {
		return listNetns(prefix)
	}
	var out []string
	for _, name := range scope.Names() {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		if state, err := entryStateOf(filepath.Join(NetnsDir, name)); err == nil && state == entryMounted {
			out = append(out, name)
		}
	}
	return out, nil
}

// netnsEntries returns the names in NetnsDir that start with prefix.
func netnsEntries(prefix string) ([]string, error) {
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
	byNS, err := pidsInNamespaces(map[string]bool{netnsLink(ino): true})
	return byNS[netnsLink(ino)], err
}

// netnsLink is what /proc/PID/ns/net reads for the namespace of an inode.
func netnsLink(ino uint64) string { return fmt.Sprintf("net:[%d]", ino) }

// pidsInNamespaces returns the processes in each namespace of want (keyed
// by netnsLink), from one pass through /proc.
func pidsInNamespaces(want map[string]bool) (map[string][]int, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string][]int{}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if link, err := os.Readlink(filepath.Join("/proc", p.Name(), "ns/net")); err == nil && want[link] {
			out[link] = append(out[link], pid)
		}
	}
	return out, nil
}

func killNetnsProcesses(name string) error {
	return killProcessesIn([]string{name})
}

// killProcessesIn kills whatever runs in the named namespaces and waits
// until none is left. Names that are no namespace are passed over.
func killProcessesIn(names []string) error {
	want := map[string]bool{}
	for _, name := range names {
		if ino, err := netnsInode(filepath.Join(NetnsDir, name)); err == nil {
			want[netnsLink(ino)] = true
		}
	}
	if len(want) == 0 {
		return nil
	}
	for attempt := 0; attempt < 50; attempt++ {
		byNS, err := pidsInNamespaces(want)
		if err != nil || len(byNS) == 0 {
			return err
		}
		for _, pids := range byNS {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("processes in netns %s do not die", strings.Join(names, ", "))
}

// handleFor opens a netlink handle inside the named namespace.
func handleFor(name string) (*netlink.Handle, error) {
	ns, err := openNS(name)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE) // vnet uses no other family
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", name, err)
	}
	return h, nil
}

// A named namespace is a file in NetnsDir with the namespace bind-mounted
// on it. Making one takes two steps (create the file, mount on it) and
// removing one two more (unmount, unlink); a process killed between them
// leaves a plain file that every later open would take for a namespace and
// fail to enter. rename(2) cannot publish a finished entry in one step (the
// kernel refuses to rename a mount point: EBUSY), so an entry's maker holds
// an flock on the file from before its name appears until it is mounted.
// Whoever finds an unmounted entry whose lock is free knows its maker is
// gone (the kernel drops the lock with the process, however it died) and
// removes it; one whose lock is held is still being made.

type entryState int

const (
	entryAbsent     entryState = iota
	entryMounted               // a namespace
	entryUnfinished            // a plain file: being made, or left by a killed command
)

// tmpPrefix starts the name an entry is made under before link(2) gives
// it its real name in one step; its maker's pid ends it.
const tmpPrefix = ".vnet-tmp."

func entryStateOf(path string) (entryState, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return entryAbsent, nil
		}
		return 0, err
	}
	if isNsfs(fs.Type) {
		return entryMounted, nil
	}
	return entryUnfinished, nil
}

// isNsfs reports whether a file system type is a namespace's: nsfs, or
// proc on kernels before 3.19.
func isNsfs(fsType int64) bool {
	return fsType == unix.NSFS_MAGIC || fsType == unix.PROC_SUPER_MAGIC
}

// makeNetnsEntry makes a new namespace and mounts it at NetnsDir/name. The
// name appears, locked, by link(2) from a temporary file, and is mounted
// before the lock is dropped. The namespace carries its mark before it is
// mounted, and its loopback and settings: a kill right after the mount
// must not leave a namespace that nobody can tell is its own, nor one half
// set up.
func makeNetnsEntry(name, sysctls, mark string) error {
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(NetnsDir, name)
	if state, err := entryStateOf(path); err != nil {
		return err
	} else if state == entryUnfinished {
		if err := removeAbandonedEntry(path); err != nil {
			return err
		}
	}
	tmp := filepath.Join(NetnsDir, fmt.Sprintf("%s%s.%d", tmpPrefix, name, os.Getpid()))
	_ = os.Remove(tmp) // one of an earlier process with this pid
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	defer f.Close() // drops the lock: the entry is mounted, or removed
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("lock %s: %w", tmp, err)
	}
	killpoint.At("netns temporary entry made: " + name)
	err = os.Link(tmp, path)
	if err == nil {
		killpoint.At("netns entry named, temporary one not yet removed: " + name)
	}
	_ = os.Remove(tmp)
	if err != nil {
		return err
	}
	killpoint.At("netns entry named, not yet mounted: " + name)
	err = nsthread.Run(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := markCurrentNetns(mark); err != nil {
			return err
		}
		if err := setUpCurrentNetns(name, sysctls, false); err != nil {
			return err
		}
		src := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mount: %w", err)
		}
		return nil
	})
	if err != nil {
		_ = os.Remove(path)
		return err
	}
	killpoint.At("netns mounted: " + name)
	return nil
}

// markCurrentNetns sets the mark on the loopback of the namespace the
// calling thread is in.
func markCurrentNetns(mark string) error {
	if mark == "" {
		return nil
	}
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink in new namespace: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := h.LinkSetAlias(lo, mark); err != nil {
		return fmt.Errorf("mark lo: %w", err)
	}
	return nil
}

// ErrUnfinishedNetns marks an entry in NetnsDir that is a plain file: one
// being made, or left by a command killed halfway. The next apply or
// destroy of its infrastructure, or vnet gc, removes a left one.
var ErrUnfinishedNetns = errors.New("unfinished namespace entry")

// errEntryBusy says an unfinished entry is still being made by a live process.
var errEntryBusy = errors.New("being made by another running command")

// removeAbandonedEntry removes an unmounted entry whose maker is gone.
func removeAbandonedEntry(path string) error {
	abandoned, err := entryAbandoned(path, func() error {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove unfinished %s: %w", path, err)
	}
	if !abandoned {
		if state, _ := entryStateOf(path); state == entryMounted {
			return nil // finished meanwhile: not ours to remove here
		}
		return fmt.Errorf("%s: %w", path, errEntryBusy)
	}
	return nil
}

// entryAbandoned reports whether path is an unmounted entry nobody holds
// the lock of, and if so runs fn while holding it, so that no maker can be
// between naming and mounting it meanwhile.
func entryAbandoned(path string, fn func() error) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		return false, err
	}
	if isNsfs(fs.Type) {
		return false, nil // mounted: a namespace
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		return false, err
	}
	// The name must still be this unmounted file.
	var held, named unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &held); err != nil {
		return false, err
	}
	if err := unix.Stat(path, &named); err != nil || named.Ino != held.Ino || named.Dev != held.Dev {
		return false, nil
	}
	if fn == nil {
		return true, nil
	}
	return true, fn()
}

// The probe's namespace has no name in NetnsDir: it lives as long as the
// handle below, and so dies with the process, however it ends.
var anon = struct {
	sync.Mutex
	byName map[string]netns.NsHandle
}{byName: map[string]netns.NsHandle{}}

func anonNS(name string) (netns.NsHandle, bool) {
	anon.Lock()
	defer anon.Unlock()
	h, ok := anon.byName[name]
	return h, ok
}

// newAnonNetns makes a namespace known to this process only, by name.
func newAnonNetns(name string) error {
	h, err := nsthread.New()
	if err != nil {
		return err
	}
	anon.Lock()
	anon.byName[name] = h
	anon.Unlock()
	return nil
}

func closeAnonNetns(name string) {
	anon.Lock()
	defer anon.Unlock()
	if h, ok := anon.byName[name]; ok {
		h.Close()
		delete(anon.byName, name)
	}
}

// openNS opens a namespace by name; the caller closes the handle.
func openNS(name string) (netns.NsHandle, error) {
	if name == plan.CurrentNS {
		return openHostNS()
	}
	if h, ok := anonNS(name); ok {
		fd, err := unix.Dup(int(h))
		if err != nil {
			return netns.None(), err
		}
		return netns.NsHandle(fd), nil
	}
	h, err := netns.GetFromName(name)
	if err != nil {
		return h, err
	}
	// An unfinished entry opens as a plain file; say what it is.
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(h), &fs); err == nil && !isNsfs(fs.Type) {
		h.Close()
		return netns.None(), fmt.Errorf("%s is an unfinished entry, not a namespace: %w", filepath.Join(NetnsDir, name), ErrUnfinishedNetns)
	}
	return h, nil
}
