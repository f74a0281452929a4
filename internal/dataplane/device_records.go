package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vnet-project/vnet/internal/plan"
)

// A device's record is removed when the device is given back. A TAP is
// not always there to be given back: libvirt or QEMU deletes it when the
// guest stops, and then no observation sees it and no step of a plan
// removes it. Its record would stay until the next TAP of that name;
// forgetGone removes it once the device it names is gone, after the VM
// goes (ForgetGoneDevices), with its infrastructure (a destroy) or by gc
// (DropStaleDeviceRecords). A record whose device is gone holds nothing
// to give back, so removing it is safe whatever the spec says.

// ForgetGoneDevices removes the records of the devices (plan.KindDevice
// resources) that are gone: those of VMs an apply took out whose TAPs
// their hypervisor deleted first.
func (l *Linux) ForgetGoneDevices(devices []plan.Resource) error {
	var errs []error
	for _, r := range devices {
		if r.Kind != plan.KindDevice {
			continue
		}
		if err := l.forgetGone(r.NS, r.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DropStaleDeviceRecords removes (dry: only lists) the records, of the
// namespaces within says, whose devices are gone, and describes each.
func (l *Linux) DropStaleDeviceRecords(within func(ns string) bool, dry bool) ([]string, error) {
	var out []string
	err := l.eachRecord(within, func(ns, path string, st deviceState) error {
		if !l.recordGone(ns, st) {
			return nil
		}
		out = append(out, fmt.Sprintf("record of device %s in %s, which is gone (%s)", st.Name, nsLabel(ns), path))
		if dry {
			return nil
		}
		if err := l.settleBack(st); err != nil {
			return err
		}
		return removeRecord(path)
	})
	return out, err
}

// eachRecord calls use with each record of a device, of the namespaces
// within says, and its path; it goes on past errors and returns them all.
// A file that is not a whole record of the device it is named after is
// not vnet's, and is left.
func (l *Linux) eachRecord(within func(ns string) bool, use func(ns, path string, st deviceState) error) error {
	if l.DeviceStateDir == "" {
		return nil
	}
	dirs, err := os.ReadDir(l.DeviceStateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		ns, ok := recordNS(d.Name())
		if !d.IsDir() || !ok || !within(ns) {
			continue
		}
		files, err := os.ReadDir(filepath.Join(l.DeviceStateDir, d.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			name, ok := strings.CutSuffix(f.Name(), ".json")
			if !ok || f.IsDir() {
				continue
			}
			path := filepath.Join(l.DeviceStateDir, d.Name(), f.Name())
			st, err := readDeviceState(path)
			if err != nil || st.Name != name {
				continue
			}
			if err := use(ns, path, st); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// recordNS is the namespace a directory of records is of (deviceFile).
func recordNS(dir string) (string, bool) {
	if dir == "host" {
		return plan.CurrentNS, true
	}
	return strings.CutPrefix(dir, "netns-")
}

// forgetGone removes the record of a device of ns if the device is gone.
func (l *Linux) forgetGone(ns, name string) error {
	if l.DeviceStateDir == "" {
		return nil
	}
	path, err := l.deviceFile(ns, name)
	if err != nil {
		return err
	}
	st, err := readDeviceState(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !l.recordGone(ns, st):
		return nil
	}
	if err := l.settleBack(st); err != nil {
		return err
	}
	return removeRecord(path)
}

// recordGone reports whether the device a record of ns names is gone: its
// namespace is, or the namespace has no link of its name that is this
// device; for a TAP recorded to be moved in, also not this device where it
// was made (a kill between the record and the move, or between moving it
// back and removing the record, leaves it there, for the next apply to
// move in with the record from before). When unsure, it is not.
func (l *Linux) recordGone(ns string, st deviceState) bool {
	if !netnsExists(ns) {
		return true
	}
	h, err := l.handle(ns)
	if err != nil {
		return false
	}
	link, err := h.LinkByName(st.Name)
	switch {
	case err == nil && sameDevice(st, link):
		return false
	case err != nil && !isGone(err):
		return false
	}
	if !st.MovedIn || ns == plan.CurrentNS {
		return true
	}
	here, err := l.handle(plan.CurrentNS)
	if err != nil {
		return false
	}
	link, err = here.LinkByName(st.Name)
	if err == nil {
		return !sameDevice(st, link)
	}
	return isGone(err)
}

func removeRecord(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the record of a device that is gone: %w", err)
	}
	return nil
}

// sweepTaps gives back the TAPs a command killed halfway moved into the
// infrastructure's namespaces before it marked them (ensureDevice sets the
// alias after the move): no observation sees them, and a destroy would
// delete them with the namespace. Their records, of the state from before,
// say they were moved in.
func (l *Linux) sweepTaps(infra string) ([]string, error) {
	var done []string
	prefix := plan.InfraNSPrefix(infra)
	err := l.eachRecord(func(ns string) bool { return strings.HasPrefix(ns, prefix) && netnsExists(ns) }, func(ns, _ string, st deviceState) error {
		if !st.MovedIn {
			return nil
		}
		_, link, err := l.existingLink(ns, st.Name)
		if err != nil || link == nil || !sameDevice(st, link) || strings.HasPrefix(link.Attrs().Alias, plan.AliasPrefix) {
			return nil // not there, or marked: observation sees it
		}
		if err := l.removeDevice(plan.Resource{Kind: plan.KindDevice, NS: ns, Name: st.Name}); err != nil {
			return err
		}
		done = append(done, fmt.Sprintf("TAP %s, moved into %s by a command killed before it marked it, given back", st.Name, ns))
		return nil
	})
	return done, err
}
