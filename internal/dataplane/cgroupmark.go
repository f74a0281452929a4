package dataplane

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/plan"
)

// A VM's cgroup, and its infrastructure's level vnet/<infra>, carry the
// mark of the store that made them (plan.Mark) as an extended attribute of
// the directory in every hierarchy: so gc tells them from a cgroup made by
// hand under vnet/, and a store from another's. A trusted.* attribute can
// be set by root alone, as the cgroup itself; cgroupfs keeps it in memory
// with the directory, so it goes when the directory does.
// Equivalent to: setfattr -n trusted.vnet.mark -v MARK DIR
const cgroupMarkAttr = "trusted.vnet.mark"

// markDirs sets mark on the directories (each one that exists) that do not
// carry it already.
func markDirs(dirs []string, mark string) error {
	if mark == "" {
		return nil
	}
	for _, dir := range dirs {
		if readDirMark(dir) == mark || !dirExists(dir) {
			continue
		}
		if err := unix.Setxattr(dir, cgroupMarkAttr, []byte(mark), 0); err != nil {
			if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
				return &FeatureError{Feature: "marks on cgroups (trusted.* extended attributes on cgroupfs)", Err: err,
					Hint: "Linux 3.15 or later; or drop cpus: from the VMs"}
			}
			return fmt.Errorf("cgroup: mark %s: %w", dir, err)
		}
		changed("cgroup marked: %s", dir)
	}
	return nil
}

// readDirMark is a directory's mark, "" when it has none.
func readDirMark(dir string) string {
	buf := make([]byte, 512)
	n, err := unix.Getxattr(dir, cgroupMarkAttr, buf)
	if err != nil || n <= 0 {
		return ""
	}
	return string(buf[:n])
}

// commonMark is the mark every one of the directories that exist carries,
// "" when one of them carries none or another: a command killed between
// two hierarchies leaves one marked, and the next apply marks the other.
func commonMark(dirs []string) string {
	mark, seen := "", false
	for _, dir := range dirs {
		if !dirExists(dir) {
			continue
		}
		m := readDirMark(dir)
		if seen && m != mark {
			return ""
		}
		mark, seen = m, true
	}
	return mark
}

// inRoots is name's directory in each hierarchy in use.
func (c *Cgroups) inRoots(name string) []string {
	var out []string
	for _, root := range c.roots() {
		out = append(out, filepath.Join(root, name))
	}
	return out
}

// Mark is the mark of a cgroup (a VM's, vnet/<infra>/<vm>, or an
// infrastructure's level, vnet/<infra>): "" when a directory of it in a
// hierarchy in use carries none, or they differ. One found only in a
// hierarchy no longer in use (the unified one, left from when it had the
// controllers) has that one's.
func (c *Cgroups) Mark(name string) string {
	dirs := c.inRoots(name)
	if !slices.ContainsFunc(dirs, dirExists) {
		dirs = nil
		for _, root := range c.allRoots() {
			dirs = append(dirs, filepath.Join(root, name))
		}
	}
	return commonMark(dirs)
}

// markCgroup marks a VM's cgroup and its infrastructure's level as the
// resource says, in every hierarchy in use.
func (c *Cgroups) markCgroup(r plan.Resource) error {
	if r.Mark == "" {
		return nil
	}
	if parent := filepath.Dir(r.Name); strings.Count(parent, "/") == 1 { // vnet/<infra>/<vm>
		if err := markDirs(c.inRoots(parent), r.Mark); err != nil {
			return err
		}
	}
	return markDirs(c.inRoots(r.Name), r.Mark)
}

// MarkCgroup marks a VM's cgroup (vnet/<infra>/<vm>) and its
// infrastructure's level, or that level alone (vnet/<infra>), in every
// hierarchy in use: what recover --adopt does to take them over.
func (l *Linux) MarkCgroup(name, mark string) error {
	return l.cgroups().markCgroup(plan.Resource{Kind: plan.KindCgroup, Name: name, Mark: mark})
}

// InfraCgroups lists an infrastructure's cgroups with their marks: each
// VM's, and its level vnet/<infra> when that exists.
func (l *Linux) InfraCgroups(infra string) []NamedCgroup {
	var out []NamedCgroup
	level := "vnet/" + infra
	if len(l.cgroups().Dirs(level)) > 0 {
		out = append(out, NamedCgroup{Name: level, Mark: l.cgroups().Mark(level)})
	}
	for _, name := range l.cgroups().List(level) {
		out = append(out, NamedCgroup{Name: name, Mark: l.cgroups().Mark(name)})
	}
	return out
}

// NamedCgroup is a cgroup under vnet/ with its mark ("" when none).
type NamedCgroup struct {
	Name string
	Mark string
}
