package spec

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// An edit of one VM of thousands (a container's ADD or DEL) would read
// every VM of the spec again: find the items of the list of VMs in the
// text, look each VM's name up among those edited, and check what must be
// unique against all the others. vmLayout is what it reads, kept by the
// edit that made a document for the next edit of that document and moved
// on by each edit, so that a chain of edits (a server's, each reading the
// spec the last one made) reads only the VMs it touches. Copying the text
// and the list of VMs, which a new document needs, is what is left that
// grows with the VMs.

// vmLayout is where a document's VMs are, in its text and its list, and
// how many of its VMs have each of the keys that must be unique.
type vmLayout struct {
	items vmItems // exact for the document's Source
	// at is each VM's position in the list, by name: a hint that is
	// exact or too far back, since an edit writes a VM where it was or
	// adds it at the end, and moves those behind one it takes out
	// towards the front.
	at     map[string]int
	keys   map[vmKey]int
	spaces map[string]string // a network's address space, by its name
}

// keptLayout holds the layout an edit kept with the document it made. A
// layout is taken out for an edit, so that two edits of one document at
// once never share one: the second reads the document again.
type keptLayout struct {
	mu     sync.Mutex
	layout *vmLayout
}

func (d *Document) takeLayout() *vmLayout {
	d.kept.mu.Lock()
	defer d.kept.mu.Unlock()
	l := d.kept.layout
	d.kept.layout = nil
	return l
}

func (d *Document) keepLayout(l *vmLayout) {
	d.kept.mu.Lock()
	d.kept.layout = l
	d.kept.mu.Unlock()
}

// vmKey is one thing of a VM's that no other VM of the spec may have, as
// validatesAfterEdit checks them: its name, a TAP on its host, a port
// group vNIC's address or MAC, a network vNIC's address or MAC in the
// network's address space.
type vmKey struct {
	kind  keyKind
	space string
	value string
}

type keyKind uint8

const (
	keyName keyKind = iota
	keyTap
	keyIP
	keyMAC
	keyNetIP
	keyNetMAC
)

// layoutOf reads doc's layout: false when an edit in the text could not
// use one (the VMs are not written as a plain block list of items, one
// for each VM, or doc did not validate).
func layoutOf(doc *Document) (*vmLayout, bool) {
	src := doc.Source
	if !doc.valid || len(src) == 0 || src[len(src)-1] != '\n' || bytes.IndexByte(src, '*') >= 0 || !plainLines(src) {
		return nil, false
	}
	it, ok := findVMItems(src)
	if !ok || it.key < 0 || it.empty || len(it.starts) == 0 || len(it.starts) != len(doc.Spec.VMs) {
		return nil, false
	}
	s := doc.Spec
	l := &vmLayout{items: it, at: make(map[string]int, len(s.VMs)), keys: make(map[vmKey]int, 3*len(s.VMs)),
		spaces: make(map[string]string, len(s.Networks))}
	for i := range s.Networks {
		if _, dup := l.spaces[s.Networks[i].Name]; !dup {
			l.spaces[s.Networks[i].Name] = s.Networks[i].AddressSpace()
		}
	}
	for i := range s.VMs {
		l.at[s.VMs[i].Name] = i
		l.count(&s.VMs[i], 1)
	}
	return l, true
}

// count counts the VM's keys in (by 1) or out (by -1).
func (l *vmLayout) count(vm *VM, by int) {
	l.eachKey(vm, func(k vmKey) {
		if l.keys[k] += by; l.keys[k] <= 0 {
			delete(l.keys, k)
		}
	})
}

// eachKey calls f with each of the VM's keys.
func (l *vmLayout) eachKey(vm *VM, f func(vmKey)) {
	f(vmKey{kind: keyName, value: vm.Name})
	for _, n := range vm.NICs {
		if a := n.Attach; a != nil && a.Tap != "" {
			f(vmKey{kind: keyTap, value: vm.Host + "/" + a.Tap})
		}
		if n.Network != "" {
			space, ok := l.spaces[n.Network]
			if !ok {
				continue
			}
			for _, cidr := range []string{n.IP, n.IP6} {
				if p, err := netip.ParsePrefix(cidr); err == nil {
					f(vmKey{kind: keyNetIP, space: space, value: p.Addr().String()})
				}
			}
			if m := macKey(n.MAC); m != "" {
				f(vmKey{kind: keyNetMAC, space: space, value: m})
			}
			continue
		}
		if n.IP != "" {
			f(vmKey{kind: keyIP, value: addrText(n.IP)})
		}
		if m := macKey(n.MAC); m != "" {
			f(vmKey{kind: keyMAC, value: m})
		}
	}
}

// macKey is a MAC as checkVNICMAC keys it; "" for none or one that does
// not parse.
func macKey(mac string) string {
	if mac == "" || canonicalMAC(mac) {
		return mac
	}
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return ""
	}
	return strings.ToLower(hw.String())
}

// find is where the VM of that name is in vms, or -1.
func (l *vmLayout) find(vms []VM, name string) int {
	at, ok := l.at[name]
	if !ok {
		return -1
	}
	for i := min(at, len(vms)-1); i >= 0; i-- {
		if vms[i].Name == name {
			return i
		}
	}
	return -1
}

// vmChange is one VM an edit touches: at its position in the list, taken
// out (put < 0) or written anew (put: its index in put).
type vmChange struct{ at, put int }

// editWithLayout is EditVMs of a document whose layout l is, in its
// text, reading only the VMs it touches; it moves l on to the document it
// makes. It reports false when the edit is not one it makes (a VM both
// dropped and written, a result that does not validate, every VM taken
// out), which EditVMs then makes the long way, or reports.
func editWithLayout(doc *Document, l *vmLayout, drop []string, put []VM) (*Document, bool) {
	vms := doc.Spec.VMs
	var changes []vmChange
	var added []int // indexes in put of the VMs added at the end
	for _, name := range drop {
		if i := l.find(vms, name); i >= 0 {
			changes = append(changes, vmChange{at: i, put: -1})
		}
	}
	for j := range put {
		i := l.find(vms, put[j].Name)
		if i < 0 {
			added = append(added, j)
			continue
		}
		changes = append(changes, vmChange{at: i, put: j})
	}
	slices.SortFunc(changes, func(a, b vmChange) int { return a.at - b.at })
	for k := 1; k < len(changes); k++ {
		if changes[k].at == changes[k-1].at {
			return nil, false // twice the same VM
		}
	}
	written, ok := decodeFlowVMs(put)
	if !ok {
		return nil, false
	}
	lines := make([]string, len(put))
	for j := range put {
		lines[j] = strings.Repeat(" ", l.items.indent) + "- " + FlowVM(put[j]) + "\n"
		if !plainLines([]byte(lines[j])) || strings.IndexByte(lines[j], '*') >= 0 {
			return nil, false
		}
	}
	out, items := l.editText(doc.Source, changes, added, lines)
	s := *doc.Spec
	s.VMs, ok = spliceList(vms, changes, added, written)
	if !ok {
		return nil, false
	}
	at := make([]int, 0, len(put)) // where the VMs written are in s.VMs
	for j := range put {
		if i := lastIndexOf(s.VMs, put[j].Name); i >= 0 {
			at = append(at, i)
		}
	}
	removed := make([]*VM, 0, len(changes))
	for _, c := range changes {
		removed = append(removed, &vms[c.at])
	}
	probe := &Document{Spec: &s, File: doc.File, located: &lazyPositions{fill: noPositions}}
	if !validatesAfterEditWith(probe, at, l.clashes(removed, s.VMs, at)) {
		return nil, false
	}
	next := &Document{Spec: &s, File: doc.File, Source: out, located: &lazyPositions{anchors: shiftedAnchors(doc, out, l.items.end)}, valid: true, edited: true}
	for _, vm := range removed {
		l.count(vm, -1)
		delete(l.at, vm.Name)
	}
	for _, i := range at {
		l.count(&s.VMs[i], 1)
		l.at[s.VMs[i].Name] = i
	}
	l.items = items
	next.keepLayout(l)
	return next, true
}

// lastIndexOf is where the VM of that name is, looked for from the end:
// the VMs an edit writes are added there, or written where they were.
func lastIndexOf(vms []VM, name string) int {
	for i := len(vms) - 1; i >= 0; i-- {
		if vms[i].Name == name {
			return i
		}
	}
	return -1
}

// editText makes the edit in src: the items at the changes taken out or
// rewritten (lines, by index in put), the added ones written at the end
// of the list; it returns the text and where its items are.
func (l *vmLayout) editText(src []byte, changes []vmChange, added []int, lines []string) ([]byte, vmItems) {
	it := l.items
	end := func(i int) int {
		if i+1 < len(it.starts) {
			return it.starts[i+1]
		}
		return it.end
	}
	var b bytes.Buffer
	b.Grow(len(src) + 256*len(lines))
	starts := make([]int, 0, len(it.starts)+len(added))
	from, cursor := 0, 0         // the first item and the byte not yet written
	keep := func(upTo, to int) { // the items from..upTo-1 and the text up to to, as they are
		shift := b.Len() - cursor
		for i := from; i < upTo; i++ {
			starts = append(starts, it.starts[i]+shift)
		}
		b.Write(src[cursor:to])
	}
	for _, c := range changes {
		keep(c.at, it.starts[c.at])
		if c.put >= 0 {
			starts = append(starts, b.Len())
			b.WriteString(lines[c.put])
		}
		from, cursor = c.at+1, end(c.at)
	}
	keep(len(it.starts), it.end)
	for _, j := range added {
		starts = append(starts, b.Len())
		b.WriteString(lines[j])
	}
	next := vmItems{key: it.key, keyEnd: it.keyEnd, starts: starts, end: b.Len(), indent: it.indent}
	b.Write(src[it.end:])
	return b.Bytes(), next
}

// spliceList is vms with the changes made (written: the VMs of put as
// decoded) and the added VMs at the end; false when none is left, for a
// list of no items, which the text edit does not write.
func spliceList(vms []VM, changes []vmChange, added []int, written []VM) ([]VM, bool) {
	out := make([]VM, 0, len(vms)+len(added))
	from := 0
	for _, c := range changes {
		out = append(out, vms[from:c.at]...)
		if c.put >= 0 {
			out = append(out, written[c.put])
		}
		from = c.at + 1
	}
	out = append(out, vms[from:]...)
	for _, j := range added {
		out = append(out, written[j])
	}
	return out, len(out) > 0
}

// clashes is clashesWithRest through the layout's counts: a key of a VM
// written is another's when the spec before the edit had it more often
// than the VMs the edit took out or wrote anew had it.
func (l *vmLayout) clashes(removed []*VM, vms []VM, written []int) restClash {
	return func(v *validator, _ []int, _, _ map[string]string) bool {
		gone := map[vmKey]int{}
		for _, vm := range removed {
			l.eachKey(vm, func(k vmKey) { gone[k]++ })
		}
		clash := false
		addrs := map[string]bool{}
		for _, i := range written {
			l.eachKey(&vms[i], func(k vmKey) {
				if l.keys[k]-gone[k] > 0 {
					clash = true
				}
				if k.kind == keyIP {
					addrs[k.value] = true
				}
			})
		}
		return clash || hostsHave(v.s, addrs)
	}
}
