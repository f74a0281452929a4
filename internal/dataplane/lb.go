package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/bpflb"
	"github.com/vnet-project/vnet/internal/dataplane/rtnl"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/status"
)

// A client port's load balancers (plan.KindLB) are two tc filters on the
// port, in its clsact hooks: lb_from_vm on ingress, the first filter there,
// so that what follows it (a port's policy, the bridge, a teamed port's
// steering) sees a connection as it goes to its backend; lb_to_vm on
// egress after the port's policy (prio 2), so that the policy too sees the
// backend's reply before it becomes the VIP's. The filters' tc name holds
// the text's digest; which backends are down is read back from the maps.
const (
	lbPrefix      = plan.AliasPrefix + "lb "
	lbHandle      = 0x1b
	lbPrioIngress = 1
	lbPrioEgress  = 2
)

func lbFilterName(match string) string { return lbPrefix + plan.SteerDigest(match) }

func lbFilterAttrs(link netlink.Link, parent uint32) netlink.FilterAttrs {
	prio := uint16(lbPrioIngress)
	if parent == netlink.HANDLE_MIN_EGRESS {
		prio = lbPrioEgress
	}
	return netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: parent, Handle: lbHandle, Priority: prio, Protocol: unix.ETH_P_ALL}
}

// lbFilters are a port's load balancer filters as they are: their tc name
// and program ID on each hook (empty and 0 where there is none).
type lbFilters struct {
	inName, outName string
	inID, outID     int
}

func readLBFilters(h *netlink.Handle, link netlink.Link) (lbFilters, error) {
	var f lbFilters
	for _, hook := range []struct {
		parent uint32
		name   *string
		id     *int
	}{{netlink.HANDLE_MIN_INGRESS, &f.inName, &f.inID}, {netlink.HANDLE_MIN_EGRESS, &f.outName, &f.outID}} {
		filters, err := rtnl.RetryDump(func() ([]netlink.Filter, error) { return h.FilterList(link, hook.parent) })
		if err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				continue // no clsact: no filters
			}
			return f, fmt.Errorf("tc filter show dev %s %s: %w", link.Attrs().Name, hookName(hook.parent), err)
		}
		for _, flt := range filters {
			if bf, ok := flt.(*netlink.BpfFilter); ok && strings.HasPrefix(bf.Name, lbPrefix) && bf.Handle == lbHandle {
				*hook.name, *hook.id = bf.Name, bf.Id
			}
		}
	}
	return f, nil
}

// ensureLB puts a port's load balancers in place. With the same text as the
// programs there, only the health changes, in their maps; otherwise new
// programs replace the old in place, taking over their connections.
// Equivalent to: tc qdisc add dev LINK clsact; tc filter replace dev LINK ingress prio 1 handle 0x1b bpf da obj PROG; ... egress prio 2 ...
func (l *Linux) ensureLB(r plan.Resource) error {
	if plan.IsDigest(r.Match) {
		return fmt.Errorf("load balancers on %s in %s: only their digest is known (%s), not their text: run vnet apply to make them from the spec", r.Link, r.NS, r.Match)
	}
	pb, err := plan.ParsePortBalancers(r.Match)
	if err != nil {
		return err
	}
	pb = pb.WithDown(r.Why)
	h, link, err := l.linkIn(r.NS, r.Link)
	if err != nil {
		return err
	}
	cur, err := readLBFilters(h, link)
	if err != nil {
		return err
	}
	name := lbFilterName(r.Match)
	var old *bpflb.Programs
	if cur.inID != 0 {
		if old, err = bpflb.Open(ebpf.ProgramID(cur.inID), 0); err != nil {
			old = nil // not ours after all, or gone: new programs without its state
		}
		defer old.Close()
	}
	if old != nil && cur.inName == name && cur.outName == name {
		if err := old.SetHealth(pb); err != nil {
			return fmt.Errorf("load balancers on %s in %s: %w", r.Link, r.NS, err)
		}
		return nil
	}
	progs, err := bpflb.Load(pb, old)
	if err != nil {
		return lbErr(err)
	}
	defer progs.Close() // the filters hold their own references
	if err := ensureClsact(h, link); err != nil {
		return err
	}
	if err := replaceLBFilter(h, link, netlink.HANDLE_MIN_INGRESS, progs.FromVM, name); err != nil {
		return err
	}
	changed("load balancers on %s ingress", r.Link)
	return replaceLBFilter(h, link, netlink.HANDLE_MIN_EGRESS, progs.ToVM, name)
}

func lbErr(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) || errors.Is(err, ebpf.ErrNotSupported) {
		return &FeatureError{Feature: "BPF programs (sched_cls) for load balancers", Hint: "CONFIG_BPF_SYSCALL, and CAP_BPF/CAP_NET_ADMIN", Err: err}
	}
	return err
}

func replaceLBFilter(h *netlink.Handle, link netlink.Link, parent uint32, prog *ebpf.Program, name string) error {
	f := &netlink.BpfFilter{FilterAttrs: lbFilterAttrs(link, parent), Fd: prog.FD(), Name: name, DirectAction: true}
	if err := h.FilterReplace(f); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return &FeatureError{Feature: "cls_bpf classifier", Hint: "CONFIG_NET_CLS_BPF (modprobe cls_bpf)", Err: err}
		}
		return fmt.Errorf("tc filter replace dev %s %s prio %d handle %#x bpf: %w", link.Attrs().Name, hookName(parent), lbFilterAttrs(link, parent).Priority, lbHandle, err)
	}
	return nil
}

// removeLB takes a port's load balancer filters away, and their programs
// and maps with them, and the clsact hook when nothing else is in it (vnet
// made it for them). A port that is gone took them with it.
// Equivalent to: tc filter del dev LINK ingress prio 1 handle 0x1b bpf; tc filter del dev LINK egress prio 2 handle 0x1b bpf; tc qdisc del dev LINK clsact
func (l *Linux) removeLB(r plan.Resource) error {
	h, link, err := l.existingLink(r.NS, r.Link)
	if link == nil || err != nil {
		return err
	}
	cur, err := readLBFilters(h, link)
	if err != nil {
		return err
	}
	for _, hook := range []struct {
		parent uint32
		name   string
	}{{netlink.HANDLE_MIN_INGRESS, cur.inName}, {netlink.HANDLE_MIN_EGRESS, cur.outName}} {
		if hook.name == "" {
			continue
		}
		f := &netlink.BpfFilter{FilterAttrs: lbFilterAttrs(link, hook.parent)}
		if err := h.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) && !isGone(err) {
			return fmt.Errorf("tc -n %s filter del dev %s %s handle %#x: %w", r.NS, r.Link, hookName(hook.parent), lbHandle, err)
		}
		changed("load balancers off %s %s", r.Link, hookName(hook.parent))
	}
	return dropEmptyClsact(h, r.NS, link)
}

// observeLB reads a port's load balancers back: the text's digest from the
// filters' names (plan.ResolveSteer puts the text back), which backends are
// down from the maps. Filters on one hook only, or of different texts, are
// reported as such, so that the next apply makes them again.
func observeLB(h *netlink.Handle, link netlink.Link, ns string) []plan.Resource {
	cur, err := readLBFilters(h, link)
	if err != nil || cur.inName == "" && cur.outName == "" {
		return nil
	}
	r := plan.Resource{Kind: plan.KindLB, NS: ns, Link: link.Attrs().Name}
	in, out := strings.TrimPrefix(cur.inName, lbPrefix), strings.TrimPrefix(cur.outName, lbPrefix)
	if in != out || cur.inID == 0 {
		r.Match = "partial " + in + " " + out
		return []plan.Resource{r}
	}
	r.Match = in
	progs, err := bpflb.Open(ebpf.ProgramID(cur.inID), 0)
	if err != nil {
		r.Why = "unreadable: " + err.Error()
		return []plan.Resource{r}
	}
	defer progs.Close()
	if r.Why, err = progs.Down(); err != nil {
		r.Why = "unreadable: " + err.Error()
	}
	return []plan.Resource{r}
}

// ActiveWithin is how recently a UDP flow sent a datagram for it to count
// as active.
const ActiveWithin = time.Minute

// LBCounts reads what a port's load balancers counted, by backend address,
// port and protocol: connections sent since they were first loaded, and
// those active now (a packet within ActiveWithin). Nothing when the port
// has none.
func (l *Linux) LBCounts(ns, port string) ([]status.BackendConns, error) {
	h, link, err := l.existingLink(ns, port)
	if link == nil || err != nil {
		return nil, err
	}
	cur, err := readLBFilters(h, link)
	if err != nil || cur.inID == 0 {
		return nil, err
	}
	progs, err := bpflb.Open(ebpf.ProgramID(cur.inID), 0)
	if err != nil {
		return nil, err
	}
	defer progs.Close()
	total, err := progs.Conns()
	if err != nil {
		return nil, err
	}
	now, err := ktimeNow()
	if err != nil {
		return nil, err
	}
	active, err := progs.Active(now, uint64(ActiveWithin.Nanoseconds()))
	if err != nil {
		return nil, err
	}
	var out []status.BackendConns
	for c, n := range total {
		out = append(out, status.BackendConns{VIP: c.VIP.String(), Addr: c.Addr.String(), Port: c.Port, Proto: c.Proto, Total: n, Active: active[c]})
	}
	slices.SortFunc(out, func(a, b status.BackendConns) int {
		return strings.Compare(fmt.Sprint(a.VIP, a.Addr, a.Port, a.Proto), fmt.Sprint(b.VIP, b.Addr, b.Port, b.Proto))
	})
	return out, nil
}

// LBDown reads which backends a port's load balancers mark down, as
// plan.PortBalancers.DownText has it; "" when the port has none.
func (l *Linux) LBDown(ns, port string) (string, error) {
	h, link, err := l.existingLink(ns, port)
	if link == nil || err != nil {
		return "", err
	}
	cur, err := readLBFilters(h, link)
	if err != nil || cur.inID == 0 {
		return "", err
	}
	progs, err := bpflb.Open(ebpf.ProgramID(cur.inID), 0)
	if err != nil {
		return "", err
	}
	defer progs.Close()
	return progs.Down()
}

// ktimeNow is the clock the programs stamp connections with
// (bpf_ktime_get_ns: CLOCK_MONOTONIC).
func ktimeNow() (uint64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, err
	}
	return uint64(ts.Nano()), nil
}
