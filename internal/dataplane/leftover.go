package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/vnet-project/vnet/internal/dataplane/rtnl"
	"github.com/vnet-project/vnet/internal/plan"
)

// Leftover is something a vnet command killed halfway left on the host
// that no plan sees: an unfinished namespace entry, its temporary file, a
// cgroup directory without VMs, or (for gc) what may belong to no known
// infrastructure.
type Leftover struct {
	What string // what it is and where, for people
	// Infra is the infrastructure of this host's store it belongs to, ""
	// when none (a probe's, or another store's): gc takes its lock before
	// removing it, so as not to race an apply making it.
	Infra string
	// Unowned says it was found because Infra is not in the store, which
	// gc checks again under the lock.
	Unowned bool
	// Kind is KindNetns or KindCgroup for an object that carries a mark
	// (plan.Mark), whose maker gc must be sure of before it removes it;
	// "" for what no store owns (a probe's namespace, an unfinished
	// entry). Name is the object's (a namespace, a cgroup), Mark its mark,
	// Marked whether it has one, and PathInfra the infrastructure its name
	// says it is of.
	Kind      plan.Kind
	Name      string
	Mark      plan.Mark
	Marked    bool
	PathInfra string
	path      string // the file or directory, so that one is listed once
	remove    func() error
}

func (l Leftover) String() string { return l.What }

// Remove removes it.
func (l Leftover) Remove() error {
	if err := l.remove(); err != nil {
		return fmt.Errorf("remove %s: %w", l.What, err)
	}
	return nil
}

// Leftovers returns what interrupted commands left of one infrastructure:
// unfinished entries of its namespaces whose maker is gone, their
// temporary files, and its cgroup directories that hold no VM. Everything
// else a killed command leaves is a resource that Observe sees, so the
// next plan finishes or removes it.
func (l *Linux) Leftovers(infra string) ([]Leftover, error) {
	out, err := unfinishedEntries(plan.InfraNSPrefix(infra))
	if err != nil {
		return nil, err
	}
	for _, dir := range l.cgroups().EmptyInfraDirs(infra) {
		out = append(out, Leftover{What: "cgroup " + dir + " (no VM left)", remove: func() error { return l.cgroups().RemoveEmptyDir(dir) }})
	}
	return out, nil
}

// Sweep removes Leftovers(infra) and says what it removed.
func (l *Linux) Sweep(infra string) ([]string, error) {
	found, err := l.Leftovers(infra)
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, lo := range found {
		if err := lo.Remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, lo.What)
	}
	taps, err := l.sweepTaps(infra)
	return append(done, taps...), errors.Join(append(errs, err)...)
}

// unfinishedEntries finds, among the entries in NetnsDir whose name starts
// with prefix, the unmounted ones nobody is making, and the temporary
// files of makers that are gone.
func unfinishedEntries(prefix string) ([]Leftover, error) {
	names, err := netnsEntries(prefix)
	if err != nil {
		return nil, err
	}
	var out []Leftover
	for _, name := range names {
		path := filepath.Join(NetnsDir, name)
		if state, err := entryStateOf(path); err != nil || state != entryUnfinished {
			continue
		}
		if abandoned, err := entryAbandoned(path, nil); err != nil || !abandoned {
			continue
		}
		out = append(out, Leftover{What: "unfinished namespace entry " + path, Infra: infraOfNS(name), path: path, remove: func() error { return removeAbandonedEntry(path) }})
	}
	tmps, err := netnsEntries(tmpPrefix + prefix)
	if err != nil {
		return nil, err
	}
	for _, name := range tmps {
		pid, err := strconv.Atoi(name[strings.LastIndexByte(name, '.')+1:])
		if err != nil || pidAlive(pid) {
			continue
		}
		path := filepath.Join(NetnsDir, name)
		out = append(out, Leftover{What: "temporary namespace entry " + path, Infra: infraOfNS(strings.TrimPrefix(name, tmpPrefix)), path: path, remove: func() error {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			return nil
		}})
	}
	return out, nil
}

// infraOfNS returns the infrastructure a vnet.INFRA.NODE name belongs to,
// "" for another name.
func infraOfNS(name string) string {
	rest, ok := strings.CutPrefix(name, plan.NSPrefix)
	if !ok {
		return ""
	}
	infra, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return infra
}

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// GarbageOpts says what gc knows of this host's store.
type GarbageOpts struct {
	// Store is this store's ID: its namespaces are never gc's to remove
	// (destroy removes them).
	Store string
	// Known reports whether an infrastructure is in the state store.
	Known func(infra string) bool
}

// Garbage returns what no vnet command will clean up on its own: probe
// namespaces of processes that are gone (kept by earlier versions, which
// mounted them), unfinished namespace entries and temporary files of any
// infrastructure, which no store owns; and, for gc to judge by their
// marks, every namespace marked by another store, and the cgroups under
// vnet/ of infrastructures not in this store (each VM's, and each empty
// vnet/<infra> directory).
func (l *Linux) Garbage(opts GarbageOpts) ([]Leftover, error) {
	var out []Leftover
	probes, err := netnsEntries(ProbeNSPrefix)
	if err != nil {
		return nil, err
	}
	for _, name := range probes {
		pid, err := strconv.Atoi(strings.TrimPrefix(name, ProbeNSPrefix))
		if err != nil || pidAlive(pid) {
			continue
		}
		out = append(out, Leftover{What: "probe namespace " + filepath.Join(NetnsDir, name) + " (pid " + strconv.Itoa(pid) + " is gone)",
			path:   filepath.Join(NetnsDir, name),
			remove: func() error { l.forget(name); return deleteNetns(name) }})
	}
	for _, prefix := range []string{plan.NSPrefix, ProbeNSPrefix} {
		found, err := unfinishedEntries(prefix)
		if err != nil {
			return nil, err
		}
		for _, lo := range found {
			if !slices.ContainsFunc(out, func(o Leftover) bool { return o.path == lo.path }) {
				out = append(out, lo)
			}
		}
	}
	all, err := l.VnetNamespaces()
	if err != nil {
		return nil, err
	}
	for _, ns := range all {
		m, marked := plan.ParseMark(ns.Mark)
		if !marked || m.Store == opts.Store {
			continue
		}
		out = append(out, Leftover{What: "namespace " + ns.Name, Kind: plan.KindNetns, Name: ns.Name, Mark: m, Marked: true, PathInfra: infraOfNS(ns.Name),
			path: filepath.Join(NetnsDir, ns.Name),
			remove: func() error {
				l.forget(ns.Name)
				if err := killNetnsProcesses(ns.Name); err != nil {
					return err
				}
				return deleteNetns(ns.Name)
			}})
	}
	for _, infra := range l.cgroups().Infras() {
		if opts.Known != nil && opts.Known(infra) {
			continue
		}
		for _, name := range l.cgroups().List("vnet/" + infra) {
			m, marked := plan.ParseMark(l.cgroups().Mark(name))
			out = append(out, Leftover{What: "cgroup " + strings.Join(l.cgroups().Dirs(name), " "), Infra: infra, Unowned: true,
				Kind: plan.KindCgroup, Name: name, Mark: m, Marked: marked, PathInfra: infra,
				remove: func() error { return l.cgroups().Remove(name) }})
		}
		for _, dir := range l.cgroups().EmptyInfraDirs(infra) {
			m, marked := plan.ParseMark(readDirMark(dir))
			out = append(out, Leftover{What: "cgroup " + dir + " (no VM left)", Infra: infra, Unowned: true,
				Kind: plan.KindCgroup, Name: "vnet/" + infra, Mark: m, Marked: marked, PathInfra: infra,
				remove: func() error { return l.cgroups().RemoveEmptyDir(dir) }})
		}
	}
	return out, nil
}

// SweepUnmarked removes the vNIC pairs that a command killed between
// making them and marking them left in the infrastructure's namespaces:
// the kernel takes no alias when it makes a link, so for a few requests a
// pair bears no mark, and no observation sees it. Only veths with vnet's
// name for a vNIC's switch port and no alias at all are taken: in a
// namespace vnet made, such a link is a killed command's. A VM's pair is
// made again under its name by the next apply; a container's, whose other
// end is in the runtime's namespace, would stay there when the container
// is detached. It reads every link of those namespaces, so it is for after
// an apply that did not finish.
func (l *Linux) SweepUnmarked(infra string) ([]string, error) {
	names, err := netnsEntries(plan.InfraNSPrefix(infra))
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, ns := range names {
		if !netnsExists(ns) {
			continue
		}
		h, err := l.handle(ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		links, err := rtnl.RetryDump(h.LinkList)
		if err != nil {
			errs = append(errs, fmt.Errorf("list links of %s: %w", ns, err))
			continue
		}
		for _, link := range links {
			if link.Type() != "veth" || link.Attrs().Alias != "" || !plan.IsVNICPortName(link.Attrs().Name) {
				continue
			}
			if err := h.LinkDel(link); err != nil && !isGone(err) {
				errs = append(errs, fmt.Errorf("ip -n %s link del %s: %w", ns, link.Attrs().Name, err))
				continue
			}
			done = append(done, fmt.Sprintf("unmarked vNIC pair %s in %s", link.Attrs().Name, ns))
		}
	}
	return done, errors.Join(errs...)
}
