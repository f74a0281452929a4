package dataplane

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/bpfpolicy"
	"github.com/vnet-project/vnet/internal/dataplane/rtnl"
	"github.com/vnet-project/vnet/internal/killpoint"
	"github.com/vnet-project/vnet/internal/plan"
)

// A port's policy as programs (plan.KindPortBPF) is two tc filters on the
// switch port, in its clsact hooks: port_from_vm on ingress (what the VM
// sends, before the bridge sees it) and port_to_vm on egress (what the
// bridge sends the VM). On ingress it comes after a client's load
// balancers (prio 1, dataplane/lb.go) and before a teamed port's steering
// (prio 3), which a frame reaches only if the policy lets it through; on
// egress it comes first, before the load balancers translate a backend's
// reply back: the policy sees a connection to a VIP as it goes to its
// backend, both ways, as the nftables way does. Each filter's tc name
// holds the policy's digest, so observation reads back what runs. Every
// protected port of a namespace runs the same two programs, its policy an
// entry in their maps (portPrograms). A frame a sender's program hands to
// another port's VM past the bridge skips that port's egress hook: a
// load balancers' client port, whose egress translates replies back,
// takes no frames that way (plan.PortDirect).
const (
	portProgPrefix      = plan.AliasPrefix + "port "
	portProgPrioIngress = 2
	portProgPrioEgress  = 1
	portProgHandle      = 1
)

// portProgPrio is the port program's priority in a hook.
func portProgPrio(parent uint32) uint16 {
	if parent == netlink.HANDLE_MIN_EGRESS {
		return portProgPrioEgress
	}
	return portProgPrioIngress
}

// PortPolicyEnv, set to "nftables", makes vnet enforce port policies with
// nftables even where the kernel runs its port programs.
const PortPolicyEnv = "VNET_PORT_POLICY"

func portProgName(match string) string { return portProgPrefix + plan.SteerDigest(match) }

var portProgSupport struct {
	once sync.Once
	err  error
}

// PortPrograms reports whether port policies are enforced by vnet's tc/BPF
// programs on this machine, and says how they are enforced: the programs
// where the kernel loads them (they need Linux 5.17's bpf_loop), else
// nftables, with why; and whether frames between the ports of one bridge
// go past it.
func (l *Linux) PortPrograms() (bool, string) {
	if l.WithoutPortPrograms {
		return false, "nftables (port programs turned off)"
	}
	if os.Getenv(PortPolicyEnv) == "nftables" {
		return false, "nftables (" + PortPolicyEnv + "=nftables)"
	}
	portProgSupport.once.Do(func() { portProgSupport.err = probeCached(portProgNote, portProgKey, loadTestPrograms) })
	if err := portProgSupport.err; err != nil {
		return false, "nftables: this kernel does not load vnet's port programs (tc/BPF with bpf_loop, Linux 5.17 or later): " + err.Error()
	}
	if err := fastPathSupport(); err != nil {
		return true, "tc/BPF programs on the switch ports; frames between ports cross the bridge (" + err.Error() + ")"
	}
	return true, "tc/BPF programs on the switch ports; frames between the ports of one bridge go past it"
}

// loadTestPrograms loads the programs, which is what the kernel must
// verify for any policy.
func loadTestPrograms() error {
	p, err := bpfpolicy.Load(nil)
	if err != nil {
		return err
	}
	p.Close()
	return nil
}

// fastPath is what fastPathSupport found in this process.
var fastPath struct {
	once sync.Once
	err  error
}

// fastPathSupport says why the kernel cannot hand frames from one port to
// another's VM past the bridge (bpf_redirect_peer, with the VM's vNIC
// counting what it is handed so, Linux 6.7), or returns nil. A kernel that
// can is noted for the boot (probeCached), so that the next commands do not
// probe it again: the probe loads a program, and its library first reads
// the whole mount table looking for a BPF token, a table that holds every
// container's namespace bind-mounted in /run/netns.
func fastPathSupport() error {
	fastPath.once.Do(func() { fastPath.err = probeCached(fastPathNote, kernelKey("fast path"), probeFastPath) })
	return fastPath.err
}

// probeFastPath is fastPathSupport's probe of the kernel.
func probeFastPath() error {
	if err := features.HaveProgramHelper(ebpf.SchedCLS, asm.FnRedirectPeer); err != nil {
		return fmt.Errorf("no bpf_redirect_peer: %w", err)
	}
	rel, err := kernelRelease()
	if err != nil {
		return err
	}
	var major, minor int
	if _, err := fmt.Sscanf(rel, "%d.%d", &major, &minor); err != nil {
		return fmt.Errorf("kernel release %q unread: %w", rel, err)
	}
	if major < 6 || major == 6 && minor < 7 {
		return fmt.Errorf("Linux %s: a vNIC counts frames handed past the bridge from 6.7 on", rel)
	}
	return nil
}

// nsPrograms are the port programs of each namespace this process has
// used, found or loaded once: every protected port of a namespace runs the
// same pair, its policy an entry in their maps.
type nsPrograms struct {
	mu sync.Mutex
	by map[nsKey]*bpfpolicy.Programs
}

// nsKey is a namespace by name and inode: a name can come to stand for
// another namespace, whose ports the programs of the first know nothing
// of.
type nsKey struct {
	name string
	ino  uint64
}

func (n *nsPrograms) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, p := range n.by {
		p.Close()
		delete(n.by, k)
	}
}

// portPrograms returns the namespace's port programs: those its ports run,
// else new ones. They are found without reading all the namespace's links
// (findPortProgramsQuickly) where a port runs them, so a one-port change
// costs the same at a thousand ports as at one; ports whose link is gone
// are pruned from them only when an apply says some may be (PruneStale).
func (l *Linux) portPrograms(ns string, h *netlink.Handle) (*bpfpolicy.Programs, error) {
	nh, err := l.nsHandle(ns)
	if err != nil {
		return nil, err
	}
	key := nsKey{ns, nh.ino}
	l.progs.mu.Lock()
	defer l.progs.mu.Unlock()
	if p := l.progs.by[key]; p != nil {
		return p, nil
	}
	p, err := findAnyPortPrograms(h, key, nil)
	if err != nil {
		return nil, err
	}
	if p != nil {
		if p, err = upgradePortPrograms(ns, h, p); err != nil {
			return nil, err
		}
	}
	if p == nil {
		if p, err = bpfpolicy.Load(nil); err != nil {
			// The note that this kernel loads them is wrong, or this
			// command cannot: the next finds out again.
			dropNote(portProgNote)
			return nil, bpfErr(err)
		}
	}
	if _, known, err := p.FastPath(); err != nil {
		p.Close()
		return nil, err
	} else if !known {
		if err := p.SetFastPath(fastPathSupport() == nil); err != nil {
			p.Close()
			return nil, err
		}
	}
	if l.progs.by == nil {
		l.progs.by = map[nsKey]*bpfpolicy.Programs{}
	}
	l.progs.by[key] = p
	from, _ := p.IDs()
	knownPrograms.keep(key, from)
	return p, nil
}

// findAnyPortPrograms finds the programs the namespace's ports run:
// quickly where it can, else from the hooks of its links (hooked, or one
// dump of them when nil). nil when no port runs this build's.
func findAnyPortPrograms(h *netlink.Handle, key nsKey, hooked []int) (*bpfpolicy.Programs, error) {
	if p := findPortProgramsQuickly(h, key); p != nil {
		return p, nil
	}
	if hooked == nil {
		var err error
		if hooked, err = hookedLinks(h); err != nil {
			return nil, err
		}
	}
	return findPortPrograms(h, hooked), nil
}

// PruneStale has the port programs of each of the namespaces that has them
// forget the ports whose link runs them no more (prunePorts), which a
// command killed halfway or a link deleted under vnet leaves. It reads
// all the namespace's hooks, so an apply asks for it only when some may
// be there: the store says the last command did not finish, the apply
// reads everything, or its plan makes again a port's programs that the
// last apply made.
func (l *Linux) PruneStale(namespaces []string) error {
	for _, ns := range namespaces {
		if !netnsExists(ns) {
			continue
		}
		if err := l.pruneStaleIn(ns); err != nil {
			return fmt.Errorf("forget ports gone from the port programs in %s: %w", ns, err)
		}
	}
	return nil
}

func (l *Linux) pruneStaleIn(ns string) error {
	nh, err := l.nsHandle(ns)
	if err != nil {
		return err
	}
	hooked, err := hookedLinks(nh.Handle)
	if err != nil || len(hooked) == 0 {
		return err // no port runs programs here
	}
	p, found, err := l.pruneIn(ns, nh, hooked)
	if p == nil || err != nil {
		return err
	}
	if found {
		defer p.Close()
	}
	// After the prune, with the process's mutex let go: the sweep waits
	// for the namespace's lock, which a command of this process that has
	// staged rules may hold while it wants the mutex.
	return l.sweepPortPrograms(ns, p)
}

// pruneIn has the namespace's port programs, this process's or found,
// forget the ports that run neither program (prunePorts). found says the
// programs were found for this alone, for the caller to close.
func (l *Linux) pruneIn(ns string, nh *nsHandle, hooked []int) (p *bpfpolicy.Programs, found bool, err error) {
	l.progs.mu.Lock()
	defer l.progs.mu.Unlock()
	key := nsKey{ns, nh.ino}
	if p = l.progs.by[key]; p == nil {
		if p, err = findAnyPortPrograms(nh.Handle, key, hooked); p == nil || err != nil {
			return nil, false, err
		}
		// A full apply reads every port: it also puts this build's
		// programs on them.
		if p, err = upgradePortPrograms(ns, nh.Handle, p); err != nil {
			return nil, false, err
		}
		found = true
	}
	if err := prunePorts(p, nh.Handle, hooked); err != nil {
		if found {
			p.Close()
		}
		return nil, false, err
	}
	return p, found, nil
}

// knownPrograms are, for the life of the process, the IDs of the programs
// each namespace's ports ran when this process last used them: a server's
// next change starts its search there. An ID is only where to look: what
// is used is what a port of the namespace runs (findPortPrograms).
var knownPrograms idMemo

type idMemo struct {
	mu sync.Mutex
	by map[nsKey]ebpf.ProgramID
}

func (m *idMemo) keep(key nsKey, id ebpf.ProgramID) {
	if id == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[nsKey]ebpf.ProgramID{}
	}
	m.by[key] = id
}

func (m *idMemo) get(key nsKey) ebpf.ProgramID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.by[key]
}

// portsToTry is how many of a candidate's ports findPortProgramsQuickly
// looks at in the namespace: the first may be a stale entry.
const portsToTry = 4

// findPortProgramsQuickly finds the programs the namespace's ports run
// without a dump of its links or hooks: from the programs this process
// last knew there, else from each port program loaded on the machine, it
// takes a few of the ports they hold and looks at those ports' filters in
// this namespace (a port index names a link within one namespace only,
// so the filters, not the candidate, say which programs run here). nil
// when none is found that way.
func findPortProgramsQuickly(h *netlink.Handle, key nsKey) *bpfpolicy.Programs {
	tried := map[ebpf.ProgramID]bool{}
	try := func(id ebpf.ProgramID) *bpfpolicy.Programs {
		if id == 0 || tried[id] {
			return nil
		}
		tried[id] = true
		var links []int
		for _, port := range bpfpolicy.SomePorts(id, portsToTry) {
			links = append(links, int(port))
		}
		return findPortPrograms(h, links)
	}
	if p := try(knownPrograms.get(key)); p != nil {
		return p
	}
	ids, err := bpfpolicy.Candidates()
	if err != nil {
		return nil
	}
	for _, id := range ids {
		if p := try(id); p != nil {
			return p
		}
	}
	return nil
}

// findPortPrograms opens the port programs of this build that a port of
// the namespace runs, found from the first of the links' filters that
// run them; nil when none does.
func findPortPrograms(h *netlink.Handle, links []int) *bpfpolicy.Programs {
	for _, index := range links {
		link := linkAt(index)
		in, out := portFilterOn(h, link, netlink.HANDLE_MIN_INGRESS), portFilterOn(h, link, netlink.HANDLE_MIN_EGRESS)
		if in == nil || out == nil {
			continue
		}
		p, err := bpfpolicy.Open(ebpf.ProgramID(in.Id), ebpf.ProgramID(out.Id))
		if err != nil {
			continue // replaced meanwhile
		}
		if p.Complete() {
			return p
		}
		p.Close() // an earlier build's, one pair per port
	}
	return nil
}

// linkAt stands for the link of an index where netlink needs a link and
// reads only its index (tc's dumps of a link's filters).
func linkAt(index int) netlink.Link {
	return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: index}}
}

// hookedLinks returns the indexes of a namespace's links with a clsact
// hook, where port programs may be, in order: one qdisc dump, however many
// links there are.
func hookedLinks(h *netlink.Handle) ([]int, error) {
	qs, err := rtnl.RetryDump(func() ([]netlink.Qdisc, error) { return h.QdiscList(nil) })
	if err != nil {
		return nil, fmt.Errorf("tc qdisc show: %w", err)
	}
	var out []int
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_CLSACT {
			out = append(out, q.Attrs().LinkIndex)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// clsactLinks returns the links of a namespace with a clsact hook: a
// qdisc dump and a link dump, whatever the number of links.
func clsactLinks(h *netlink.Handle) ([]netlink.Link, error) {
	hooked, err := hookedLinks(h)
	if err != nil || len(hooked) == 0 {
		return nil, err
	}
	links, err := rtnl.RetryDump(h.LinkList)
	if err != nil {
		return nil, fmt.Errorf("ip link show: %w", err)
	}
	var out []netlink.Link
	for _, link := range links {
		if _, ok := slices.BinarySearch(hooked, link.Attrs().Index); ok {
			out = append(out, link)
		}
	}
	return out, nil
}

// prunePorts forgets the ports the programs hold that run neither of them:
// a link without a clsact hook (hooked, sorted) is one whose filters went
// with it (a link deleted under vnet or by a command that crashed before
// it forgot the port, a hook deleted by hand); one with a hook is asked
// which programs its filters run (a command killed after it took the
// port's filters off, before it forgot the port). Such a port runs no
// program, so its entries only served other ports' fast path.
func prunePorts(p *bpfpolicy.Programs, h *netlink.Handle, hooked []int) error {
	ports, err := p.Ports()
	if err != nil {
		return fmt.Errorf("list the port programs' ports: %w", err)
	}
	// Programs of another build on the same maps (a switch to this
	// build's that was cut short) serve their ports' entries as well.
	others, err := p.Sharers()
	if err != nil {
		return fmt.Errorf("list the programs on the port programs' maps: %w", err)
	}
	from, to := p.IDs()
	progs := append(others, from, to)
	for _, port := range ports {
		if _, ok := slices.BinarySearch(hooked, int(port)); ok && runs(h, linkAt(int(port)), progs) {
			continue
		}
		if err := p.Remove(port); err != nil {
			return err
		}
	}
	return nil
}

// runs reports whether a link's port filters run any of the programs.
func runs(h *netlink.Handle, link netlink.Link, progs []ebpf.ProgramID) bool {
	if in := portFilterOn(h, link, netlink.HANDLE_MIN_INGRESS); in != nil && slices.Contains(progs, ebpf.ProgramID(in.Id)) {
		return true
	}
	out := portFilterOn(h, link, netlink.HANDLE_MIN_EGRESS)
	return out != nil && slices.Contains(progs, ebpf.ProgramID(out.Id))
}

// ensurePortProg writes a port's policy in its namespace's port programs
// and puts them in its hooks, replacing those there in place, so the port
// never runs without a policy: the settings are written first, in one
// write that switches the port to its new counters and rules, and the
// filters, whose names hold the policy's digest, after. A changed policy
// keeps the port's flow table (or takes over that of an earlier build's
// programs on it): it does not cut connections it let through before.
// Programs an earlier build put at another priority are taken away.
// Equivalent to: tc qdisc add dev LINK clsact; tc filter replace dev LINK ingress prio 2 (egress prio 1) handle 1 bpf da obj PROG
func (l *Linux) ensurePortProg(r plan.Resource) error {
	if plan.IsDigest(r.Match) {
		return fmt.Errorf("port security on %s in %s: only its digest is known (%s), not the policy: run vnet apply to make it from the spec", r.Link, r.NS, r.Match)
	}
	p, err := plan.ParsePortPolicy(r.Match)
	if err != nil {
		return err
	}
	c, err := bpfpolicy.Compile(p)
	if err != nil {
		return err
	}
	h, link, err := l.linkIn(r.NS, r.Link)
	if err != nil {
		return err
	}
	progs, err := l.portPrograms(r.NS, h)
	if err != nil {
		return err
	}
	unlock, err := l.lockPortPrograms(r.NS, false)
	if err != nil {
		return err
	}
	flows := legacyFlows(h, link)
	err = progs.Set(uint32(link.Attrs().Index), c, bridgeOf(h, link, p.Switch), flows)
	unlock()
	if flows != nil {
		flows.Close()
	}
	if err != nil {
		return fmt.Errorf("port security on %s in %s: %w", r.Link, r.NS, err)
	}
	if err := ensureClsact(h, link); err != nil {
		return err
	}
	name := portProgName(r.Match)
	if err := replacePortFilter(h, link, netlink.HANDLE_MIN_INGRESS, progs.FromVM, name); err != nil {
		return err
	}
	changed("port program on %s ingress", r.Link)
	if err := replacePortFilter(h, link, netlink.HANDLE_MIN_EGRESS, progs.ToVM, name); err != nil {
		return err
	}
	return deletePortFilters(h, r.NS, link, true)
}

// executePortProgs carries out steps that set port programs' policies in
// one namespace (BatchKey) one by one, as Execute does, after writing
// what of them waits for the programs on every CPU (their ACLs' maps of
// maps, bpfpolicy.Programs.Stage) for all of them at once: an apply that
// gives a thousand ports an ACL waits a few times, not three thousand.
// What is staged is read by no frame before its step, so a step that
// fails, or one never reached, leaves the ports as they were; the
// staging's own failure leaves each step to write its own.
func (l *Linux) executePortProgs(actions []plan.Action) (int, error) {
	progs, unlock := l.stagePortProgs(actions)
	if progs == nil {
		return l.executeEach(actions)
	}
	defer unlock()
	progs.Defer()
	defer progs.Flush()
	n, err := l.executeEach(actions)
	if err != nil {
		progs.Unstage()
	}
	return n, err
}

// stagePortProgs stages the policies the steps set, returning the
// namespace's programs, or nil when it staged nothing, and the release of
// their lock, held shared from the staging until the steps have set them
// (lockPortPrograms).
func (l *Linux) stagePortProgs(actions []plan.Action) (*bpfpolicy.Programs, func()) {
	ns := actions[0].New.NS
	h, err := l.handle(ns)
	if err != nil {
		return nil, nil
	}
	var ports []bpfpolicy.Staged
	defer func() {
		for _, s := range ports {
			if s.Flows != nil {
				s.Flows.Close()
			}
		}
	}()
	for _, a := range actions {
		r := *a.New
		if plan.IsDigest(r.Match) {
			continue
		}
		p, err := plan.ParsePortPolicy(r.Match)
		if err != nil || p.Default == "" {
			continue // without an ACL a port has nothing in maps of maps
		}
		c, err := bpfpolicy.Compile(p)
		if err != nil {
			continue
		}
		link, err := h.LinkByName(r.Link)
		if err != nil {
			continue
		}
		ports = append(ports, bpfpolicy.Staged{Port: uint32(link.Attrs().Index), Policy: c, Flows: legacyFlows(h, link)})
	}
	if len(ports) == 0 {
		return nil, nil
	}
	// Found first: finding them sweeps them, under the lock exclusive.
	progs, err := l.portPrograms(ns, h)
	if err != nil {
		return nil, nil
	}
	unlock, err := l.lockPortPrograms(ns, false)
	if err != nil {
		return nil, nil
	}
	if progs.Stage(ports) != nil {
		unlock()
		return nil, nil
	}
	killpoint.At("port programs staged: " + ns)
	return progs, unlock
}

// leaveFastPath takes a port that is to go down or change bridges off the
// fast path first (bpfpolicy.Programs.Leave): no frame is handed past the
// bridge to a port cut from its switch or from another bridge's ports
// meanwhile. Its policy's next write, which follows such a change in the
// same apply, puts it back where it may be.
func (l *Linux) leaveFastPath(ns string, h *netlink.Handle, link netlink.Link, down bool, master string) error {
	a := link.Attrs()
	isUp := a.Flags&net.FlagUp != 0
	moves := (master == "") != (a.MasterIndex == 0)
	if !moves && master != "" {
		br, err := h.LinkByIndex(a.MasterIndex)
		moves = err != nil || br.Attrs().Name != master
	}
	if isUp != down && !moves {
		return nil
	}
	if portFilterOn(h, link, netlink.HANDLE_MIN_INGRESS) == nil {
		return nil
	}
	progs, err := l.portPrograms(ns, h)
	if err != nil {
		return err
	}
	if err := progs.Leave(uint32(a.Index)); err != nil {
		return fmt.Errorf("take %s in %s off the fast path: %w", a.Name, ns, err)
	}
	return nil
}

// bridgeOf returns the index of the bridge a port's policy names when the
// port is on it, else 0: frames go past a bridge only between its ports.
func bridgeOf(h *netlink.Handle, link netlink.Link, name string) uint32 {
	if name == "" || link.Attrs().MasterIndex == 0 {
		return 0
	}
	br, err := h.LinkByName(name)
	if err != nil || br.Attrs().Index != link.Attrs().MasterIndex {
		return 0
	}
	return uint32(br.Attrs().Index)
}

// deletePortFilters deletes the port program's filters of a link: with
// staleOnly, those at a priority other than this build's.
func deletePortFilters(h *netlink.Handle, ns string, link netlink.Link, staleOnly bool) error {
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		for _, f := range portFiltersOn(h, link, parent) {
			if staleOnly && f.Priority == portProgPrio(parent) {
				continue
			}
			del := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: parent,
				Handle: f.Handle, Priority: f.Priority, Protocol: f.Protocol}}
			if err := h.FilterDel(del); err != nil && !errors.Is(err, unix.ENOENT) && !isGone(err) {
				return fmt.Errorf("tc -n %s filter del dev %s %s prio %d: %w", ns, link.Attrs().Name, hookName(parent), f.Priority, err)
			}
			changed("port program off %s %s prio %d", link.Attrs().Name, hookName(parent), f.Priority)
		}
	}
	return nil
}

func portFilter(link netlink.Link, parent uint32) netlink.FilterAttrs {
	return netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: parent, Handle: portProgHandle, Priority: portProgPrio(parent), Protocol: unix.ETH_P_ALL}
}

func replacePortFilter(h *netlink.Handle, link netlink.Link, parent uint32, prog *ebpf.Program, name string) error {
	f := &netlink.BpfFilter{FilterAttrs: portFilter(link, parent), Fd: prog.FD(), Name: name, DirectAction: true}
	if err := h.FilterReplace(f); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return &FeatureError{Feature: "cls_bpf classifier", Hint: "CONFIG_NET_CLS_BPF (modprobe cls_bpf)", Err: err}
		}
		return fmt.Errorf("tc filter replace dev %s %s bpf: %w", link.Attrs().Name, hookName(parent), err)
	}
	return nil
}

func hookName(parent uint32) string {
	if parent == netlink.HANDLE_MIN_EGRESS {
		return "egress"
	}
	return "ingress"
}

// legacyFlows opens the flow table of the port program of an earlier
// build that a link runs now, one pair per port, or returns nil.
func legacyFlows(h *netlink.Handle, link netlink.Link) *ebpf.Map {
	f := portFilterOn(h, link, netlink.HANDLE_MIN_INGRESS)
	if f == nil {
		return nil
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(f.Id))
	if err != nil {
		return nil
	}
	defer prog.Close()
	m, err := bpfpolicy.MapOf(prog, "flows")
	if err != nil {
		return nil
	}
	return m
}

// portFilterOn returns the port program's filter in one hook of a link,
// the one at this build's priority first.
func portFilterOn(h *netlink.Handle, link netlink.Link, parent uint32) *netlink.BpfFilter {
	fs := portFiltersOn(h, link, parent)
	for _, f := range fs {
		if f.Priority == portProgPrio(parent) {
			return f
		}
	}
	if len(fs) > 0 {
		return fs[0]
	}
	return nil
}

// portFiltersOn returns the port program's filters in one hook of a link.
func portFiltersOn(h *netlink.Handle, link netlink.Link, parent uint32) []*netlink.BpfFilter {
	filters, err := rtnl.RetryDump(func() ([]netlink.Filter, error) { return h.FilterList(link, parent) })
	if err != nil {
		return nil
	}
	var out []*netlink.BpfFilter
	for _, f := range filters {
		if bf, ok := f.(*netlink.BpfFilter); ok && strings.HasPrefix(bf.Name, portProgPrefix) {
			out = append(out, bf)
		}
	}
	return out
}

// removePortProg takes a port's programs out of its hooks, and the clsact
// hook itself when nothing else is left in it (a TAP or device is given
// back as it was found).
// Equivalent to: tc filter del dev LINK ingress prio 2 (egress prio 1) handle 1 bpf; tc qdisc del dev LINK clsact
func (l *Linux) removePortProg(r plan.Resource) error {
	h, link, err := l.existingLink(r.NS, r.Link)
	if link == nil || err != nil {
		return err
	}
	// The programs are found while the port still runs them: they may be
	// the namespace's only port.
	progs, err := l.portPrograms(r.NS, h)
	if err != nil {
		return err
	}
	if err := deletePortFilters(h, r.NS, link, false); err != nil {
		return err
	}
	if err := forgetPort(progs, r.NS, link); err != nil {
		return err
	}
	return dropEmptyClsact(h, r.NS, link)
}

// forgetPort takes a port that runs no port program any more out of its
// namespace's programs' maps.
func forgetPort(progs *bpfpolicy.Programs, ns string, link netlink.Link) error {
	if err := progs.Remove(uint32(link.Attrs().Index)); err != nil {
		return fmt.Errorf("port security off %s in %s: %w", link.Attrs().Name, ns, err)
	}
	return nil
}

// dropEmptyClsact deletes a link's clsact hook when no filter is left in
// it.
func dropEmptyClsact(h *netlink.Handle, ns string, link netlink.Link) error {
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		filters, err := rtnl.RetryDump(func() ([]netlink.Filter, error) { return h.FilterList(link, parent) })
		if err != nil || len(filters) > 0 {
			return nil // not ours to judge: left as it is
		}
	}
	q := &netlink.GenericQdisc{QdiscType: "clsact",
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_CLSACT, Handle: netlink.MakeHandle(0xffff, 0)}}
	if err := h.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) && !isGone(err) {
		return fmt.Errorf("tc -n %s qdisc del dev %s clsact: %w", ns, link.Attrs().Name, err)
	}
	return nil
}

// observePortProg reads a port's programs back: the policy's digest from
// the filters' names. A port with only one of its two programs, or two of
// different policies (a command killed between the two), reads as such,
// so that the next apply puts the right ones in.
func observePortProg(h *netlink.Handle, link netlink.Link, ns string) []plan.Resource {
	in := portFilterOn(h, link, netlink.HANDLE_MIN_INGRESS)
	out := portFilterOn(h, link, netlink.HANDLE_MIN_EGRESS)
	if in == nil && out == nil {
		return nil
	}
	r := plan.Resource{Kind: plan.KindPortBPF, NS: ns, Link: link.Attrs().Name}
	switch {
	case in != nil && in.Priority != portProgPrioIngress, out != nil && out.Priority != portProgPrioEgress:
		// An earlier build's order in the hooks: the next apply moves them.
		r.Match = "stale " + strings.TrimPrefix(firstNonNil(in, out).Name, portProgPrefix)
	case in == nil:
		r.Match = "egress only " + strings.TrimPrefix(out.Name, portProgPrefix)
	case out == nil:
		r.Match = "ingress only " + strings.TrimPrefix(in.Name, portProgPrefix)
	case in.Name != out.Name:
		r.Match = "ingress " + strings.TrimPrefix(in.Name, portProgPrefix) + ", egress " + strings.TrimPrefix(out.Name, portProgPrefix)
	default:
		r.Match = strings.TrimPrefix(in.Name, portProgPrefix)
	}
	return []plan.Resource{r}
}

// portProgCounters adds to out, by port, what the port programs of a
// namespace's links counted. The programs the ports share are opened once,
// found as a change finds them, and a port they hold is read from them
// without a look at its filters: a server's sampler reads a thousand
// ports each round. Only the ports they do not hold (an earlier build's
// programs, one pair per port) are read through their filters.
func (l *Linux) portProgCounters(ns string, out map[string]map[string]uint64) error {
	nh, err := l.nsHandle(ns)
	if err != nil {
		return err
	}
	h := nh.Handle
	links, err := clsactLinks(h)
	if err != nil {
		return fmt.Errorf("in %s: %w", ns, err)
	}
	shared := map[int]*bpfpolicy.Programs{} // by program ID; nil: an earlier build's
	defer func() {
		for _, p := range shared {
			if p != nil {
				p.Close()
			}
		}
	}()
	var found *bpfpolicy.Programs
	if len(links) > 0 {
		if found = findPortProgramsQuickly(h, nsKey{ns, nh.ino}); found != nil {
			defer found.Close()
		}
	}
	for _, link := range links {
		if found != nil {
			c, err := found.Counters(uint32(link.Attrs().Index))
			if err == nil {
				out[link.Attrs().Name] = c
				continue
			}
			if !errors.Is(err, bpfpolicy.ErrNoPort) {
				return fmt.Errorf("read the counters of %s's port program in %s: %w", link.Attrs().Name, ns, err)
			}
		}
		f := portFilterOn(h, link, netlink.HANDLE_MIN_INGRESS)
		if f == nil {
			continue
		}
		c, err := portCounters(shared, f, uint32(link.Attrs().Index))
		if errors.Is(err, bpfpolicy.ErrNoPort) || errors.Is(err, unix.ENOENT) {
			continue // replaced meanwhile
		}
		if err != nil {
			return fmt.Errorf("read the counters of %s's port program in %s: %w", link.Attrs().Name, ns, err)
		}
		out[link.Attrs().Name] = c
	}
	return nil
}

// portCounters reads a port's counters from the programs its filter runs:
// this build's, shared by the namespace's ports (opened once, into
// shared), or an earlier build's, one pair per port.
func portCounters(shared map[int]*bpfpolicy.Programs, f *netlink.BpfFilter, port uint32) (map[string]uint64, error) {
	p, seen := shared[f.Id]
	if !seen {
		var err error
		if p, err = bpfpolicy.Open(ebpf.ProgramID(f.Id), ebpf.ProgramID(f.Id)); err != nil {
			return nil, err
		}
		if !p.Complete() {
			p.Close()
			p = nil
		}
		shared[f.Id] = p
	}
	if p != nil {
		return p.Counters(port)
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(f.Id))
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	return bpfpolicy.LegacyCounters(prog)
}

func firstNonNil(a, b *netlink.BpfFilter) *netlink.BpfFilter {
	if a != nil {
		return a
	}
	return b
}

// SweepPortPrograms deletes from the port programs of each namespace what
// no port's settings name (bpfpolicy.Programs.Sweep): the rules and tables
// a command killed between staging and setting them left. A namespace
// whose ports run none of this build's port programs has nothing to
// sweep. Each sweep waits until no command, of this process or another,
// is between staging rules there and setting them (lockPortPrograms).
func (l *Linux) SweepPortPrograms(namespaces []string) error {
	for _, ns := range namespaces {
		h, err := l.handle(ns)
		if err != nil {
			return err
		}
		hooked, err := hookedLinks(h)
		if err != nil {
			return err
		}
		if found := findPortPrograms(h, hooked); found == nil {
			continue // none of this build's programs run there to sweep
		} else {
			found.Close()
		}
		progs, err := l.portPrograms(ns, h)
		if err != nil {
			return err
		}
		if err := l.sweepPortPrograms(ns, progs); err != nil {
			return err
		}
	}
	return nil
}
