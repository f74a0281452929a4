package dataplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/atomicfile"
	"github.com/vnet-project/vnet/internal/plan"
)

// A device (plan.KindDevice) is a link vnet did not make: a real NIC, a
// hypervisor's TAP. vnet makes it a port of a bridge and hangs its line
// rate or shaper on it; when the resource goes, the device gets back the
// master, MTU, alias, up state and root and ingress qdiscs it had before
// vnet first changed it. That state is written to a file (DeviceStateDir)
// before the first change and removed after the device is given back, so
// a command killed at any point in between leaves what the next destroy
// needs: a device whose alias marks it as used (the first change) always
// has its file.

// deviceState is a device as vnet found it.
type deviceState struct {
	Index  int    `json:"ifindex"` // tells the device from a later one of the same name
	Name   string `json:"name"`
	MTU    int    `json:"mtu"`
	Master string `json:"master,omitempty"`
	Alias  string `json:"alias,omitempty"`
	Up     bool   `json:"up"`
	// Root is the root qdisc's kind ("noqueue", "mq", "fq_codel", ...),
	// RootHandle its handle and RootParams its settings where vnet knows
	// how to make that kind again (rootQdiscKinds).
	Root       string          `json:"root,omitempty"`
	RootHandle uint32          `json:"root_handle,omitempty"`
	RootParams json.RawMessage `json:"root_params,omitempty"`
	Ingress    bool            `json:"ingress"` // it had an ingress or clsact qdisc of its own
	// MovedIn says vnet moved the device (a TAP, on one machine) into the
	// namespace from this process's own: giving it back moves it back.
	MovedIn bool `json:"moved_in,omitempty"`
	// MAC is the device's hardware address: a TAP moved in keeps it, while
	// its index may change with the move (sameDevice).
	MAC string `json:"mac,omitempty"`
}

// sameDevice reports whether a record is of this very link: the same
// index, or a TAP moved in that has the recorded address, whose record a
// kill left with the index it had before the move.
func sameDevice(st deviceState, link netlink.Link) bool {
	a := link.Attrs()
	return st.Index == a.Index || st.MovedIn && st.MAC != "" && st.MAC == a.HardwareAddr.String()
}

// deviceFile is where a device's state is kept: one directory per
// namespace, one file per device.
func (l *Linux) deviceFile(ns, name string) (string, error) {
	if l.DeviceStateDir == "" {
		return "", errors.New("no directory to record the state of real devices in (Linux.DeviceStateDir)")
	}
	dir := "host"
	if ns != plan.CurrentNS {
		dir = "netns-" + strings.ReplaceAll(ns, "/", "_")
	}
	return filepath.Join(l.DeviceStateDir, dir, name+".json"), nil
}

// ensureDevice makes an existing link a port of the resource's bridge,
// with the resource's MTU, marked by its alias and up.
// Equivalent to: ip link set NAME alias A mtu MTU master BRIDGE up
func (l *Linux) ensureDevice(r plan.Resource) error {
	if err := l.takeTap(r); err != nil {
		return err
	}
	h, link, err := l.linkIn(r.NS, r.Name)
	if err != nil {
		return fmt.Errorf("device %s: %w", r.Name, err)
	}
	if err := l.recordDevice(h, r.NS, link); err != nil {
		return err
	}
	// The alias first: from here on observation sees the device as used.
	if err := setLinkAttrs(h, link, "", 0, ownerAlias(r.Owner), link.Attrs().Flags&net.FlagUp != 0); err != nil {
		return err
	}
	if err := setLinkAttrs(h, link, "", r.MTU, ownerAlias(r.Owner), true); err != nil {
		return err
	}
	if err := setMaster(h, link, r.Link); err != nil || r.Link == "" {
		return err
	}
	// A teamed uplink: isolated, nothing flooded to it (steering decides).
	// Taking it out of the bridge on give-back drops these port flags.
	if newPort(link) && !r.Isolate {
		return nil
	}
	if isolated, err := l.linkIsolated(r.NS, link.Attrs().Index); err != nil || isolated != r.Isolate {
		return setUplinkPort(h, r.NS, link, r.Isolate)
	}
	return nil
}

// takeTap moves a TAP that a VM attaches on one machine from this
// process's namespace, where QEMU or libvirt made it, into the lab host's
// namespace that holds its switch; the guest keeps the open TAP across the
// move. The record, written first, notes the move, so that giving the TAP
// back moves it back.
// Equivalent to: ip link set NAME netns NS
func (l *Linux) takeTap(r plan.Resource) error {
	if r.NS == plan.CurrentNS {
		return nil
	}
	h, err := l.handle(r.NS)
	if err != nil {
		return err
	}
	if _, err := h.LinkByName(r.Name); err == nil {
		return nil
	}
	here, err := l.handle(plan.CurrentNS)
	if err != nil {
		return err
	}
	link, err := here.LinkByName(r.Name)
	if tt, ok := link.(*netlink.Tuntap); err != nil || !ok || tt.Mode != netlink.TUNTAP_MODE_TAP {
		return nil // not a TAP of this namespace either: ensureDevice says what is missing
	}
	path, err := l.deviceFile(r.NS, r.Name)
	if err != nil {
		return err
	}
	// A record of this TAP moved in already is of the state from before:
	// a give-back killed once the TAP was back, before its record went,
	// left the TAP as the record does not (down, without its qdisc).
	st, err := readDeviceState(path)
	if err != nil || !st.MovedIn || !sameDevice(st, link) {
		if st, err = readDevice(here, link); err != nil {
			return err
		}
		st.MovedIn = true
	}
	st.Index = link.Attrs().Index
	if err := writeDeviceState(path, st); err != nil {
		return err
	}
	changed("TAP %s recorded, not yet moved into %s", r.Name, r.NS)
	target, err := netns.GetFromPath(filepath.Join(NetnsDir, r.NS))
	if err != nil {
		return fmt.Errorf("TAP %s: namespace %s: %w", r.Name, r.NS, err)
	}
	defer target.Close()
	if err := here.LinkSetNsFd(link, int(target)); err != nil {
		return fmt.Errorf("move TAP %s into %s: %w", r.Name, r.NS, err)
	}
	changed("TAP %s moved into %s, its record not yet updated", r.Name, r.NS)
	moved, err := h.LinkByName(r.Name)
	if err != nil {
		return fmt.Errorf("TAP %s moved into %s: %w", r.Name, r.NS, err)
	}
	if moved.Attrs().Index == st.Index {
		return nil
	}
	st.Index = moved.Attrs().Index // the namespace had the index taken
	return writeDeviceState(path, st)
}

// moveBack returns a device that vnet moved in to this process's
// namespace. The move takes the device down, and with it its root qdisc:
// it is brought up again there, with the root it had, if it was up.
// Equivalent to: ip -n NS link set NAME netns 1; ip link set NAME up
func (l *Linux) moveBack(h *netlink.Handle, link netlink.Link, st deviceState) error {
	if !st.MovedIn {
		return nil
	}
	name := link.Attrs().Name
	own, err := netns.GetFromPath("/proc/self/ns/net")
	if err != nil {
		return err
	}
	defer own.Close()
	if err := h.LinkSetNsFd(link, int(own)); err != nil {
		return fmt.Errorf("move %s back: %w", name, err)
	}
	changed("TAP %s moved back, its record not yet removed", name)
	return l.settleBack(st)
}

// settleBack brings a TAP moved back to this process's namespace up, with
// the root qdisc it had, if it was up when vnet took it: the move took it
// down. A TAP of that name that is not the recorded one is left alone.
// Equivalent to: ip link set NAME up
func (l *Linux) settleBack(st deviceState) error {
	if !st.MovedIn || !st.Up {
		return nil
	}
	here, err := l.handle(plan.CurrentNS)
	if err != nil {
		return err
	}
	back, err := here.LinkByName(st.Name)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("TAP %s moved back: %w", st.Name, err)
	}
	if !sameDevice(st, back) {
		return nil
	}
	if back.Attrs().Flags&net.FlagUp == 0 {
		if err := here.LinkSetUp(back); err != nil {
			return fmt.Errorf("set %s up: %w", st.Name, err)
		}
	}
	qs, err := here.QdiscList(back)
	if err != nil {
		return fmt.Errorf("tc qdisc show dev %s: %w", st.Name, err)
	}
	return ensureRootQdisc(here, back, st, qs)
}

func writeDeviceState(path string, st deviceState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileSynced(path, append(data, '\n'))
}

// recordDevice writes the device's state unless a record of this very
// device exists: then vnet changed it already and the record holds the
// state from before.
func (l *Linux) recordDevice(h *netlink.Handle, ns string, link netlink.Link) error {
	path, err := l.deviceFile(ns, link.Attrs().Name)
	if err != nil {
		return err
	}
	if old, err := readDeviceState(path); err == nil && sameDevice(old, link) {
		return nil
	}
	st, err := readDevice(h, link)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileSynced(path, append(data, '\n'))
}

// PrepareDevices writes the state of every device the actions will change
// first that has no record yet, before any of them runs, as each step's
// recordDevice would: with one qdisc dump per namespace rather than one per
// device (the kernel answers each with every link's), and one sync of the
// file system for all the files rather than two per device. A step then
// finds its device's record and writes none; one whose device could not be
// found here records it, or fails, on its own. A device the apply does not
// get to keeps its record, of the state it still has, for the next apply.
func (l *Linux) PrepareDevices(actions []plan.Action) error {
	byNS := map[string][]string{}
	for _, a := range actions {
		if a.New != nil && a.New.Kind == plan.KindDevice && a.Op != plan.OpDelete {
			byNS[a.New.NS] = append(byNS[a.New.NS], a.New.Name)
		}
	}
	var files []pendingFile
	for ns, names := range byNS {
		f, err := l.deviceRecords(ns, names)
		if err != nil {
			return err
		}
		files = append(files, f...)
	}
	return writeFilesSynced(files)
}

// DropUnusedDeviceRecords removes, after a failed apply's rollback, the
// records PrepareDevices wrote of devices the apply never got to change
// (their alias does not mark them as vnet's): nothing else would remove
// them.
func (l *Linux) DropUnusedDeviceRecords(actions []plan.Action) {
	for _, a := range actions {
		if a.New == nil || a.New.Kind != plan.KindDevice || a.Op == plan.OpDelete {
			continue
		}
		h, err := l.handle(a.New.NS)
		if err != nil {
			continue
		}
		link, err := h.LinkByName(a.New.Name)
		if err != nil || strings.HasPrefix(link.Attrs().Alias, plan.AliasPrefix) {
			continue
		}
		if path, err := l.deviceFile(a.New.NS, a.New.Name); err == nil {
			if st, err := readDeviceState(path); err == nil && sameDevice(st, link) {
				_ = os.Remove(path)
			}
		}
	}
}

// pendingFile is a file to write whole: data for path.
type pendingFile struct {
	path string
	data []byte
}

// deviceRecords returns the records to write of the named devices of ns
// that have none of their own.
func (l *Linux) deviceRecords(ns string, names []string) ([]pendingFile, error) {
	h, err := l.handle(ns)
	if err != nil {
		return nil, nil // its steps fail, or record, on their own
	}
	var links []netlink.Link
	var paths []string
	for _, name := range names {
		link, err := h.LinkByName(name)
		if err != nil {
			continue // its step says why
		}
		path, err := l.deviceFile(ns, name)
		if err != nil {
			return nil, err
		}
		if old, err := readDeviceState(path); err == nil && sameDevice(old, link) {
			continue
		}
		links, paths = append(links, link), append(paths, path)
	}
	if len(links) == 0 {
		return nil, nil
	}
	qdiscs, err := l.qdiscsOf(ns, links)
	if err != nil {
		return nil, err
	}
	var out []pendingFile
	for i, link := range links {
		path := paths[i]
		st, err := deviceStateOf(h, link, qdiscs[link.Attrs().Index])
		if err != nil {
			return nil, err
		}
		data, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return nil, err
		}
		out = append(out, pendingFile{path: path, data: append(data, '\n')})
	}
	return out, nil
}

func readDevice(h *netlink.Handle, link netlink.Link) (deviceState, error) {
	qs, err := h.QdiscList(link)
	if err != nil {
		return deviceState{}, fmt.Errorf("tc qdisc show dev %s: %w", link.Attrs().Name, err)
	}
	return deviceStateOf(h, link, qs)
}

// deviceStateOf is the state of a device with the qdiscs qs.
func deviceStateOf(h *netlink.Handle, link netlink.Link, qs []netlink.Qdisc) (deviceState, error) {
	a := link.Attrs()
	st := deviceState{Index: a.Index, Name: a.Name, MTU: a.MTU, Alias: a.Alias, Up: a.Flags&net.FlagUp != 0, MAC: a.HardwareAddr.String()}
	if a.MasterIndex != 0 {
		m, err := h.LinkByIndex(a.MasterIndex)
		if err != nil {
			return st, fmt.Errorf("master of %s: %w", a.Name, err)
		}
		st.Master = m.Attrs().Name
	}
	for _, q := range qs {
		switch q.Attrs().Parent {
		case netlink.HANDLE_ROOT:
			st.Root, st.RootHandle = q.Type(), q.Attrs().Handle
			if _, ok := rootQdiscKinds[q.Type()]; ok {
				st.RootParams, _ = json.Marshal(q)
			}
		case netlink.HANDLE_CLSACT: // the ingress qdisc's parent too
			st.Ingress = true
		}
	}
	return st, nil
}

// rootQdiscKinds are the root qdiscs vnet can make again with the settings
// it read, should deleting its own not bring back the one the device had.
// Others are made again by kind alone, which is all of them for a kind
// without settings (pfifo_fast, mq).
var rootQdiscKinds = map[string]func() netlink.Qdisc{
	"fq_codel": func() netlink.Qdisc { return &netlink.FqCodel{} },
	"fq":       func() netlink.Qdisc { return &netlink.Fq{} },
	"sfq":      func() netlink.Qdisc { return &netlink.Sfq{} },
	"tbf":      func() netlink.Qdisc { return &netlink.Tbf{} },
}

func readDeviceState(path string) (deviceState, error) {
	var st deviceState
	data, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// writeFileSynced writes a file whole or not at all (atomicfile.Write),
// making its directory first.
func writeFileSynced(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}

// writeFilesSynced writes each file whole or not at all, with one sync of
// the file system for all of them (atomicfile.WriteAll), making their
// directories first.
func writeFilesSynced(files []pendingFile) error {
	all := make([]atomicfile.File, 0, len(files))
	dirs := map[string]bool{}
	for _, f := range files {
		if dir := filepath.Dir(f.path); !dirs[dir] {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			dirs[dir] = true
		}
		all = append(all, atomicfile.File{Path: f.path, Data: f.data, Perm: 0o600})
	}
	return atomicfile.WriteAll(all)
}

// removeDevice gives a device back as it was found. Without a record (lost
// with its state directory) it is taken out of its bridge, its alias
// cleared and vnet's qdiscs deleted, which is what vnet changes of a
// device that had none of these.
// Equivalent to: ip link set NAME nomaster; tc qdisc del dev NAME root|clsact; ip link set NAME mtu M alias A up|down
func (l *Linux) removeDevice(r plan.Resource) error {
	h, link, err := l.existingLink(r.NS, r.Name)
	if err != nil {
		return err
	}
	if link == nil {
		return l.forgetGone(r.NS, r.Name)
	}
	g, err := l.giveBackOf(r, link)
	if err != nil {
		return err
	}
	if err := restoreDevice(h, link, g.st); err != nil {
		return fmt.Errorf("give back %s: %w", r.Name, err)
	}
	if err := l.moveBack(h, link, g.st); err != nil {
		return err
	}
	return g.forget()
}

// givenBack is a device to give back: the state it gets back, and the
// file that recorded it.
type givenBack struct {
	st   deviceState
	path string
}

// giveBackOf reads what the device gets back: its record, or, without
// one of this very device, what it has now.
func (l *Linux) giveBackOf(r plan.Resource, link netlink.Link) (givenBack, error) {
	path, err := l.deviceFile(r.NS, r.Name)
	if err != nil {
		return givenBack{}, err
	}
	st, err := readDeviceState(path)
	switch {
	case errors.Is(err, os.ErrNotExist) || (err == nil && !sameDevice(st, link)):
		a := link.Attrs()
		st = deviceState{Index: a.Index, Name: a.Name, MTU: a.MTU, Up: a.Flags&net.FlagUp != 0}
	case err != nil:
		return givenBack{}, err
	}
	return givenBack{st: st, path: path}, nil
}

// forget removes the record of a device given back.
func (g givenBack) forget() error {
	if err := os.Remove(g.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func restoreDevice(h *netlink.Handle, link netlink.Link, st deviceState) error {
	link, err := detachDevice(h, link, st)
	if err != nil {
		return err
	}
	qs, err := h.QdiscList(link)
	if err != nil {
		return fmt.Errorf("tc qdisc show dev %s: %w", link.Attrs().Name, err)
	}
	kept, err := deleteOwnQdiscs(h, link, st, qs)
	if err != nil {
		return err
	}
	if !kept {
		if qs, err = h.QdiscList(link); err != nil {
			return fmt.Errorf("tc qdisc show dev %s: %w", link.Attrs().Name, err)
		}
		if err := ensureRootQdisc(h, link, st, qs); err != nil {
			return err
		}
	}
	return resetDevice(h, link, st)
}

// detachDevice takes the device out of vnet's bridge (back into the one it
// had, if any) and down if it was; it returns the link as it is then.
func detachDevice(h *netlink.Handle, link netlink.Link, st deviceState) (netlink.Link, error) {
	if err := setMaster(h, link, st.Master); err != nil {
		return link, err
	}
	if !st.Up && link.Attrs().Flags&net.FlagUp != 0 {
		// Down before its qdiscs go: a device that is down gets no
		// default qdisc in place of the deleted one, as it had none.
		if err := h.LinkSetDown(link); err != nil {
			return link, fmt.Errorf("set %s down: %w", link.Attrs().Name, err)
		}
		return h.LinkByIndex(link.Attrs().Index)
	}
	return link, nil
}

// resetDevice gives the device back its MTU, up state and, last, its
// alias: until the alias goes, observation sees the device as used and a
// later destroy finishes what this one could not.
func resetDevice(h *netlink.Handle, link netlink.Link, st deviceState) error {
	if err := setLinkAttrs(h, link, "", st.MTU, link.Attrs().Alias, st.Up); err != nil {
		return err
	}
	if link.Attrs().Alias != st.Alias {
		if err := h.LinkSetAlias(link, st.Alias); err != nil {
			return fmt.Errorf("set %s alias: %w", link.Attrs().Name, err)
		}
	}
	return nil
}

// deleteOwnQdiscs deletes, of the device's qdiscs qs, what vnet put at its
// root and ingress, so the kernel attaches its default root again. It
// reports whether the recorded root is still there (or none was
// recorded): else ensureRootQdisc must look at the root the kernel put.
func deleteOwnQdiscs(h *netlink.Handle, link netlink.Link, st deviceState, qs []netlink.Qdisc) (kept bool, err error) {
	name := link.Attrs().Name
	kept = st.Root == ""
	for _, q := range qs {
		a := q.Attrs()
		if a.LinkIndex != link.Attrs().Index {
			continue
		}
		switch {
		case a.Parent == netlink.HANDLE_ROOT && (q.Type() != st.Root || a.Handle != st.RootHandle):
		case a.Parent == netlink.HANDLE_CLSACT && !st.Ingress:
		default:
			if a.Parent == netlink.HANDLE_ROOT {
				kept = true
			}
			continue
		}
		if err := h.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
			return false, fmt.Errorf("tc qdisc del dev %s %s: %w", name, netlink.HandleStr(a.Parent), err)
		}
	}
	return kept, nil
}

// ensureRootQdisc makes the recorded root again, of the device's qdiscs qs
// now, where the kernel's default is not it.
func ensureRootQdisc(h *netlink.Handle, link netlink.Link, st deviceState, qs []netlink.Qdisc) error {
	name := link.Attrs().Name
	if st.Root == "" {
		return nil
	}
	for _, q := range qs {
		if q.Attrs().LinkIndex == link.Attrs().Index && q.Attrs().Parent == netlink.HANDLE_ROOT && q.Type() == st.Root {
			return nil
		}
	}
	var q netlink.Qdisc = &netlink.GenericQdisc{QdiscType: st.Root}
	if newQdisc, ok := rootQdiscKinds[st.Root]; ok && len(st.RootParams) > 0 {
		q = newQdisc()
		if err := json.Unmarshal(st.RootParams, q); err != nil {
			return fmt.Errorf("recorded root qdisc of %s: %w", name, err)
		}
	}
	q.Attrs().LinkIndex = link.Attrs().Index
	q.Attrs().Parent, q.Attrs().Handle = netlink.HANDLE_ROOT, st.RootHandle
	if err := h.QdiscReplace(q); err != nil {
		return fmt.Errorf("tc qdisc replace dev %s root %s: %w (vnet could not make the device's own root qdisc again; set it by hand)", name, st.Root, err)
	}
	return nil
}

// giveBackDevices gives back devices of one namespace, as removeDevice
// would each, reading the qdiscs of the namespace once before (and once
// more after, if a recorded root went) rather than once or twice per
// device: the kernel answers each read with every link's qdiscs, which
// made giving back the thousands of TAPs of a hypervisor's destroy take
// minutes. The devices are all taken out of their bridges and their
// qdiscs restored before the first one's MTU, up state and alias are: a
// device keeps its alias, and so its mark as used, until it is given
// back. It returns an error per action that failed.
func (l *Linux) giveBackDevices(ns string, actions []plan.Action) []error {
	var errs []error
	one := func() []error {
		for _, a := range actions {
			if err := l.Execute(a); err != nil {
				errs = append(errs, err)
			}
		}
		return errs
	}
	if len(actions) < 2 || !netnsExists(ns) {
		return one()
	}
	h, err := l.handle(ns)
	if err != nil {
		return one()
	}
	before, err := h.QdiscList(nil)
	if err != nil {
		return one()
	}
	fail := func(a plan.Action, err error) {
		errs = append(errs, fmt.Errorf("%s %s: %w", a.Op, a.Subject(), err))
	}
	type device struct {
		action plan.Action
		link   netlink.Link
		g      givenBack
		kept   bool
	}
	byIndex := qdiscsByLink(before)
	var devices []device
	recheck := false
	for _, a := range actions {
		_, link, err := l.existingLink(ns, a.Old.Name)
		if err != nil {
			fail(a, err)
			continue
		}
		if link == nil {
			if err := l.forgetGone(ns, a.Old.Name); err != nil {
				fail(a, err)
				continue
			}
			killpointDone(a)
			continue
		}
		g, err := l.giveBackOf(*a.Old, link)
		if err != nil {
			fail(a, err)
			continue
		}
		if link, err = detachDevice(h, link, g.st); err != nil {
			fail(a, fmt.Errorf("give back %s: %w", a.Old.Name, err))
			continue
		}
		kept, err := deleteOwnQdiscs(h, link, g.st, byIndex[link.Attrs().Index])
		if err != nil {
			fail(a, fmt.Errorf("give back %s: %w", a.Old.Name, err))
			continue
		}
		recheck = recheck || !kept
		devices = append(devices, device{a, link, g, kept})
	}
	if recheck {
		after, listErr := h.QdiscList(nil)
		byIndex = qdiscsByLink(after)
		for i := range devices {
			d := &devices[i]
			if d.kept {
				continue
			}
			err := listErr
			if err != nil {
				err = fmt.Errorf("tc -n %s qdisc show: %w", ns, err)
			} else {
				err = ensureRootQdisc(h, d.link, d.g.st, byIndex[d.link.Attrs().Index])
			}
			if err != nil {
				fail(d.action, fmt.Errorf("give back %s: %w", d.action.Old.Name, err))
				continue
			}
			d.kept = true
		}
	}
	for _, d := range devices {
		if !d.kept {
			continue
		}
		if err := resetDevice(h, d.link, d.g.st); err != nil {
			fail(d.action, fmt.Errorf("give back %s: %w", d.action.Old.Name, err))
			continue
		}
		if err := l.moveBack(h, d.link, d.g.st); err != nil {
			fail(d.action, err)
			continue
		}
		if err := d.g.forget(); err != nil {
			fail(d.action, err)
			continue
		}
		killpointDone(d.action)
	}
	return errs
}

// qdiscsByLink indexes qdiscs by the index of their link.
func qdiscsByLink(qs []netlink.Qdisc) map[int][]netlink.Qdisc {
	by := make(map[int][]netlink.Qdisc, len(qs))
	for _, q := range qs {
		by[q.Attrs().LinkIndex] = append(by[q.Attrs().LinkIndex], q)
	}
	return by
}

// observeDevice reads a device vnet uses as a resource; isolated is its
// bridge port's flag.
func observeDevice(link netlink.Link, ns, master, owner string, isolated bool) plan.Resource {
	return plan.Resource{Kind: plan.KindDevice, NS: ns, Name: link.Attrs().Name, Link: master, MTU: link.Attrs().MTU,
		Isolate: master != "" && isolated, Owner: owner}
}

// HostFacts reads what a host's part of a spec names of the machine: the
// links in its namespace (type, master, alias, speed, and whether the
// machine's own traffic uses them) and which of the namespaces exist
// (plan.CheckHostFacts).
func (l *Linux) HostFacts(ns string, links, namespaces []string, underlay string) (plan.HostFacts, error) {
	f := plan.HostFacts{Links: map[string]plan.LinkFacts{}, Netns: map[string]bool{}}
	h, err := l.handle(ns)
	if err != nil {
		return f, err
	}
	named := map[int]string{} // index -> name, of the links found
	for _, name := range links {
		link, err := h.LinkByName(name)
		if isGone(err) {
			continue
		}
		if err != nil {
			return f, fmt.Errorf("ip link show %s: %w", name, err)
		}
		a := link.Attrs()
		lf := plan.LinkFacts{Type: link.Type(), Alias: a.Alias}
		if tt, ok := link.(*netlink.Tuntap); ok {
			lf.Tap = tt.Mode == netlink.TUNTAP_MODE_TAP
		}
		if a.MasterIndex != 0 {
			if m, err := h.LinkByIndex(a.MasterIndex); err == nil {
				lf.Master, lf.MasterAlias = m.Attrs().Name, m.Attrs().Alias
			}
		}
		lf.Speed = linkSpeed(ns, name)
		f.Links[name] = lf
		named[a.Index] = name
	}
	for _, n := range namespaces {
		f.Netns[n] = netnsExists(n)
	}
	ip := net.ParseIP(underlay)
	if ip == nil && len(named) == 0 {
		return f, nil
	}
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return f, fmt.Errorf("ip addr show: %w", err)
	}
	for _, a := range addrs {
		if ip != nil && a.IP.Equal(ip) {
			if link, err := h.LinkByIndex(a.LinkIndex); err == nil {
				f.UnderlayLink = link.Attrs().Name
			}
		}
		if name, ok := named[a.LinkIndex]; ok && a.Scope == unix.RT_SCOPE_UNIVERSE {
			lf := f.Links[name]
			lf.Addresses = append(lf.Addresses, a.IPNet.String())
			f.Links[name] = lf
		}
	}
	if len(named) > 0 {
		if err := markDefaultRoutes(h, named, f.Links); err != nil {
			return f, err
		}
	}
	return f, nil
}

// markDefaultRoutes sets DefaultRoute on the links (named, by index) that
// a default route of the main table leaves through, by itself or as one
// of its next hops.
// Equivalent to: ip route show default; ip -6 route show default
func markDefaultRoutes(h *netlink.Handle, named map[int]string, links map[string]plan.LinkFacts) error {
	routes, err := h.RouteList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("ip route show: %w", err)
	}
	mark := func(index int) {
		if name, ok := named[index]; ok {
			lf := links[name]
			lf.DefaultRoute = true
			links[name] = lf
		}
	}
	for _, r := range routes {
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		mark(r.LinkIndex)
		for _, nh := range r.MultiPath {
			mark(nh.LinkIndex)
		}
	}
	return nil
}

// linkSpeed is the link's speed in bit/s as the driver reports it, 0 when
// it reports none (dummy, virtio without a speed set) or an unknown one.
// Equivalent to: ethtool LINK | grep Speed
func linkSpeed(ns, name string) uint64 {
	var mbit uint32
	_ = inNS(ns, func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		var cmd ethtool.EthtoolCmd
		mbit, err = e.CmdGet(&cmd, name)
		return err
	})
	if mbit == 0 || mbit == math.MaxUint32 || mbit == math.MaxUint16 {
		return 0
	}
	return uint64(mbit) * 1_000_000
}
