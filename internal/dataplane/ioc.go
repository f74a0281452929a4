package dataplane

import (
	"errors"
	"fmt"
	"math"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/rtnl"
	"github.com/vnet-project/vnet/internal/ioc"
	"github.com/vnet-project/vnet/internal/plan"
)

// ensurePool makes or changes a pool's class under the wire.
// Equivalent to: tc class replace dev LINK parent 1:1 classid 1:MINOR htb rate R ceil C quantum Q burst B cburst B (B: plan.ClassBurst of C)
func (l *Linux) ensurePool(r plan.Resource) error {
	h, link, err := l.linkIn(r.NS, r.Link)
	if err != nil {
		return err
	}
	class := htbClass(link.Attrs().Index, lineClass, netlink.MakeHandle(1, uint16(r.Class)), r.Rate, r.Ceil, r.Quantum, r.Burst)
	if err := h.ClassReplace(class); err != nil {
		return htbErr(fmt.Errorf("tc class replace dev %s classid 1:%x: %w", r.Link, r.Class, err))
	}
	return nil
}

// Equivalent to: tc class del dev LINK classid 1:MINOR
func (l *Linux) removePool(r plan.Resource) error {
	h, link, err := l.existingLink(r.NS, r.Link)
	if link == nil || err != nil {
		return err
	}
	class := &netlink.HtbClass{ClassAttrs: netlink.ClassAttrs{LinkIndex: link.Attrs().Index, Parent: lineClass, Handle: netlink.MakeHandle(1, uint16(r.Class))}}
	if err := h.ClassDel(class); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("tc class del dev %s classid 1:%x: %w", r.Link, r.Class, err)
	}
	return nil
}

// ensureFilter sorts matching frames into a pool's class.
// Equivalent to: tc filter replace dev LINK parent 1: prio P protocol all u32 match ... flowid 1:MINOR
func (l *Linux) ensureFilter(r plan.Resource) error {
	h, link, err := l.linkIn(r.NS, r.Link)
	if err != nil {
		return err
	}
	keys, err := ioc.DecodeKeys(r.Match)
	if err != nil {
		return err
	}
	sel := &netlink.TcU32Sel{Flags: nl.TC_U32_TERMINAL}
	for _, k := range keys {
		sel.Keys = append(sel.Keys, netlink.TcU32Key{Mask: k.Mask, Val: k.Val & k.Mask, Off: k.Off})
	}
	sel.Nkeys = uint8(len(sel.Keys))
	f := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: lineRoot, Priority: r.Prio, Protocol: unix.ETH_P_ALL},
		ClassId:     netlink.MakeHandle(1, uint16(r.Class)),
		Sel:         sel,
	}
	if err := h.FilterAdd(f); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return &FeatureError{Feature: "u32 classifier", Hint: "modprobe cls_u32 (CONFIG_NET_CLS_U32)", Err: err}
		}
		return fmt.Errorf("tc filter add dev %s parent 1: prio %d u32: %w", r.Link, r.Prio, err)
	}
	return nil
}

// Equivalent to: tc filter del dev LINK parent 1: prio P
func (l *Linux) removeFilter(r plan.Resource) error {
	h, link, err := l.existingLink(r.NS, r.Link)
	if link == nil || err != nil {
		return err
	}
	f := &netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: lineRoot, Priority: r.Prio, Protocol: unix.ETH_P_ALL}}
	if err := h.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("tc filter del dev %s parent 1: prio %d: %w", r.Link, r.Prio, err)
	}
	return nil
}

// The shaper's root handle, distinct from the line-rate tree's.
var shaperRoot = netlink.MakeHandle(2, 0)

// shaperMinburst is the peak bucket: a whole GSO frame may leave at once.
const shaperMinburst = 64 << 10

// ensureShaper puts a token bucket at the link's root.
// Equivalent to: tc qdisc replace dev LINK root handle 2: tbf rate AVG burst B peakrate PEAK mtu 64k latency 50ms
func (l *Linux) ensureShaper(r plan.Resource) error {
	h, link, err := l.linkIn(r.NS, r.Link)
	if err != nil {
		return err
	}
	rate := r.Rate / 8
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: shaperRoot, Parent: netlink.HANDLE_ROOT},
		Rate:       rate,
		Buffer:     netlink.Xmittime(rate, uint32(r.Burst)),
		Limit:      uint32(min(r.Burst+rate/20, 1<<30)), // about 50 ms of queue beyond the burst
	}
	if r.Ceil > 0 {
		q.Peakrate, q.Minburst = r.Ceil/8, shaperMinburst
	}
	if err := h.QdiscReplace(q); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return &FeatureError{Feature: "TBF qdisc", Hint: "modprobe sch_tbf (CONFIG_NET_SCH_TBF)", Err: err}
		}
		return fmt.Errorf("tc qdisc replace dev %s root tbf: %w", r.Link, err)
	}
	return nil
}

// Equivalent to: tc qdisc del dev LINK root
func (l *Linux) removeShaper(r plan.Resource) error {
	h, link, err := l.existingLink(r.NS, r.Link)
	if link == nil || err != nil {
		return err
	}
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: shaperRoot, Parent: netlink.HANDLE_ROOT}, QdiscType: "tbf"}
	if err := h.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("tc qdisc del dev %s root: %w", r.Link, err)
	}
	return nil
}

// existingLink returns the link, or nil (and no error) when it or its
// namespace is gone: removing from what is gone succeeds.
func (l *Linux) existingLink(ns, name string) (*netlink.Handle, netlink.Link, error) {
	if !netnsExists(ns) {
		return nil, nil, nil
	}
	h, link, err := l.linkIn(ns, name)
	if isGone(err) {
		return nil, nil, nil
	}
	return h, link, err
}

// observeTC reads a link's line-rate tree (wire, leaf, pools), filters and
// shaper from its qdiscs qs. hints give the shaper's burst as applied: the
// kernel keeps it as a time, which reads back to within a byte or so.
func observeTC(h *netlink.Handle, link netlink.Link, ns string, qs []netlink.Qdisc, hints map[string]plan.Resource) []plan.Resource {
	name := link.Attrs().Name
	var out []plan.Resource
	for _, q := range qs {
		if q.Attrs().Parent != netlink.HANDLE_ROOT {
			continue
		}
		switch t := q.(type) {
		case *netlink.Htb:
			if t.Handle == lineRoot {
				out = append(out, observeLineTree(h, link, ns)...)
			}
		case *netlink.Tbf:
			if t.Handle != shaperRoot {
				continue
			}
			s := plan.Resource{Kind: plan.KindShaper, NS: ns, Link: name, Rate: t.Rate * 8, Ceil: t.Peakrate * 8,
				Burst: uint64(netlink.Xmitsize(t.Rate, t.Buffer))}
			if hint, ok := hints[s.Key()]; ok && closeTo(s.Burst, hint.Burst) {
				s.Burst = hint.Burst
			}
			out = append(out, s)
		}
	}
	return out
}

func closeTo(a, b uint64) bool {
	d := max(a, b) - min(a, b)
	return d*100 <= max(b, 100) // within 1%
}

func observeLineTree(h *netlink.Handle, link netlink.Link, ns string) []plan.Resource {
	name := link.Attrs().Name
	classes, err := rtnl.RetryDump(func() ([]netlink.Class, error) { return h.ClassList(link, 0) })
	if err != nil {
		return nil
	}
	line := plan.Resource{Kind: plan.KindLineRate, NS: ns, Link: name, Burst: math.MaxUint64}
	var leafRate uint64
	var leafQuantum uint32
	var out []plan.Resource
	for _, c := range classes {
		htb, ok := c.(*netlink.HtbClass)
		if !ok {
			continue
		}
		switch {
		case htb.Handle == lineClass:
			line.Rate = htb.Rate * 8
			line.Burst = min(line.Burst, bucketOf(htb))
		case htb.Handle == defaultLeaf:
			leafRate, leafQuantum = htb.Rate*8, htb.Quantum
			line.Burst = min(line.Burst, bucketOf(htb))
		case htb.Parent == lineClass:
			out = append(out, plan.Resource{Kind: plan.KindPool, NS: ns, Link: name, Class: uint32(htb.Handle & 0xffff),
				Rate: htb.Rate * 8, Ceil: htb.Ceil * 8, Quantum: htb.Quantum, Burst: bucketOf(htb)})
		}
	}
	if line.Rate == 0 {
		return nil
	}
	// A leaf with the whole line and the default quantum is the plain tree.
	if leafRate != line.Rate || leafQuantum != defaultQuantum(line.Rate) {
		line.LeafRate, line.Quantum = leafRate, leafQuantum
	}
	out = append(out, line)
	filters, _ := rtnl.RetryDump(func() ([]netlink.Filter, error) { return h.FilterList(link, lineRoot) })
	for _, f := range filters {
		u, ok := f.(*netlink.U32)
		if !ok || u.Sel == nil || u.ClassId == 0 {
			continue // u32's hash tables, listed beside the filters
		}
		var keys []ioc.Key
		for _, k := range u.Sel.Keys {
			keys = append(keys, ioc.Key{Off: k.Off, Mask: k.Mask, Val: k.Val})
		}
		out = append(out, plan.Resource{Kind: plan.KindFilter, NS: ns, Link: name, Prio: u.Priority,
			Match: ioc.EncodeKeys(keys), Class: uint32(u.ClassId & 0xffff)})
	}
	return out
}

// TCCounters reads the counters of a link's classes (by minor) and of its
// root qdisc. Equivalent to: tc -s class show dev LINK; tc -s qdisc show dev LINK
func (l *Linux) TCCounters(ns, link string) (map[uint32]plan.Counters, plan.Counters, error) {
	h, lk, err := l.linkIn(ns, link)
	if err != nil {
		return nil, plan.Counters{}, err
	}
	classes := map[uint32]plan.Counters{}
	cs, err := h.ClassList(lk, 0)
	if err != nil {
		return nil, plan.Counters{}, fmt.Errorf("tc -s class show dev %s: %w", link, err)
	}
	for _, c := range cs {
		if st := c.Attrs().Statistics; st != nil {
			classes[c.Attrs().Handle&0xffff] = counters(st.Basic, st.Queue)
		}
	}
	var root plan.Counters
	qs, err := h.QdiscList(lk)
	if err != nil {
		return nil, plan.Counters{}, fmt.Errorf("tc -s qdisc show dev %s: %w", link, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_ROOT && q.Attrs().Statistics != nil {
			root = counters(q.Attrs().Statistics.Basic, q.Attrs().Statistics.Queue)
		}
	}
	return classes, root, nil
}

func counters(b *netlink.GnetStatsBasic, q *netlink.GnetStatsQueue) plan.Counters {
	var c plan.Counters
	if b != nil {
		c.Bytes, c.Packets = b.Bytes, uint64(b.Packets)
	}
	if q != nil {
		c.Drops, c.Overlimits, c.Backlog, c.Qlen = uint64(q.Drops), uint64(q.Overlimits), uint64(q.Backlog), uint64(q.Qlen)
	}
	return c
}
