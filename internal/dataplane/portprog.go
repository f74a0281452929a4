package dataplane

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/bpfpolicy"
	"github.com/vnet-project/vnet/internal/dataplane/rtnl"
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
// holds the policy's digest, so observation reads back what runs; the two
// programs share their maps (counters, the ACL's rules and flow table).
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
// nftables, with why.
func (l *Linux) PortPrograms() (bool, string) {
	if l.WithoutPortPrograms {
		return false, "nftables (port programs turned off)"
	}
	if os.Getenv(PortPolicyEnv) == "nftables" {
		return false, "nftables (" + PortPolicyEnv + "=nftables)"
	}
	portProgSupport.once.Do(func() { portProgSupport.err = loadTestPolicy() })
	if err := portProgSupport.err; err != nil {
		return false, "nftables: this kernel does not load vnet's port programs (tc/BPF with bpf_loop, Linux 5.17 or later): " + err.Error()
	}
	return true, "tc/BPF programs on the switch ports"
}

// loadTestPolicy loads the programs with every check and an ACL, which
// is what a kernel must verify for any policy.
func loadTestPolicy() error {
	c, err := bpfpolicy.Compile(plan.PortPolicy{MAC: "02:00:00:00:00:01", GuardMAC: true, GuardIP: true, GuardRA: true, UnicastOnly: true,
		Default: plan.ActionDeny, Rules: []plan.PolicyRule{{Allow: true, In: true, Proto: "tcp", DPort: 1}}})
	if err != nil {
		return err
	}
	p, err := bpfpolicy.Load(c, nil)
	if err != nil {
		return err
	}
	p.Close()
	return nil
}

// ensurePortProg loads a port's programs and puts them in its hooks,
// replacing those there in place, so the port never runs without a
// policy. The new programs take the old ones' flow table over: a changed
// policy does not cut connections it let through before.
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
	flows := currentFlows(h, link)
	port, err := bpfpolicy.Load(c, flows)
	if flows != nil {
		flows.Close()
	}
	if err != nil {
		return bpfErr(err)
	}
	defer port.Close() // the filters hold their own references
	if err := ensureClsact(h, link); err != nil {
		return err
	}
	name := portProgName(r.Match)
	if err := replacePortFilter(h, link, netlink.HANDLE_MIN_INGRESS, port.FromVM, name); err != nil {
		return err
	}
	changed("port program on %s ingress", r.Link)
	if err := replacePortFilter(h, link, netlink.HANDLE_MIN_EGRESS, port.ToVM, name); err != nil {
		return err
	}
	return deletePortFilters(h, r.NS, link, true)
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

// currentFlows opens the flow table of the port program a link runs now,
// or returns nil.
func currentFlows(h *netlink.Handle, link netlink.Link) *ebpf.Map {
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
	if err := deletePortFilters(h, r.NS, link, false); err != nil {
		return err
	}
	return dropEmptyClsact(h, r.NS, link)
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
// namespace's links counted: one qdisc dump to find the links with a
// clsact hook, then each one's filters.
func (l *Linux) portProgCounters(ns string, out map[string]map[string]uint64) error {
	h, err := l.handle(ns)
	if err != nil {
		return err
	}
	qs, err := rtnl.RetryDump(func() ([]netlink.Qdisc, error) { return h.QdiscList(nil) })
	if err != nil {
		return fmt.Errorf("tc -n %s qdisc show: %w", ns, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent != netlink.HANDLE_CLSACT {
			continue
		}
		link, err := h.LinkByIndex(q.Attrs().LinkIndex)
		if err != nil {
			continue // gone meanwhile
		}
		f := portFilterOn(h, link, netlink.HANDLE_MIN_INGRESS)
		if f == nil {
			continue
		}
		prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(f.Id))
		if err != nil {
			continue // replaced meanwhile
		}
		c, err := bpfpolicy.Counters(prog)
		prog.Close()
		if err != nil {
			return fmt.Errorf("read the counters of %s's port program in %s: %w", link.Attrs().Name, ns, err)
		}
		out[link.Attrs().Name] = c
	}
	return nil
}

func firstNonNil(a, b *netlink.BpfFilter) *netlink.BpfFilter {
	if a != nil {
		return a
	}
	return b
}
