package dataplane

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/killpoint"
	"github.com/vnet-project/vnet/internal/plan"
)

const cfsPeriodUS = 100000

// Cgroups limits a VM's processes to its CPUs. It uses cgroup v2 when the
// unified hierarchy has the cpu and cpuset controllers, and the v1
// hierarchies otherwise: hybrid systems keep cpu on v1 while v2 is mounted.
type Cgroups struct {
	v2       string // unified mount, when it has cpu and cpuset
	v1CPU    string // v1 mount with the cpu controller
	v1Cpuset string // v1 mount with the cpuset controller
	unified  string // the cgroup2 mount, whatever its controllers: searched for leftovers too
}

// cgroupRoot is where systemd, and most machines, mount the cgroup
// hierarchies.
const cgroupRoot = "/sys/fs/cgroup"

// DetectCgroups finds the hierarchies that carry the cpu and cpuset
// controllers: in their usual places, when they are there, else in the
// mount table. The mount table grows with every mount a container runtime
// makes (each container's namespace in /run/netns is one, its root file
// system others), and the kernel writes it out whole for each read: a
// command of every container's ADD would pay for all the containers.
func DetectCgroups() *Cgroups {
	if c, ok := usualCgroups(cgroupRoot); ok {
		return c
	}
	return mountedCgroups()
}

// usualCgroups finds the hierarchies under root: root itself as cgroup2
// with the cpu and cpuset controllers, or a tmpfs whose subdirectories are
// the mounts of a hybrid or v1 machine. It reports false when it does not
// find hierarchies vnet can limit CPUs with there, so that the mount table
// says where they are, or that there are none.
func usualCgroups(root string) (*Cgroups, bool) {
	c := &Cgroups{}
	switch fsMagic(root) {
	case unix.CGROUP2_SUPER_MAGIC:
		c.unified = root
		if hasCPUControllers(root) {
			c.v2 = root
			return c, true
		}
		return nil, false
	case unix.TMPFS_MAGIC:
	default:
		return nil, false
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, false
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue // a link such as cpu -> cpu,cpuacct: its target is listed too
		}
		// A cgroup file system in a directory of a tmpfs is mounted there.
		dir := filepath.Join(root, e.Name())
		switch fsMagic(dir) {
		case unix.CGROUP2_SUPER_MAGIC:
			if c.unified == "" {
				c.unified = dir
			}
			if c.v2 == "" && hasCPUControllers(dir) {
				c.v2 = dir
			}
		case unix.CGROUP_SUPER_MAGIC:
			// A v1 hierarchy's root holds the files of its controllers.
			if c.v1CPU == "" && fileExists(filepath.Join(dir, "cpu.shares")) {
				c.v1CPU = dir
			}
			if c.v1Cpuset == "" && fileExists(filepath.Join(dir, "cpuset.cpus")) {
				c.v1Cpuset = dir
			}
		}
	}
	if c.v2 == "" && (c.v1CPU == "" || c.v1Cpuset == "") {
		return nil, false
	}
	return c, true
}

// fsMagic is the type of the file system path is on; 0 when it cannot be
// told.
func fsMagic(path string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return 0
	}
	return int64(st.Type)
}

// hasCPUControllers reports whether a cgroup2 hierarchy has the cpu and
// cpuset controllers.
func hasCPUControllers(dir string) bool {
	ctrl, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	set := strings.Fields(string(ctrl))
	return has(set, "cpu") && has(set, "cpuset")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// mountedCgroups finds the hierarchies in the mount table: the first
// cgroup2 mount, the first with the cpu and cpuset controllers, and the
// first v1 mounts with each.
func mountedCgroups() *Cgroups {
	c := &Cgroups{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return c
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		left, right, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		lf, rf := strings.Fields(left), strings.Fields(right)
		if len(lf) < 5 || len(rf) < 3 {
			continue
		}
		mnt := lf[4]
		switch rf[0] {
		case "cgroup2":
			if c.unified == "" {
				c.unified = mnt
			}
			if c.v2 == "" && hasCPUControllers(mnt) {
				c.v2 = mnt
			}
		case "cgroup":
			opts := strings.Split(rf[2], ",")
			if has(opts, "cpu") && c.v1CPU == "" {
				c.v1CPU = mnt
			}
			if has(opts, "cpuset") && c.v1Cpuset == "" {
				c.v1Cpuset = mnt
			}
		}
	}
	return c
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Available reports whether CPU limits can be applied, and if not, why.
func (c *Cgroups) Available() error {
	if c.v2 != "" || (c.v1CPU != "" && c.v1Cpuset != "") {
		return nil
	}
	return &FeatureError{Feature: "cgroup cpu and cpuset controllers",
		Hint: "mount cgroup v2 with cpu and cpuset enabled, or the v1 cpu and cpuset hierarchies; or drop cpus: from the VMs"}
}

// Ensure creates the VM's cgroup with its CPU limit and cpuset, and marks
// it and its infrastructure's level as the resource's store's (markCgroup).
// Equivalent to: mkdir -p ROOT/NAME; echo "QUOTA 100000" > cpu.max; echo CPUS > cpuset.cpus
//
// The vnet/ level is shared by every infrastructure, and a destroy of
// another one removes it when it finds it empty: between making that
// level and the next, it may vanish. Then the whole path is made again.
func (c *Cgroups) Ensure(r plan.Resource) error {
	if err := c.Available(); err != nil {
		return err
	}
	var err error
	for range ensureAttempts {
		if err = c.ensureOnce(r); err == nil {
			err = c.markCgroup(r)
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return err
}

// ensureAttempts bounds how often Ensure makes a path whose levels others
// remove meanwhile.
const ensureAttempts = 5

func (c *Cgroups) ensureOnce(r plan.Resource) error {
	quota := strconv.Itoa(r.CPUMilli * cfsPeriodUS / 1000)
	if c.v2 != "" {
		if err := c.mkdirV2(r.Name); err != nil {
			return err
		}
		dir := filepath.Join(c.v2, r.Name)
		if err := writeFile(dir, "cpu.max", quota+" "+strconv.Itoa(cfsPeriodUS)); err != nil {
			return err
		}
		changed("cgroup written: %s/cpu.max", dir)
		if r.CPUs != "" {
			return writeFile(dir, "cpuset.cpus", r.CPUs)
		}
		return nil
	}
	dir := c.v1CPU
	for _, part := range strings.Split(r.Name, "/") {
		dir = filepath.Join(dir, part)
		if err := mkdirLevel(dir); err != nil {
			return err
		}
	}
	cpuDir := filepath.Join(c.v1CPU, r.Name)
	if err := writeFile(cpuDir, "cpu.cfs_period_us", strconv.Itoa(cfsPeriodUS)); err != nil {
		return err
	}
	changed("cgroup written: %s/cpu.cfs_period_us", cpuDir)
	if err := writeFile(cpuDir, "cpu.cfs_quota_us", quota); err != nil {
		return err
	}
	changed("cgroup written: %s/cpu.cfs_quota_us", cpuDir)
	if err := c.mkdirV1Cpuset(r.Name); err != nil {
		return err
	}
	if r.CPUs != "" {
		return writeFile(filepath.Join(c.v1Cpuset, r.Name), "cpuset.cpus", r.CPUs)
	}
	return nil
}

// mkdirV2 creates each level and enables cpu and cpuset for its children.
func (c *Cgroups) mkdirV2(name string) error {
	dir := c.v2
	for _, part := range strings.Split(name, "/") {
		if err := writeFile(dir, "cgroup.subtree_control", "+cpu +cpuset"); err != nil {
			return err
		}
		dir = filepath.Join(dir, part)
		if err := mkdirLevel(dir); err != nil {
			return err
		}
	}
	return nil
}

// mkdirLevel makes one level of a VM cgroup's path. Its kill point is
// marked whether or not the level was there: the shared vnet/ level exists
// while any infrastructure has a cgroup, and the points of a command must
// not depend on others.
func mkdirLevel(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cgroup: %w", err)
	}
	changed("cgroup made: %s", dir)
	return nil
}

// mkdirV1Cpuset creates each level with the parent's CPUs and memory nodes:
// a v1 cpuset starts empty and refuses tasks until both are set.
func (c *Cgroups) mkdirV1Cpuset(name string) error {
	dir := c.v1Cpuset
	for _, part := range strings.Split(name, "/") {
		parent := dir
		dir = filepath.Join(dir, part)
		if err := mkdirLevel(dir); err != nil {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if err := inheritCpuset(parent, dir, f); err != nil {
				return err
			}
			changed("cgroup written: %s/%s", dir, f) // written or not, as in mkdirLevel
		}
	}
	return nil
}

// inheritCpuset gives an empty cpuset file its parent's value.
func inheritCpuset(parent, dir, f string) error {
	if cur, _ := os.ReadFile(filepath.Join(dir, f)); strings.TrimSpace(string(cur)) != "" {
		return nil
	}
	v, err := os.ReadFile(filepath.Join(parent, f))
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return writeFile(dir, f, strings.TrimSpace(string(v)))
}

// Read returns the VM cgroup's CPU limit in thousandths of a core and its cpuset.
func (c *Cgroups) Read(name string) (milli int, cpus string, ok bool) {
	var quota, period int
	var cpusetDir string
	switch {
	case c.v2 != "":
		b, err := os.ReadFile(filepath.Join(c.v2, name, "cpu.max"))
		if err != nil {
			return 0, "", false
		}
		f := strings.Fields(string(b))
		if len(f) == 2 {
			quota, _ = strconv.Atoi(f[0]) // "max" reads as 0: no limit
			period, _ = strconv.Atoi(f[1])
		}
		cpusetDir = filepath.Join(c.v2, name)
	case c.v1CPU != "":
		q, err := os.ReadFile(filepath.Join(c.v1CPU, name, "cpu.cfs_quota_us"))
		if err != nil && !dirExists(filepath.Join(c.v1Cpuset, name)) {
			return 0, "", false
		}
		// In the cpuset hierarchy only (made or removed halfway) it reads
		// as no limit, which the next apply sets and destroy removes.
		p, _ := os.ReadFile(filepath.Join(c.v1CPU, name, "cpu.cfs_period_us"))
		quota, _ = strconv.Atoi(strings.TrimSpace(string(q)))
		period, _ = strconv.Atoi(strings.TrimSpace(string(p)))
		cpusetDir = filepath.Join(c.v1Cpuset, name)
	default:
		return 0, "", false
	}
	if quota > 0 && period > 0 {
		milli = quota * 1000 / period
	}
	b, _ := os.ReadFile(filepath.Join(cpusetDir, "cpuset.cpus"))
	return milli, NormalizeCPUList(strings.TrimSpace(string(b))), true
}

// List returns the VM cgroups under prefix (e.g. vnet/demo) in any
// hierarchy in use: a command killed between two hierarchies leaves a VM's
// cgroup in one of them only, and it must still be seen to be repaired or
// removed.
func (c *Cgroups) List(prefix string) []string {
	seen := map[string]bool{}
	var out []string
	for _, root := range c.allRoots() {
		for _, name := range subdirs(filepath.Join(root, prefix)) {
			if !seen[name] {
				seen[name] = true
				out = append(out, prefix+"/"+name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Dirs returns the directories of the cgroup name in every hierarchy
// that has it.
func (c *Cgroups) Dirs(name string) []string {
	var out []string
	for _, root := range c.allRoots() {
		if dir := filepath.Join(root, name); dirExists(dir) {
			out = append(out, dir)
		}
	}
	return out
}

// Infras returns the infrastructures with a cgroup directory (vnet/NAME)
// in any hierarchy in use.
func (c *Cgroups) Infras() []string {
	seen := map[string]bool{}
	var out []string
	for _, root := range c.allRoots() {
		for _, name := range subdirs(filepath.Join(root, "vnet")) {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// EmptyInfraDirs returns the directories vnet/INFRA that have no VM
// cgroup left, in every hierarchy: what a removal killed before its last
// rmdir leaves.
func (c *Cgroups) EmptyInfraDirs(infra string) []string {
	var out []string
	for _, root := range c.allRoots() {
		dir := filepath.Join(root, "vnet", infra)
		if dirExists(dir) && len(subdirs(dir)) == 0 {
			out = append(out, dir)
		}
	}
	return out
}

// RemoveEmptyDir removes an empty vnet/INFRA directory, and vnet/ itself
// when no other infrastructure uses it.
func (c *Cgroups) RemoveEmptyDir(dir string) error {
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cgroup rmdir %s: %w", dir, err)
	}
	_ = os.Remove(filepath.Dir(dir)) // fails while another infra uses it
	return nil
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

func subdirs(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// Enter moves a process into the VM's cgroup in every hierarchy in use.
// Equivalent to: echo PID > ROOT/NAME/cgroup.procs
func (c *Cgroups) Enter(name string, pid int) error {
	for _, root := range c.roots() {
		if err := writeFile(filepath.Join(root, name), "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// Remove kills what still runs in the VM's cgroup (the VM is powered off),
// then removes it and any parent vnet left empty.
func (c *Cgroups) Remove(name string) error {
	for _, root := range c.allRoots() {
		dir := filepath.Join(root, name)
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := killCgroup(dir); err != nil {
			return err
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cgroup rmdir %s: %w", dir, err)
		}
		killpoint.At("cgroup removed: " + dir)
		for p := filepath.Dir(name); p != "." && p != "/"; p = filepath.Dir(p) {
			_ = os.Remove(filepath.Join(root, p)) // fails while another VM or infra uses it
			changed("cgroup parent removed if empty: %s", filepath.Join(root, p))
		}
	}
	return nil
}

// allRoots is every hierarchy a VM cgroup may be in: those in use, and the
// unified one, where vnet made them if the machine had cpu and cpuset there
// then.
func (c *Cgroups) allRoots() []string {
	out := c.roots()
	if c.unified != "" && !has(out, c.unified) {
		out = append(out, c.unified)
	}
	return out
}

func (c *Cgroups) roots() []string {
	if c.v2 != "" {
		return []string{c.v2}
	}
	var out []string
	for _, r := range []string{c.v1CPU, c.v1Cpuset} {
		if r != "" {
			out = append(out, r)
		}
	}
	return out
}

func killCgroup(dir string) error {
	for attempt := 0; attempt < 50; attempt++ {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return nil
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("processes in cgroup %s do not die", dir)
}

func writeFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o644); err != nil {
		return fmt.Errorf("cgroup: write %q to %s: %w", value, filepath.Join(dir, name), err)
	}
	return nil
}

// NormalizeCPUList expands a kernel CPU list ("0-2,4") to "0,1,2,4".
func NormalizeCPUList(s string) string {
	var ids []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil {
				continue
			}
		}
		for i := a; i <= b; i++ {
			ids = append(ids, i)
		}
	}
	sort.Ints(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}
