package dataplane

import (
	"errors"
	"fmt"

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
//	tc class replace dev LINK parent 1: classid 1:1 htb rate R ceil R
//	tc class replace dev LINK parent 1:1 classid 1:10 htb rate R ceil R
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
	}
	for _, c := range []struct{ parent, id uint32 }{{lineRoot, lineClass}, {lineClass, defaultLeaf}} {
		class := htbClass(idx, c.parent, c.id, r.Rate)
		if err := h.ClassReplace(class); err != nil {
			return htbErr(fmt.Errorf("tc class replace dev %s classid %s: %w", r.Link, netlink.HandleStr(c.id), err))
		}
	}
	return nil
}

func htbClass(linkIndex int, parent, id uint32, rate uint64) *netlink.HtbClass {
	bytesPerSec := rate / 8
	return netlink.NewHtbClass(
		netlink.ClassAttrs{LinkIndex: linkIndex, Parent: parent, Handle: id},
		netlink.HtbClassAttrs{Rate: rate, Ceil: rate, Quantum: uint32(min(max(bytesPerSec/10, 1514), 200000))},
	)
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

// lineRate reads the rate of class 1:1, or 0 if the link is not shaped.
func lineRate(h *netlink.Handle, link netlink.Link) uint64 {
	if !hasLineRoot(h, link) {
		return 0
	}
	classes, err := h.ClassList(link, 0)
	if err != nil {
		return 0
	}
	for _, c := range classes {
		if htb, ok := c.(*netlink.HtbClass); ok && htb.Handle == lineClass {
			return htb.Rate * 8
		}
	}
	return 0
}

// Equivalent to: tc qdisc del dev LINK root
func (l *Linux) removeLineRate(r plan.Resource) error {
	if !netnsExists(r.NS) {
		return nil
	}
	h, link, err := l.linkIn(r.NS, r.Link)
	if isGone(err) {
		return nil
	}
	if err != nil {
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
