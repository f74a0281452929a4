package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/nft"
	"github.com/vnet-project/vnet/internal/dataplane/rtnl"
	"github.com/vnet-project/vnet/internal/killpoint"
	"github.com/vnet-project/vnet/internal/plan"
)

// Linux realizes plan actions on this machine's kernel. Its methods may be
// called from several goroutines.
type Linux struct {
	mu      sync.Mutex
	handles map[string]*nsHandle
	// seen is each namespace's mark as this dataplane last read or set
	// it, with the namespace's ID (see MarkedNamespaceIDs).
	seen map[string]seenMark
	// cgroupDriver is the cgroup driver, detected on first use (cgroups): most
	// changes touch no cgroup, and detecting may read the mount table,
	// which grows with the containers.
	cgroupDriver *Cgroups
	cgroupOnce   sync.Once
	// HostNS, when set, is the namespace that holds a host model's
	// host-level objects (plan.CurrentNS for the one vnet runs in):
	// Observe reads there the links whose alias names the infrastructure
	// (plan.OwnedBy).
	HostNS string
	// OnlyStore, when set, makes Observe see only namespaces marked by that
	// store, with their cgroups: several agents on one machine (a test
	// cluster) share /run/netns and must not see each other's VMs.
	OnlyStore string
	// WithoutBrNetfilter makes the probe find no br_netfilter, whatever the
	// kernel has: how tests see what an apply does on a kernel built
	// without it.
	WithoutBrNetfilter bool
	// WithoutPortPrograms makes port policies nftables rules, as on a
	// kernel that does not run vnet's port programs (see PortPrograms).
	WithoutPortPrograms bool
	// DeviceStateDir is where the state of real devices and TAPs is kept
	// from before vnet first changed them, until they are given back
	// (plan.KindDevice).
	DeviceStateDir string

	fw *nft.Firewalls
	// progs are the namespaces' port programs (portPrograms).
	progs nsPrograms
	// probed is what earlier probes found the kernel has (see Probe).
	probed probeSet
}

// nsHandle reaches one namespace: the library's handle, and a route socket
// made in the namespace for the requests the library has no call for.
type nsHandle struct {
	*netlink.Handle
	route *nl.SocketHandle

	// sys is the namespace's /proc/sys/net, kept open for the command
	// (procSysNet says why); used from a thread in the namespace.
	sysMu sync.Mutex
	sys   procSysNet

	// ino is the namespace's inode when the handle was opened: a name can
	// come to stand for another namespace (forgetReplaced).
	ino uint64
	// id is the namespace's ID (see nsGetID), 0 when the kernel tells none.
	id uint64
}

// New returns a dataplane for this machine. It fails with ErrNotRoot when
// the process cannot change the network.
func New() (*Linux, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if err := captureHostNS(); err != nil {
		return nil, err
	}
	return &Linux{handles: map[string]*nsHandle{}, fw: nft.New(openNS, hostConntrackOff)}, nil
}

// cgroups is the cgroup driver, detected when first asked for.
func (l *Linux) cgroups() *Cgroups {
	l.cgroupOnce.Do(func() { l.cgroupDriver = DetectCgroups() })
	return l.cgroupDriver
}

// Close releases the netlink handles.
func (l *Linux) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, h := range l.handles {
		h.close()
		delete(l.handles, name)
	}
	l.fw.Close()
	l.progs.close()
}

// handle returns the namespace's netlink handle, opened once per command.
func (l *Linux) handle(ns string) (*netlink.Handle, error) {
	h, err := l.nsHandle(ns)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}

func (l *Linux) nsHandle(ns string) (*nsHandle, error) {
	l.mu.Lock()
	h, ok := l.handles[ns]
	l.mu.Unlock()
	if ok {
		return h, nil
	}
	h, err := openNSHandle(ns)
	if err != nil {
		return nil, err
	}
	return l.keepHandle(ns, h), nil
}

// keepHandle keeps a namespace's handle for the command, unless another
// goroutine opened one meanwhile; it returns the one kept.
func (l *Linux) keepHandle(ns string, h *nsHandle) *nsHandle {
	l.mu.Lock()
	defer l.mu.Unlock()
	if had, ok := l.handles[ns]; ok {
		h.close()
		return had
	}
	l.handles[ns] = h
	return h
}

// inNSOpening runs fn in the namespace, as inNS does, and opens the
// namespace's handle in the same entry when it is not open yet: entering
// a namespace costs more than most of what is done there.
func (l *Linux) inNSOpening(ns string, fn func() error) error {
	l.mu.Lock()
	_, open := l.handles[ns]
	l.mu.Unlock()
	if open {
		return inNS(ns, fn)
	}
	var h *nsHandle
	err := inNS(ns, func() (err error) {
		if h, err = nsHandleHere(ns); err != nil {
			return err
		}
		return fn()
	})
	if h != nil {
		l.keepHandle(ns, h)
	}
	return err
}

// routeSocket returns a route netlink socket inside the namespace.
func (l *Linux) routeSocket(ns string) (*nl.SocketHandle, error) {
	h, err := l.nsHandle(ns)
	if err != nil {
		return nil, err
	}
	return h.route, nil
}

// openNSHandle opens the handle and the socket of a namespace, entering it
// once. Only route netlink: vnet uses no other family.
func openNSHandle(ns string) (*nsHandle, error) {
	var h *nsHandle
	err := inNS(ns, func() (err error) {
		h, err = nsHandleHere(ns)
		return err
	})
	return h, err
}

// nsHandleHere opens the handle and the socket of the namespace the
// calling thread is in (ns names it in errors).
func nsHandleHere(ns string) (*nsHandle, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", ns, err)
	}
	s, err := nl.GetNetlinkSocketAt(netns.None(), netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("netlink in %s: %w", ns, err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		h.Close()
		s.Close()
		return nil, fmt.Errorf("netns %s: %w", ns, err)
	}
	return &nsHandle{Handle: h, route: &nl.SocketHandle{Socket: s}, ino: st.Ino, id: threadNSID()}, nil
}

// forgetReplaced drops the handles of named namespaces that are gone, or
// whose name now stands for another namespace. A dataplane that outlives
// one command (an agent's) would otherwise go on changing, through its
// handle, a namespace deleted behind its back: the handle keeps it alive
// and out of sight.
func (l *Linux) forgetReplaced() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, h := range l.handles {
		if name == plan.CurrentNS {
			continue
		}
		if _, ok := anonNS(name); ok {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(NetnsDir, name), &st); err == nil && st.Ino == h.ino {
			continue
		}
		h.close()
		l.fw.CloseSocket(name)
		delete(l.handles, name)
	}
	l.forgetSeenGone()
}

func (h *nsHandle) close() {
	h.sysMu.Lock()
	h.sys.close()
	h.sysMu.Unlock()
	h.Handle.Close()
	h.route.Close()
}

func (l *Linux) forget(ns string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.handles[ns]; ok {
		h.close()
		delete(l.handles, ns)
	}
	l.fw.Forget(ns)
}

// Execute carries out one action.
func (l *Linux) Execute(a plan.Action) error {
	var err error
	switch a.Op {
	case plan.OpCreate:
		err = l.ensure(*a.New)
	case plan.OpModify:
		// Every ensure converges an existing object to the resource, and
		// plan only changes in place the kinds whose ensure can.
		err = l.ensure(*a.New)
	case plan.OpReplace:
		if err = l.remove(*a.Old); err == nil {
			err = l.ensure(*a.New)
		}
	case plan.OpDelete:
		err = l.remove(*a.Old)
	default:
		err = fmt.Errorf("unknown operation %q", a.Op)
	}
	if err != nil {
		l.forgetProbes() // what failed may be what a probe found there
		return fmt.Errorf("%s %s: %w", a.Op, a.Subject(), err)
	}
	killpointDone(a)
	return nil
}

// killpointDone marks a kill point (package killpoint) after a step is
// carried out, by Execute or with others at once.
func killpointDone(a plan.Action) {
	if killpoint.Enabled {
		killpoint.At(fmt.Sprintf("done: %s %s", a.Op, a.Subject()))
	}
}

func (l *Linux) ensure(r plan.Resource) error {
	switch r.Kind {
	case plan.KindNetns:
		return l.ensureNetns(r)
	case plan.KindBridge:
		return l.ensureBridge(r)
	case plan.KindVeth:
		return l.ensureVeth(r)
	case plan.KindAddr:
		return l.ensureAddr(r)
	case plan.KindLineRate:
		return l.ensureLineRate(r)
	case plan.KindPool:
		return l.ensurePool(r)
	case plan.KindFilter:
		return l.ensureFilter(r)
	case plan.KindShaper:
		return l.ensureShaper(r)
	case plan.KindSteer:
		return l.ensureSteer(r)
	case plan.KindFirewall:
		return l.ensureFirewall(r)
	case plan.KindPortSec:
		return l.ensurePortSec(r)
	case plan.KindPortBPF:
		return l.ensurePortProg(r)
	case plan.KindLB:
		return l.ensureLB(r)
	case plan.KindOffloads:
		return setOffloads(r)
	case plan.KindCgroup:
		return l.cgroups().Ensure(r)
	case plan.KindVxlan:
		return l.ensureVxlan(r)
	case plan.KindFDB:
		return l.ensureFDB(r)
	case plan.KindNeigh:
		return l.ensureNeigh(r)
	case plan.KindDevice:
		return l.ensureDevice(r)
	}
	return fmt.Errorf("unknown kind %q", r.Kind)
}

func (l *Linux) remove(r plan.Resource) error {
	switch r.Kind {
	case plan.KindNetns:
		l.forget(r.Name)
		return deleteNetns(r.Name)
	case plan.KindBridge:
		return l.removeLink(r.NS, r.Name)
	case plan.KindVeth:
		return l.removeLink(r.A.NS, r.A.Name)
	case plan.KindAddr:
		return l.removeAddr(r)
	case plan.KindLineRate:
		return l.removeLineRate(r)
	case plan.KindPool:
		return l.removePool(r)
	case plan.KindFilter:
		return l.removeFilter(r)
	case plan.KindShaper:
		return l.removeShaper(r)
	case plan.KindSteer:
		return l.removeSteer(r)
	case plan.KindFirewall:
		return l.removeFirewall(r)
	case plan.KindPortSec:
		return l.removePortSec(r)
	case plan.KindPortBPF:
		return l.removePortProg(r)
	case plan.KindLB:
		return l.removeLB(r)
	case plan.KindOffloads:
		return nil // offloads go with their link; a dropped setting is reset as a change (plan.ResetDroppedOffloads)
	case plan.KindCgroup:
		return l.cgroups().Remove(r.Name)
	case plan.KindVxlan:
		return l.removeLink(r.NS, r.Name)
	case plan.KindFDB:
		return l.removeFDB(r)
	case plan.KindNeigh:
		return l.removeNeigh(r)
	case plan.KindDevice:
		return l.removeDevice(r)
	}
	return fmt.Errorf("unknown kind %q", r.Kind)
}

// changed marks a kill point (package killpoint) after one kernel request
// of a step that makes several, where a kill splits the step; the step's
// last request is followed by Execute's own point.
func changed(format string, args ...any) {
	if killpoint.Enabled {
		killpoint.At(fmt.Sprintf(format, args...))
	}
}

// isGone reports whether err means the object no longer exists. ENODEV
// is a link found by name and gone by the time it was asked for by index:
// the kernel tore down a namespace with the link's other end meanwhile.
func isGone(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV)
}

// DeleteAll carries out the deletes of a destroy: it does what executing
// them one by one would, faster. A namespace takes everything in it with
// it (its links, a veth with either end in it, their addresses, qdiscs and
// filters), so only the namespaces are deleted, several at once and the
// processes in all of them found in one pass; a firewall's tables take its
// port policies' chains and rules with them, so a port policy whose
// firewall goes is not deleted on its own; the devices of a namespace
// (TAPs, NICs) are given back together (giveBackDevices), and its links
// deleted a group at a time (deleteLinks). Then the rest (cgroups), in the
// plan's order, once no process of a VM is left to keep its cgroup busy.
// It returns an error per action that failed, and calls lap (a stopwatch)
// after each part.
func (l *Linux) DeleteAll(actions []plan.Action, lap func(format string, args ...any)) []error {
	parts := splitDeletes(actions)
	before, links := linksAtOnce(parts.before, parts.gone)
	var errs []error
	failed := map[string]bool{} // firewalls whose deletion failed
	for _, a := range before {
		if err := l.Execute(a); err != nil {
			errs = append(errs, err)
			if a.Op == plan.OpDelete && a.Old.Kind == plan.KindFirewall {
				failed[firewallKey(*a.Old)] = true
			}
		}
	}
	lap("%d steps one by one", len(before))
	for _, a := range parts.withTable {
		if !failed[firewallKey(*a.Old)] {
			killpointDone(a)
			continue
		}
		// The tables stay: the port's chains and jumps go on their own.
		if err := l.Execute(a); err != nil {
			errs = append(errs, err)
		}
	}
	lap("%d port policies, with their firewall's tables", len(parts.withTable))
	for _, ns := range parts.deviceNS {
		errs = append(errs, l.giveBackDevices(ns, parts.devices[ns])...)
		lap("%d devices of %s given back", len(parts.devices[ns]), ns)
	}
	for ns, acts := range links {
		errs = append(errs, l.deleteLinks(ns, acts)...)
		lap("%d links of %s", len(acts), ns)
	}
	errs = append(errs, l.deleteNamespaces(parts.namespaces)...)
	lap("%d namespaces", len(parts.namespaces))
	for _, a := range parts.after {
		if err := l.Execute(a); err != nil {
			errs = append(errs, err)
		}
	}
	lap("%d steps after", len(parts.after))
	return errs
}

// deleteParts are a destroy's actions, by how DeleteAll carries them out.
type deleteParts struct {
	gone       map[string]bool // namespaces deleted
	namespaces []plan.Action   // their deletions
	before     []plan.Action   // one by one, or links by namespace (linksAtOnce)
	withTable  []plan.Action   // port policies whose firewall's tables go
	devices    map[string][]plan.Action
	deviceNS   []string      // namespaces of devices, in the plan's order
	after      []plan.Action // cgroups, once the namespaces are gone
}

// splitDeletes sorts a destroy's actions into deleteParts; what goes with
// a namespace deleted is in none.
func splitDeletes(actions []plan.Action) deleteParts {
	p := deleteParts{gone: map[string]bool{}, devices: map[string][]plan.Action{}}
	firewalls := map[string]bool{}
	for _, a := range actions {
		switch {
		case a.Op != plan.OpDelete:
		case a.Old.Kind == plan.KindNetns:
			p.gone[a.Old.Name] = true
			p.namespaces = append(p.namespaces, a)
		case a.Old.Kind == plan.KindFirewall:
			firewalls[firewallKey(*a.Old)] = true
		}
	}
	for _, a := range actions {
		switch {
		case a.Op != plan.OpDelete:
			p.before = append(p.before, a)
		case a.Old.Kind == plan.KindNetns || goesWith(*a.Old, p.gone):
		case a.Old.Kind == plan.KindCgroup:
			p.after = append(p.after, a)
		case a.Old.Kind == plan.KindPortSec && firewalls[firewallKey(*a.Old)]:
			p.withTable = append(p.withTable, a)
		case a.Old.Kind == plan.KindDevice:
			if p.devices[a.Old.NS] == nil {
				p.deviceNS = append(p.deviceNS, a.Old.NS)
			}
			p.devices[a.Old.NS] = append(p.devices[a.Old.NS], a)
		default:
			p.before = append(p.before, a)
		}
	}
	return p
}

// firewallKey names the tables of a firewall, or of a port policy's: a
// port policy's resource names its firewall's.
func firewallKey(r plan.Resource) string { return r.NS + "\x00" + nft.TableName(r.Name) }

// linkDeletion is the deletion of a link, by the name it has in the
// namespace it is deleted from.
type linkDeletion struct {
	action plan.Action
	name   string
}

// linksAtOnce takes the deletions of links (bridges, VXLAN devices, veth
// pairs) out of actions, by namespace, with the deletions of the entries
// on them, which go with their link; the rest keep their order. A pair is
// deleted from its end in a namespace that stays (a VM's port in the
// host's), where the other links are: either end takes the pair with it.
func linksAtOnce(actions []plan.Action, goneNS map[string]bool) (rest []plan.Action, links map[string][]linkDeletion) {
	links = map[string][]linkDeletion{}
	gone := map[string]bool{} // ns/name of a link deleted
	add := func(a plan.Action, ns, name string) {
		links[ns] = append(links[ns], linkDeletion{a, name})
		gone[ns+"/"+name] = true
	}
	for _, a := range actions {
		switch r := a.Old; {
		case a.Op != plan.OpDelete:
		case r.Kind == plan.KindBridge, r.Kind == plan.KindVxlan:
			add(a, r.NS, r.Name)
		case r.Kind == plan.KindVeth && goneNS[r.A.NS] && !goneNS[r.B.NS]:
			add(a, r.B.NS, r.B.Name)
		case r.Kind == plan.KindVeth:
			add(a, r.A.NS, r.A.Name)
		}
	}
	for _, a := range actions {
		r := a.Old
		switch {
		case a.Op != plan.OpDelete:
		case r.Kind == plan.KindBridge, r.Kind == plan.KindVxlan, r.Kind == plan.KindVeth:
			continue
		case (r.Kind == plan.KindFDB || r.Kind == plan.KindNeigh || r.Kind == plan.KindPortBPF || r.Kind == plan.KindLB) && gone[r.NS+"/"+r.Link]:
			continue
		}
		rest = append(rest, a)
	}
	return rest, links
}

// deleteGroup is the link group (IFLA_GROUP) that destroy gives the links
// it deletes in one request. Links are in group 0 unless someone set one.
const deleteGroup = 0x766e6574

// linksPerGroup bounds the links one group request deletes: the kernel
// holds the rtnl lock, which every link change of the machine takes, for
// the whole request, and a bridge's deletion waits for an RCU barrier
// (about 15 ms each), so a host's thousands of bridges in one request
// would keep every other change of the machine waiting for minutes.
const linksPerGroup = 256

// deleteLinks deletes links of one namespace, many in one request: each is
// put in deleteGroup, then the group is deleted. The kernel unregisters
// them together, waiting for its grace periods once rather than once per
// link (about 20 ms each, with the rtnl lock held and the machine idle),
// which made a host's destroy of thousands of networks take minutes.
// Should a link of the namespace that is not one of these be in that
// group already (another destroy at the same time), or a group request
// fail, they are deleted one by one; links of these in the group already
// (a destroy killed halfway) go with the first group.
// Equivalent to: ip -n NS link set LINK group G (each); ip -n NS link delete group G
func (l *Linux) deleteLinks(ns string, links []linkDeletion) []error {
	one := func(links []linkDeletion) []error {
		var errs []error
		for _, d := range links {
			if err := l.Execute(d.action); err != nil {
				errs = append(errs, err)
			}
		}
		return errs
	}
	if len(links) < 2 {
		return one(links)
	}
	h, err := l.handle(ns)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return one(links)
	}
	all, err := rtnl.RetryDump(h.LinkList)
	if err != nil {
		return one(links)
	}
	mine := make(map[string]bool, len(links))
	for _, d := range links {
		mine[d.name] = true
	}
	byName := make(map[string]netlink.Link, len(all))
	for _, link := range all {
		if link.Attrs().Group == deleteGroup && !mine[link.Attrs().Name] {
			return one(links)
		}
		byName[link.Attrs().Name] = link
	}
	for i := 0; i < len(links); i += linksPerGroup {
		group := links[i:min(i+linksPerGroup, len(links))]
		if err := l.deleteGroupOf(h, ns, group, byName); err != nil {
			return one(links[i:])
		}
	}
	return nil
}

// deleteGroupOf deletes links of a namespace, as read before (byName), in
// one group request.
func (l *Linux) deleteGroupOf(h *netlink.Handle, ns string, links []linkDeletion, byName map[string]netlink.Link) error {
	tagged := 0
	for _, d := range links {
		link, ok := byName[d.name]
		if !ok {
			continue // gone already
		}
		if link.Attrs().Group != deleteGroup {
			if err := h.LinkSetGroup(link, deleteGroup); isGone(err) {
				continue // gone since
			} else if err != nil {
				return err
			}
		}
		tagged++
	}
	if tagged > 0 {
		changed("links of %s in group %d", ns, deleteGroup)
		// None left in the group (ENODEV): those tagged by a killed
		// destroy went with an earlier group, the others since.
		if err := deleteLinkGroup(l, ns); err != nil && !isGone(err) {
			return err
		}
	}
	for _, d := range links {
		killpointDone(d.action)
	}
	return nil
}

// deleteLinkGroup deletes every link of deleteGroup in the namespace.
func deleteLinkGroup(l *Linux, ns string) error {
	sock, err := l.routeSocket(ns)
	if err != nil {
		return err
	}
	req := nl.NewNetlinkRequest(unix.RTM_DELLINK, unix.NLM_F_ACK)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: sock}
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_GROUP, nl.Uint32Attr(deleteGroup)))
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("ip -n %s link delete group %d: %w", ns, deleteGroup, err)
	}
	return nil
}

// goesWith reports whether deleting the namespaces in gone removes r.
func goesWith(r plan.Resource, gone map[string]bool) bool {
	switch r.Kind {
	case plan.KindNetns, plan.KindCgroup:
		return false
	case plan.KindDevice:
		// A device is not the namespace's: a TAP moved into a lab host's
		// namespace would die with it. It is given back, moved back,
		// before the namespace goes.
		return false
	case plan.KindVeth:
		// Only when both ends go: a namespace lives on, unmounted, while a
		// socket or process still holds it, and with it a pair whose other
		// end sits in a namespace that stays (a host agent's own).
		return gone[r.A.NS] && gone[r.B.NS]
	}
	return r.NS != "" && gone[r.NS]
}

// deleteWorkers is how many namespaces are deleted at once: most of the
// time of a deletion is the kernel waiting for a grace period, which
// several deletions share.
const deleteWorkers = 8

// deleteNamespaces deletes namespaces as Execute would, killing what runs
// in them first with one look through /proc for all of them.
func (l *Linux) deleteNamespaces(actions []plan.Action) []error {
	names := make([]string, len(actions))
	for i, a := range actions {
		names[i] = a.Old.Name
	}
	var errs []error
	if err := killProcessesIn(names); err != nil {
		errs = append(errs, fmt.Errorf("delete namespaces: %w", err))
	}
	failed := make([]error, len(actions))
	_ = forEachParallel(len(actions), deleteWorkers, func(i int) error {
		a := actions[i]
		l.forget(a.Old.Name)
		if err := deleteNetnsEntry(a.Old.Name, false); err != nil {
			failed[i] = fmt.Errorf("%s %s: %w", a.Op, a.Subject(), err)
			return nil
		}
		if killpoint.Enabled {
			killpoint.At(fmt.Sprintf("done: %s %s", a.Op, a.Subject()))
		}
		return nil
	})
	for _, err := range failed {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// maxBatch bounds the steps one batch carries out together: a batch is
// one kernel transaction, whose size the kernel's socket buffers bound.
const maxBatch = 256

// BatchKey says which steps of a plan ExecuteBatch carries out together:
// consecutive ones with the same key. Creates of port policies in one
// firewall have one, and creates and changes of port programs' policies in
// one namespace.
func (l *Linux) BatchKey(a plan.Action) string {
	if a.Op == plan.OpCreate && a.New != nil && a.New.Kind == plan.KindPortSec {
		return "portsec\x00" + a.New.NS + "\x00" + a.New.Name
	}
	if (a.Op == plan.OpCreate || a.Op == plan.OpModify) && a.New != nil && a.New.Kind == plan.KindPortBPF {
		return portProgBatch + a.New.NS
	}
	return ""
}

const portProgBatch = "portbpf\x00"

// ExecuteBatch carries out steps of one BatchKey, with the result of
// executing them one by one: all together where it can, else each on its
// own. It returns how many were carried out before the first that failed,
// and that one's error.
func (l *Linux) ExecuteBatch(actions []plan.Action) (int, error) {
	if len(actions) > 1 && strings.HasPrefix(l.BatchKey(actions[0]), portProgBatch) {
		return l.executePortProgs(actions)
	}
	if len(actions) > 1 && l.BatchKey(actions[0]) != "" && len(actions) <= maxBatch {
		rs := make([]plan.Resource, len(actions))
		for i, a := range actions {
			rs[i] = *a.New
		}
		if l.ensurePortSecs(rs) == nil {
			if killpoint.Enabled {
				for _, a := range actions {
					killpoint.At(fmt.Sprintf("done: %s %s", a.Op, a.Subject()))
				}
			}
			return len(actions), nil
		}
	}
	return l.executeEach(actions)
}

// executeEach carries out steps one by one, as far as the first that fails.
func (l *Linux) executeEach(actions []plan.Action) (int, error) {
	for i, a := range actions {
		if err := l.Execute(a); err != nil {
			return i, err
		}
	}
	return len(actions), nil
}

// MaxBatch is the most steps ExecuteBatch takes at once.
func (l *Linux) MaxBatch() int { return maxBatch }
