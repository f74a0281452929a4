package dataplane

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/rtnl"
	"github.com/vnet-project/vnet/internal/plan"
)

// A steering program is the only filter in its link's clsact ingress hook.
// Its tc name carries the resource as planned (its text as a digest, see
// plan.SteerDigest) and the interface indexes it was compiled with, so
// observation reads back what runs and notices when a redirect target has
// been recreated under it.
// It runs after a port's load balancers and policy programs (prio 1 and
// 2): a frame the policy drops is never steered, and one translated to a
// backend goes where its backend is. Earlier versions put it at prio 1 or
// 2, where observation finds it stale, and the next apply moves it.
const (
	steerPrefix = plan.AliasPrefix + "steer "
	steerPrio   = 3
	steerHandle = 1
)

func steerName(r plan.Resource, to []string, ifindex []int) string {
	targets := make([]string, len(to))
	for i := range to {
		targets[i] = to[i] + "=" + strconv.Itoa(ifindex[i])
	}
	return steerPrefix + strings.Join([]string{plan.SteerDigest(r.Match), r.Name, r.Why, strings.Join(targets, ",")}, "|")
}

// parseSteerName returns the resource fields (the text as its digest) and
// the links it redirects to with the indexes it was compiled with.
func parseSteerName(name string) (digest, port, why string, targets map[string]int, ok bool) {
	rest, ok := strings.CutPrefix(name, steerPrefix)
	if !ok {
		return "", "", "", nil, false
	}
	parts := strings.Split(rest, "|")
	if len(parts) != 4 {
		return "", "", "", nil, false
	}
	targets = map[string]int{}
	for _, t := range strings.Split(parts[3], ",") {
		if t == "" {
			continue
		}
		link, idx, found := strings.Cut(t, "=")
		x, err := strconv.Atoi(idx)
		if !found || err != nil {
			return "", "", "", nil, false
		}
		targets[link] = x
	}
	return parts[0], parts[1], parts[2], targets, true
}

// ensureSteer compiles the program and attaches it, replacing any older one
// in place so that traffic never runs without steering.
// Equivalent to: tc qdisc add dev LINK clsact; tc filter replace dev LINK ingress prio 3 handle 1 bpf da obj PROG
func (l *Linux) ensureSteer(r plan.Resource) error {
	if plan.IsDigest(r.Match) {
		return fmt.Errorf("steering on %s in %s: only its digest is known (%s), not the program: run vnet apply to make it from the spec", r.Link, r.NS, r.Match)
	}
	s, err := plan.ParseSteer(r.Match)
	if err != nil {
		return err
	}
	h, link, err := l.linkIn(r.NS, r.Link)
	if err != nil {
		return err
	}
	ifindex, err := indexesOf(h, r.NS, s.To)
	if err != nil {
		return err
	}
	insns, err := steerProgram(s, ifindex)
	if err != nil {
		return err
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "vnet_steer", Type: ebpf.SchedCLS, Instructions: insns, License: "GPL"})
	if err != nil {
		return bpfErr(err)
	}
	defer prog.Close() // the filter holds its own reference
	if err := ensureClsact(h, link); err != nil {
		return err
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: steerHandle, Priority: steerPrio, Protocol: unix.ETH_P_ALL},
		Fd: prog.FD(), Name: steerName(r, s.To, ifindex), DirectAction: true,
	}
	if err := h.FilterReplace(f); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return &FeatureError{Feature: "cls_bpf classifier", Hint: "CONFIG_NET_CLS_BPF (modprobe cls_bpf)", Err: err}
		}
		return fmt.Errorf("tc -n %s filter replace dev %s ingress bpf: %w", r.NS, r.Link, err)
	}
	return deleteSteerFilters(h, r.NS, link, steerPrio)
}

// deleteSteerFilters deletes a link's steering filters but the one at
// prio keep (0: all of them).
func deleteSteerFilters(h *netlink.Handle, ns string, link netlink.Link, keep uint16) error {
	filters, err := rtnl.RetryDump(func() ([]netlink.Filter, error) { return h.FilterList(link, netlink.HANDLE_MIN_INGRESS) })
	if err != nil {
		return fmt.Errorf("tc -n %s filter show dev %s ingress: %w", ns, link.Attrs().Name, err)
	}
	for _, f := range filters {
		bf, ok := f.(*netlink.BpfFilter)
		if !ok || !strings.HasPrefix(bf.Name, steerPrefix) || bf.Priority == keep {
			continue
		}
		del := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: bf.Handle, Priority: bf.Priority, Protocol: bf.Protocol}}
		if err := h.FilterDel(del); err != nil && !errors.Is(err, unix.ENOENT) && !isGone(err) {
			return fmt.Errorf("tc -n %s filter del dev %s ingress prio %d: %w", ns, link.Attrs().Name, bf.Priority, err)
		}
		changed("steering off %s prio %d", link.Attrs().Name, bf.Priority)
	}
	return nil
}

func bpfErr(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) || errors.Is(err, ebpf.ErrNotSupported) {
		return &FeatureError{Feature: "BPF programs (sched_cls)", Hint: "CONFIG_BPF_SYSCALL, and CAP_BPF/CAP_NET_ADMIN", Err: err}
	}
	return fmt.Errorf("load steering program: %w", err)
}

func indexesOf(h *netlink.Handle, ns string, names []string) ([]int, error) {
	out := make([]int, len(names))
	for i, n := range names {
		link, err := h.LinkByName(n)
		if err != nil {
			return nil, fmt.Errorf("find uplink %s in %s: %w", n, ns, err)
		}
		out[i] = link.Attrs().Index
	}
	return out, nil
}

// Equivalent to: tc qdisc add dev LINK clsact
func ensureClsact(h *netlink.Handle, link netlink.Link) error {
	q := &netlink.GenericQdisc{QdiscType: "clsact",
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_CLSACT, Handle: netlink.MakeHandle(0xffff, 0)}}
	err := h.QdiscAdd(q)
	switch {
	case err == nil:
		changed("clsact on %s", link.Attrs().Name)
		return nil
	case errors.Is(err, unix.EEXIST):
		return nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP):
		return &FeatureError{Feature: "clsact qdisc", Hint: "CONFIG_NET_SCH_INGRESS (modprobe sch_ingress)", Err: err}
	}
	return fmt.Errorf("tc qdisc add dev %s clsact: %w", link.Attrs().Name, err)
}

// removeSteer takes the steering program away, and the clsact hook with
// it unless the port's policy programs are still there.
// Equivalent to: tc filter del dev LINK ingress prio 3 handle 1 bpf; tc qdisc del dev LINK clsact
func (l *Linux) removeSteer(r plan.Resource) error {
	h, link, err := l.existingLink(r.NS, r.Link)
	if link == nil || err != nil {
		return err
	}
	if err := deleteSteerFilters(h, r.NS, link, 0); err != nil {
		return err
	}
	return dropEmptyClsact(h, r.NS, link)
}

// observeSteer reads a link's steering program back from its tc name, its
// text as a digest (plan.ResolveSteer puts the text back). byName maps the
// namespace's link names to their current indexes: a program compiled for
// an index that now names another link, or none, is reported as stale so
// that the next apply recompiles it.
func observeSteer(h *netlink.Handle, link netlink.Link, ns string, byName map[string]int) []plan.Resource {
	filters, err := rtnl.RetryDump(func() ([]netlink.Filter, error) { return h.FilterList(link, netlink.HANDLE_MIN_INGRESS) })
	if err != nil {
		return nil
	}
	for _, f := range filters {
		bf, ok := f.(*netlink.BpfFilter)
		if !ok {
			continue
		}
		digest, port, why, targets, ok := parseSteerName(bf.Name)
		if !ok {
			continue
		}
		r := plan.Resource{Kind: plan.KindSteer, NS: ns, Link: link.Attrs().Name, Name: port, Why: why, Match: digest}
		if bf.Priority != steerPrio {
			r.Match = "stale " + digest
		}
		for to, idx := range targets {
			if byName[to] != idx {
				r.Match = "stale " + digest
			}
		}
		return []plan.Resource{r}
	}
	return nil
}

// setUplinkPort makes a bridge port a teamed uplink (isolated from the
// other uplinks, nothing flooded to it) or an ordinary port.
// Equivalent to: bridge -n NS link set dev LINK isolated on|off flood off|on mcast_flood off|on bcast_flood off|on
func setUplinkPort(h *netlink.Handle, ns string, link netlink.Link, uplink bool) error {
	name := link.Attrs().Name
	if err := h.LinkSetIsolated(link, uplink); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return &FeatureError{Feature: "bridge port isolation", Hint: "Linux 4.18 or later", Err: err}
		}
		return fmt.Errorf("bridge link set dev %s isolated %v: %w", name, uplink, err)
	}
	changed("bridge port %s: isolated %v", name, uplink)
	if err := h.LinkSetFlood(link, !uplink); err != nil {
		return fmt.Errorf("bridge link set dev %s flood %v: %w", name, !uplink, err)
	}
	changed("bridge port %s: flood %v", name, !uplink)
	// The library has no setter for these two flags: send the same
	// RTM_SETLINK it sends for the others, from inside the namespace.
	return inNS(ns, func() error {
		for _, attr := range []int{nlBrportMcastFlood, nlBrportBcastFlood} {
			if err := setBrportFlag(link.Attrs().Index, attr, !uplink); err != nil {
				return fmt.Errorf("bridge link set dev %s mcast/bcast_flood %v: %w", name, !uplink, err)
			}
			changed("bridge port %s: flag %d %v", name, attr, !uplink)
		}
		return nil
	})
}

const (
	nlBrportMcastFlood = nl.IFLA_BRPORT_MCAST_FLOOD
	nlBrportBcastFlood = nl.IFLA_BRPORT_BCAST_FLOOD
)

// setBrportFlag sets one bridge-port flag of a link in the calling thread's
// namespace.
func setBrportFlag(index, attr int, on bool) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_BRIDGE)
	msg.Index = int32(index)
	req.AddData(msg)
	val := []byte{0}
	if on {
		val[0] = 1
	}
	pi := nl.NewRtAttr(unix.IFLA_PROTINFO|unix.NLA_F_NESTED, nil)
	pi.AddRtAttr(attr, val)
	req.AddData(pi)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}
