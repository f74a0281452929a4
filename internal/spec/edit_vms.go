package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// EditVMs returns the spec with the VMs named in drop taken out and the
// VMs in put written in: one whose name a VM of the spec has takes its
// place, the others go at the end of vms. The rest of the source is kept
// byte for byte (comments, order, style): in the usual block list of VMs
// only the items that change are rewritten, each as one line of YAML's
// flow style, so that editing one VM of thousands costs what loading the
// result costs, not a rewrite of the tree. A list written otherwise (flow
// style, anchors) is edited as a tree and written out again. The result
// is validated like any file; an edit in the text of a spec that validated
// decodes only the items it wrote (spliceVMs), so that adding a VM to
// thousands does not decode them all again, and an edit of a document an
// edit made reads only the VMs it touches (vmLayout).
func EditVMs(doc *Document, drop []string, put []VM) (*Document, error) {
	dropped := map[string]bool{}
	for _, name := range drop {
		dropped[name] = true
	}
	replaced := map[string]int{} // VM name -> index in put
	for i, vm := range put {
		if dropped[vm.Name] {
			return nil, fmt.Errorf("VM %s is both dropped and written", vm.Name)
		}
		replaced[vm.Name] = i
	}
	// A document an edit made is edited again (a server's next change):
	// its layout is read once, and kept from then on.
	l := doc.takeLayout()
	if l == nil && doc.edited {
		l, _ = layoutOf(doc)
	}
	if l != nil {
		if next, ok := editWithLayout(doc, l, drop, put); ok {
			return next, nil
		}
		doc.keepLayout(l) // unchanged: an edit that fails moves nothing on
	}
	next, err := editVMsLong(doc, dropped, replaced, put)
	if err == nil {
		next.edited = true
	}
	return next, err
}

// editVMsLong is EditVMs reading every VM: in the text when it can, else
// in the tree.
func editVMsLong(doc *Document, dropped map[string]bool, replaced map[string]int, put []VM) (*Document, error) {
	if out, tail, ok := editVMsInText(doc, dropped, replaced, put); ok {
		if next, ok := spliceVMs(doc, out, tail, dropped, replaced, put); ok {
			return next, nil
		}
		return Load(doc.File, out)
	}
	return editVMsInTree(doc, dropped, replaced, put)
}

// vmItems are where the items of the top-level block list of VMs are in
// a source: each item's first and past-last byte, the column their dashes
// are at, and where the list ends (where items go that are added).
type vmItems struct {
	key    int // the start of the "vms:" line; -1 when the spec has none
	keyEnd int // past the "vms:" line's end
	empty  bool
	starts []int
	end    int
	indent int
}

// findVMItems finds the list of VMs in src, written as a block list of
// items, each starting on a line of its own at one indentation. It
// reports false when the VMs are written otherwise.
func findVMItems(src []byte) (vmItems, bool) {
	it := vmItems{key: -1, indent: -1}
	next := 0 // where the line after the one read starts
	for start := 0; start < len(src); start = next {
		line := lineFrom(src, start, &next)
		if !bytes.HasPrefix(line, []byte("vms:")) {
			continue
		}
		rest := strings.TrimSpace(string(line[len("vms:"):]))
		if c := strings.Index(rest, "#"); c >= 0 {
			rest = strings.TrimSpace(rest[:c])
		}
		switch rest {
		case "":
		case "[]":
			it.empty = true
		default:
			return it, false // a flow list, an anchor or an alias
		}
		it.key, it.keyEnd = start, start+len(line)
		break
	}
	if it.key < 0 {
		return it, true
	}
	it.end = len(src)
	for start := next; start < len(src); start = next {
		line := lineFrom(src, start, &next)
		body := bytes.TrimLeft(line, " ")
		if len(body) == 0 || body[0] == '#' {
			continue
		}
		col := len(line) - len(body)
		isItem := body[0] == '-' && (len(body) == 1 || body[1] == ' ')
		switch {
		case it.indent < 0 && isItem && !it.empty:
			it.indent = col
			it.starts = append(it.starts, start)
		case it.indent >= 0 && col == it.indent && isItem:
			it.starts = append(it.starts, start)
		case col < it.indent || col == 0:
			it.end = start
			return it, col == 0 && !isItem
		case it.indent < 0:
			return it, false // something other than a list item under vms:
		}
	}
	return it, true
}

// lineFrom is the line of src that starts at start, without its line
// break; next is set to where the line after it starts.
func lineFrom(src []byte, start int, next *int) []byte {
	end := bytes.IndexByte(src[start:], '\n')
	if end < 0 {
		*next = len(src)
		return src[start:]
	}
	*next = start + end + 1
	return src[start : start+end]
}

// editVMsInText makes the edit in the source text; false when the VMs are
// not written as a block list it can edit so. The source from tail on
// ends the result unchanged.
func editVMsInText(doc *Document, dropped map[string]bool, replaced map[string]int, put []VM) (out []byte, tail int, ok bool) {
	src := doc.Source
	if !plainLines(src) {
		return nil, 0, false
	}
	it, ok := findVMItems(src)
	if !ok || len(it.starts) != len(doc.Spec.VMs) {
		return nil, 0, false
	}
	// Without an alias (*name) in the source, each item is the VM it
	// writes out.
	aliases := bytes.IndexByte(src, '*') >= 0
	indent := it.indent
	if indent < 0 {
		indent = 2
	}
	pad := strings.Repeat(" ", indent)
	var b bytes.Buffer
	b.Grow(len(src) + 256*len(put))
	done := map[string]bool{}
	tail = len(src)
	if it.key < 0 {
		b.Write(src)
		if len(src) > 0 && src[len(src)-1] != '\n' {
			b.WriteByte('\n')
		}
		b.WriteString("vms:\n")
	} else if it.empty {
		b.Write(src[:it.key])
		b.WriteString("vms:\n")
		b.Write(src[min(it.keyEnd+1, len(src)):it.end])
	} else {
		b.Write(src[:it.keyEnd])
		if it.keyEnd < len(src) {
			b.WriteByte('\n')
		}
		if len(it.starts) > 0 {
			b.Write(src[min(it.keyEnd+1, len(src)):it.starts[0]])
		}
		for i, start := range it.starts {
			end := it.end
			if i+1 < len(it.starts) {
				end = it.starts[i+1]
			}
			name := doc.Spec.VMs[i].Name
			if aliases && !bytes.Contains(src[start:end], []byte(name)) {
				return nil, 0, false // an item that does not name its VM: an alias, a merge key
			}
			switch j, ok := replaced[name]; {
			case dropped[name]:
			case ok:
				b.WriteString(pad + "- " + FlowVM(put[j]) + "\n")
				done[name] = true
			default:
				item := src[start:end]
				b.Write(item)
				if len(item) > 0 && item[len(item)-1] != '\n' {
					b.WriteByte('\n')
				}
			}
		}
	}
	for _, vm := range put {
		if !done[vm.Name] {
			b.WriteString(pad + "- " + FlowVM(vm) + "\n")
		}
	}
	if it.key >= 0 {
		tail = it.end
		b.Write(src[it.end:])
	}
	return b.Bytes(), tail, true
}

// spliceVMs makes the document of out, the edit editVMsInText made of
// doc's text, without decoding all of out: the VMs the edit kept are
// doc's, and only the items it wrote are decoded, from the same text.
// The spec is validated as Load validates it (checking again only the
// VMs written where that tells, validateEdit), and its positions are read
// from out when first asked for. It reports false when doc had not
// validated or the result does not, so that Load decodes out and says
// what is wrong where.
func spliceVMs(doc *Document, out []byte, tail int, dropped map[string]bool, replaced map[string]int, put []VM) (*Document, bool) {
	if !doc.valid || len(out) > MaxSpecBytes {
		return nil, false
	}
	written, ok := decodeFlowVMs(put)
	if !ok {
		return nil, false
	}
	// Only the VMs change: the rest of the spec is doc's, shared rather
	// than copied, as PinVNIs shares it.
	s := *doc.Spec
	s.VMs = make([]VM, 0, len(doc.Spec.VMs)+len(put))
	done := map[string]bool{}
	at := make([]int, 0, len(put))    // where the VMs written are in s.VMs
	for _, vm := range doc.Spec.VMs { // as editVMsInText went through the items
		switch j, ok := replaced[vm.Name]; {
		case dropped[vm.Name]:
		case ok:
			at = append(at, len(s.VMs))
			s.VMs = append(s.VMs, written[j])
			done[vm.Name] = true
		default:
			s.VMs = append(s.VMs, vm)
		}
	}
	for j, vm := range put {
		if !done[vm.Name] {
			at = append(at, len(s.VMs))
			s.VMs = append(s.VMs, written[j])
		}
	}
	// The checks that ask whether a field was written out ask of fields
	// whose zero the decoder refuses when written, so a spec decoded from
	// YAML validates the same without its positions (as a stored
	// encoding does), and positions are read only for an error, which
	// Load then reports.
	probe := &Document{Spec: &s, File: doc.File, located: &lazyPositions{fill: noPositions}}
	if errs := validateEdit(probe, at); len(errs) > 0 {
		return nil, false
	}
	return &Document{Spec: &s, File: doc.File, Source: out, located: &lazyPositions{anchors: shiftedAnchors(doc, out, tail)}, valid: true}, true
}

func noPositions() (map[string]Pos, map[string]bool) { return map[string]Pos{}, map[string]bool{} }

// decodeFlowVMs decodes the VMs as FlowVM writes them into a spec's text,
// so that each is what decoding that text gives.
func decodeFlowVMs(vms []VM) ([]VM, bool) {
	var b strings.Builder
	b.WriteString("vms:\n")
	for _, vm := range vms {
		b.WriteString("  - " + FlowVM(vm) + "\n")
	}
	d, err := Decode("", []byte(b.String()))
	if err != nil || len(d.Spec.VMs) != len(vms) {
		return nil, false
	}
	return d.Spec.VMs, true
}

// shiftedAnchors are doc's anchors (see AppendAnchors) in out, where the
// source from tail on moved by the lines the edit added or took out; nil
// when they are not known.
func shiftedAnchors(doc *Document, out []byte, tail int) *netAnchors {
	a := knownAnchors(doc)
	if a == nil || tail >= len(doc.Source) {
		return a // nothing of the source follows the VMs
	}
	nl := []byte{'\n'}
	from := bytes.Count(doc.Source[:tail], nl) + 1 // the line the tail starts
	delta := bytes.Count(out, nl) - bytes.Count(doc.Source, nl)
	move := func(p Pos) Pos {
		if p.Line >= from {
			p.Line += delta
		}
		return p
	}
	moved := &netAnchors{list: move(a.list), items: make([]Pos, len(a.items)), vni: slices.Clone(a.vni)}
	for i, p := range a.items {
		moved.items[i] = move(p)
	}
	return moved
}

// editVMsInTree makes the edit on the YAML tree and writes it out again.
func editVMsInTree(doc *Document, dropped map[string]bool, replaced map[string]int, put []VM) (*Document, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc.Source, &root); err != nil {
		return nil, err
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: the spec is not a mapping", doc.File)
	}
	top := root.Content[0]
	vms := valueOf(top, "vms")
	if vms == nil {
		top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "vms"},
			&yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"})
		vms = top.Content[len(top.Content)-1]
	}
	if vms.Kind == yaml.AliasNode || vms.Kind == yaml.ScalarNode && vms.Tag == "!!null" {
		*vms = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	}
	if vms.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s: vms is not a list", doc.File)
	}
	if len(vms.Content) != len(doc.Spec.VMs) {
		return nil, fmt.Errorf("%s: the stored YAML's vms do not match its spec", doc.File)
	}
	vms.Style = 0
	done := map[string]bool{}
	var items []*yaml.Node
	for i, item := range vms.Content {
		name := doc.Spec.VMs[i].Name
		switch j, ok := replaced[name]; {
		case dropped[name]:
		case ok:
			n, err := vmNode(put[j])
			if err != nil {
				return nil, err
			}
			items = append(items, n)
			done[name] = true
		default:
			items = append(items, item)
		}
	}
	for _, vm := range put {
		if !done[vm.Name] {
			n, err := vmNode(vm)
			if err != nil {
				return nil, err
			}
			items = append(items, n)
		}
	}
	vms.Content = items
	return reload(doc.File, &root)
}

// vmNode is a VM as a node of YAML's flow style.
func vmNode(vm VM) (*yaml.Node, error) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(FlowVM(vm)), &n); err != nil {
		return nil, err
	}
	return n.Content[0], nil
}

// FlowVM writes a VM as one line of YAML's flow style, every field as the
// spec takes it and text quoted, so that no value is read as another type.
func FlowVM(vm VM) string {
	var f flowMap
	f.str("name", vm.Name)
	f.str("host", vm.Host)
	if vm.CPUs != 0 {
		f.raw("cpus", strconv.FormatFloat(vm.CPUs, 'g', -1, 64))
	}
	nics := make([]string, len(vm.NICs))
	for i, n := range vm.NICs {
		nics[i] = flowVNIC(n)
	}
	f.raw("nics", "["+strings.Join(nics, ", ")+"]")
	return f.String()
}

func flowVNIC(n VNIC) string {
	var f flowMap
	f.str("portgroup", n.PortGroup)
	f.str("network", n.Network)
	f.str("ip", n.IP)
	f.str("ip6", n.IP6)
	f.str("mac", n.MAC)
	if n.MTU != 0 {
		f.raw("mtu", strconv.Itoa(n.MTU))
	}
	if o := n.Offloads; o != nil {
		var of flowMap
		of.boolPtr("gro", o.GRO)
		of.boolPtr("tso", o.TSO)
		f.raw("offloads", of.String())
	}
	f.boolPtr("connected", n.Connected)
	if a := n.Attach; a != nil {
		var af flowMap
		af.str("tap", a.Tap)
		af.str("netns", a.Netns)
		af.str("ifname", a.Ifname)
		af.str("container", a.Container)
		af.str("cni", a.CNI)
		f.raw("attach", af.String())
	}
	if s := n.Shaping; s != nil {
		var sf flowMap
		sf.shaper("egress", s.Egress)
		sf.shaper("ingress", s.Ingress)
		f.raw("shaping", sf.String())
	}
	return f.String()
}

// flowMap builds a mapping in YAML's flow style; fields left empty are
// left out.
type flowMap struct{ fields []string }

func (f *flowMap) raw(key, value string) { f.fields = append(f.fields, key+": "+value) }

func (f *flowMap) str(key, value string) {
	if value != "" {
		q, _ := json.Marshal(value) // a JSON string is a YAML double-quoted one
		f.raw(key, string(q))
	}
}

func (f *flowMap) boolPtr(key string, b *bool) {
	if b != nil {
		f.raw(key, strconv.FormatBool(*b))
	}
}

func (f *flowMap) shaper(key string, s *Shaper) {
	if s == nil {
		return
	}
	var sf flowMap
	sf.raw("average", s.Average.String())
	if s.Peak != 0 {
		sf.raw("peak", s.Peak.String())
	}
	sf.raw("burst", s.Burst.String())
	f.raw(key, sf.String())
}

func (f *flowMap) String() string { return "{" + strings.Join(f.fields, ", ") + "}" }

// LoadAfter is Load of src, the spec that replaces prev, one that
// validated, when src is prev's source but for some items of its block
// list of VMs, changed, added or taken out (as a client that edits a VM
// of the spec and sends it all writes it): only those items are decoded,
// and only their VMs checked again (validateEdit), as EditVMs does. It
// reports false when src is not such a spec, or when what changed does
// not validate, so that Load decodes src and says what is wrong where.
func LoadAfter(prev *Document, file string, src []byte) (*Document, bool) {
	if prev == nil || !prev.valid || !fewValues(src) || !plainLines(src) {
		return nil, false
	}
	was, ok := findVMItems(prev.Source)
	if !ok || was.key < 0 || was.empty || len(was.starts) == 0 || len(was.starts) != len(prev.Spec.VMs) {
		return nil, false
	}
	is, ok := findVMItems(src)
	if !ok || is.key < 0 || is.empty || len(is.starts) == 0 || is.indent != was.indent ||
		!bytes.Equal(src[:is.starts[0]], prev.Source[:was.starts[0]]) || !bytes.Equal(src[is.end:], prev.Source[was.end:]) {
		return nil, false
	}
	old, items := itemsOf(prev.Source, was), itemsOf(src, is)
	same := 0 // items alike at the start
	for same < len(old) && same < len(items) && bytes.Equal(old[same], items[same]) {
		same++
	}
	sameEnd := 0 // and at the end
	for sameEnd < len(old)-same && sameEnd < len(items)-same && bytes.Equal(old[len(old)-1-sameEnd], items[len(items)-1-sameEnd]) {
		sameEnd++
	}
	gone, written := old[same:len(old)-sameEnd], items[same:len(items)-sameEnd]
	// An item that anchors a node or refers to one reads otherwise, or
	// not at all, apart from the rest of the spec.
	for _, item := range slices.Concat(gone, written) {
		if bytes.ContainsAny(item, "&*") {
			return nil, false
		}
	}
	vms, ok := decodeItems(written, len(written))
	if !ok {
		return nil, false
	}
	s := *prev.Spec
	s.VMs = slices.Concat(prev.Spec.VMs[:same], vms, prev.Spec.VMs[len(old)-sameEnd:])
	at := make([]int, len(vms))
	for i := range at {
		at[i] = same + i
	}
	probe := &Document{Spec: &s, File: file, located: &lazyPositions{fill: noPositions}}
	if errs := validateEdit(probe, at); len(errs) > 0 {
		return nil, false
	}
	return &Document{Spec: &s, File: file, Source: src, located: &lazyPositions{anchors: shiftedAnchors(prev, src, was.end)}, valid: true}, true
}

// fewValues reports whether src cannot hold more values than decoding
// takes (MaxValues), so that a spec decoded in part is held to the limit
// a decode of all of it would hold it to: without aliases (*name), which
// repeat what they name, a value takes at least a byte of its own (a key
// and its empty value take two).
func fewValues(src []byte) bool { return len(src) < MaxValues && bytes.IndexByte(src, '*') < 0 }

// itemsOf are the texts of the items of a block list of VMs.
func itemsOf(src []byte, it vmItems) [][]byte {
	out := make([][]byte, len(it.starts))
	for i, start := range it.starts {
		end := it.end
		if i+1 < len(it.starts) {
			end = it.starts[i+1]
		}
		out[i] = src[start:end]
	}
	return out
}

// decodeItems decodes items of a block list of VMs, as they decode in
// their spec, when they are n VMs.
func decodeItems(items [][]byte, n int) ([]VM, bool) {
	if len(items) == 0 {
		return nil, n == 0
	}
	var b bytes.Buffer
	b.WriteString("vms:\n")
	for _, item := range items {
		b.Write(item)
		if item[len(item)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	d, err := Decode("", b.Bytes())
	if err != nil || len(d.Spec.VMs) != n {
		return nil, false
	}
	return d.Spec.VMs, true
}
