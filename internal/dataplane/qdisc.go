package dataplane

import (
	"errors"
	"fmt"
	"math"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/plan"
)

// The line-rate tree on a NIC. Class 1:1 is the wire; everything below it
// shares it. 1:10 is the default leaf today; Network I/O Control hangs its
// pool classes under 1:1 beside it.
var (
	lineRoot    = netlink.MakeHandle(1, 0)
	lineClass   = netlink.MakeHandle(1, 1)
	defaultLeaf = netlink.MakeHandle(1, 0x10)
)

// ensureLineRate shapes a link's egress to the rate of the wire it stands for.
// Equivalent to:
//
//	tc qdisc replace dev LINK root handle 1: htb default 10
//	tc class replace dev LINK parent 1: classid 1:1 htb rate R ceil R burst B cburst B (B: plan.ClassBurst of R)
//	tc class replace dev LINK parent 1:1 classid 1:10 htb rate L ceil R burst B cburst B
func (l *Linux) ensureLineRate(r plan.Resource) error {
	h, link, err := l.linkIn(r.NS, r.Link)
	if err != nil {
		return err
	}
	idx := link.Attrs().Index
	if !hasLineRoot(h, link) {
		q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: lineRoot, Parent: netlink.HANDLE_ROOT})
		q.Defcls = 0x10
		if err := h.QdiscReplace(q); err != nil {
			return htbErr(fmt.Errorf("tc qdisc replace dev %s root htb: %w", r.Link, err))
		}
		changed("htb root on %s in %s", r.Link, r.NS)
	}
	leafRate, leafQuantum := r.Rate, defaultQuantum(r.Rate)
	if r.LeafRate != 0 { // Network I/O Control: unclassified traffic has a share, not the line
		leafRate, leafQuantum = r.LeafRate, r.Quantum
	}
	for _, c := range []*netlink.HtbClass{
		htbClass(idx, lineRoot, lineClass, r.Rate, r.Rate, defaultQuantum(r.Rate), r.Burst),
		htbClass(idx, lineClass, defaultLeaf, leafRate, r.Rate, leafQuantum, r.Burst),
	} {
		if err := h.ClassReplace(c); err != nil {
			return htbErr(fmt.Errorf("tc class replace dev %s classid %s: %w", r.Link, netlink.HandleStr(c.Handle), err))
		}
		changed("htb class %s on %s in %s", netlink.HandleStr(c.Handle), r.Link, r.NS)
	}
	return nil
}

// htbClass builds a class whose rate and ceil buckets hold at least burst
// bytes (0: tc's default).
func htbClass(linkIndex int, parent, id uint32, rate, ceil uint64, quantum uint32, burst uint64) *netlink.HtbClass {
	var buffer, cbuffer uint32
	if burst > 0 {
		buffer, cbuffer = padBucket(rate/8, burst), padBucket(ceil/8, burst)
	}
	return netlink.NewHtbClass(
		netlink.ClassAttrs{LinkIndex: linkIndex, Parent: parent, Handle: id},
		netlink.HtbClassAttrs{Rate: rate, Ceil: ceil, Quantum: quantum, Buffer: buffer, Cbuffer: cbuffer},
	)
}

// padBucket adds a microsecond's worth of bytes at rateBytes per second:
// tc and netlink turn a bucket into ticks by way of whole microseconds of
// transmit time, which would otherwise round it below burst (by 1.3% at 10 Gbit, 7% at 100).
func padBucket(rateBytes, burst uint64) uint32 {
	return uint32(min(burst+rateBytes/1e6+1, math.MaxUint32))
}

// bucketOf is a class's bucket in bytes: plan.ClassBurst of its ceil when
// both of its buckets are exactly what htbClass makes of that, else the
// smaller.
func bucketOf(c *netlink.HtbClass) uint64 {
	want := plan.ClassBurst(c.Ceil * 8)
	if c.Buffer == netlink.Xmittime(c.Rate, padBucket(c.Rate, want)) &&
		c.Cbuffer == netlink.Xmittime(c.Ceil, padBucket(c.Ceil, want)) {
		return want
	}
	return uint64(min(netlink.Xmitsize(c.Rate, c.Buffer), netlink.Xmitsize(c.Ceil, c.Cbuffer)))
}

// defaultQuantum is HTB's own choice (rate/r2q, r2q = 10) kept within the
// range where it neither warns nor starves: one frame to 200000 bytes.
func defaultQuantum(rate uint64) uint32 {
	return uint32(min(max(rate/8/10, 1514), 200000))
}

func hasLineRoot(h *netlink.Handle, link netlink.Link) bool {
	qs, err := h.QdiscList(link)
	if err != nil {
		return false
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_ROOT && q.Attrs().Handle == lineRoot && q.Type() == "htb" {
			return true
		}
	}
	return false
}

// Equivalent to: tc qdisc del dev LINK root
func (l *Linux) removeLineRate(r plan.Resource) error {
	h, link, err := l.existingLink(r.NS, r.Link)
	if link == nil || err != nil {
		return err
	}
	if !hasLineRoot(h, link) {
		return nil
	}
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: lineRoot, Parent: netlink.HANDLE_ROOT}, QdiscType: "htb"}
	if err := h.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("tc qdisc del dev %s root: %w", r.Link, err)
	}
	return nil
}

func htbErr(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
		return &FeatureError{Feature: "HTB qdisc", Hint: "modprobe sch_htb (CONFIG_NET_SCH_HTB)", Err: err}
	}
	return err
}
