package spec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// pinInText is PinVNIs for a spec written in the usual ways: it writes
// "vni: N" into the source text at the start of each network that leaves
// its VNI out, keeping every other byte of the file as written, and makes
// the new document from doc without decoding the YAML again: its spec is
// doc's with the VNIs set, its positions doc's moved by what was inserted
// (when first asked for). Decoding, re-encoding and loading the YAML tree
// instead costs more than a second for a spec of 10,000 networks. It
// reads only where the networks stand (netAnchors), which a document
// FromValidated made (a cache's) carries, so pinning costs what it edits,
// not a decoding of the YAML. It reports false for a spec it cannot edit so,
// which PinVNIs then edits as a tree: a list of networks in flow style,
// an item that is an alias or starts with a quoted key, a file with line
// breaks other than \n.
func pinInText(doc *Document, vnis map[string]int) (*Document, bool) {
	src := doc.Source
	if !plainLines(src) {
		return nil, false
	}
	a := doc.pinAnchors()
	if a == nil {
		return nil, false
	}
	lines := lineStarts(src)
	if off, ok := offsetOf(src, lines, a.list); !ok || src[off] != '-' {
		return nil, false // a flow list, or not a list
	}
	edits := make([]pinEdit, 0, len(doc.Spec.Networks))
	for i, n := range doc.Spec.Networks {
		if a.vni[i] || n.VNI != 0 {
			continue
		}
		if n.Name == "" {
			return nil, false
		}
		e, ok := pinEditAt(src, lines, a.items[i], vnis[n.Name])
		if !ok {
			return nil, false
		}
		e.network, e.path = i, indexPath("networks", i)
		edits = append(edits, e)
	}
	if len(edits) == 0 {
		return doc, true
	}
	out := make([]byte, 0, len(src)+len(edits)*16)
	last := 0
	for _, e := range edits {
		out = append(append(out, src[last:e.off]...), e.text...)
		last = e.off
	}
	out = append(out, src[last:]...)

	// Only the networks change: the rest of the spec is doc's, shared
	// rather than copied, as a deep copy costs more than the edit.
	s := *doc.Spec
	s.Networks = slices.Clone(s.Networks)
	for _, e := range edits {
		s.Networks[e.network].VNI = vnis[s.Networks[e.network].Name]
	}
	located := &lazyPositions{anchors: a.moved(edits)}
	if doc.located == nil {
		// Moving some 30 positions a network costs more than the edit:
		// it is done when a position is first asked for, if ever.
		positions, nulls := doc.positions, doc.nulls
		located.fill = func() (map[string]Pos, map[string]bool) {
			return movePositions(positions, edits), nulls
		}
	} // else the new source decodes when a position is asked for
	pinned := &Document{Spec: &s, File: doc.File, Source: out, located: located}
	if doc.valid {
		// Only the VNIs changed: they are all that need checking again.
		if !vnisValid(&s) {
			return nil, false // as the tree's edit would have found: let it say so
		}
	} else if errs := Validate(pinned); len(errs) > 0 {
		return nil, false
	}
	pinned.valid = true
	return pinned, true
}

// netAnchors are the positions pinning VNIs reads: the list of networks'
// and each network's (where its mapping starts), and which networks write
// a vni, even a null one.
type netAnchors struct {
	list  Pos
	items []Pos
	vni   []bool
}

// AppendAnchors appends to buf the anchors pinning VNIs reads, when they
// are known without decoding the YAML: 0 when not, else the number of
// networks plus one, the list's line and column, and each network's line,
// column and whether it writes a vni. A cache keeps them beside the spec,
// so that a document it makes (FromValidated) pins without decoding.
func (d *Document) AppendAnchors(buf []byte) []byte {
	a := knownAnchors(d)
	if a == nil {
		return binary.AppendUvarint(buf, 0)
	}
	buf = binary.AppendUvarint(buf, uint64(len(a.items))+1)
	buf = binary.AppendUvarint(binary.AppendUvarint(buf, uint64(a.list.Line)), uint64(a.list.Col))
	for i, p := range a.items {
		buf = binary.AppendUvarint(binary.AppendUvarint(buf, uint64(p.Line)), uint64(p.Col))
		written := uint64(0)
		if a.vni[i] {
			written = 1
		}
		buf = binary.AppendUvarint(buf, written)
	}
	return buf
}

// ErrDamagedAnchors says anchors are not what AppendAnchors wrote for the
// spec they came with.
var ErrDamagedAnchors = errors.New("spec: damaged anchors")

// FromValidated makes the document of src whose Spec s was decoded from
// these very bytes and validated before (a cache's copy, or an encoding
// stored beside the YAML), with the anchors AppendAnchors wrote of it,
// which must be all of anchors. It is not validated again: the caller
// vouches for s. Its positions are read from src when first asked for.
func FromValidated(file string, src []byte, s *Spec, anchors []byte) (*Document, error) {
	a, err := readAnchors(anchors, len(s.Networks))
	if err != nil {
		return nil, err
	}
	return &Document{Spec: s, File: file, Source: src, located: &lazyPositions{anchors: a}, valid: true}, nil
}

// readAnchors reads what AppendAnchors wrote of a spec of n networks; nil
// when the anchors were not known.
func readAnchors(data []byte, n int) (*netAnchors, error) {
	next := func() (uint64, bool) {
		v, k := binary.Uvarint(data)
		if k <= 0 {
			return 0, false
		}
		data = data[k:]
		return v, true
	}
	pos := func() (Pos, bool) {
		line, ok1 := next()
		col, ok2 := next()
		if !ok1 || !ok2 || line > math.MaxInt32 || col > math.MaxInt32 {
			return Pos{}, false
		}
		return Pos{int(line), int(col)}, true
	}
	count, ok := next()
	switch {
	case !ok:
		return nil, ErrDamagedAnchors
	case count == 0 && len(data) == 0:
		return nil, nil
	case count != uint64(n)+1:
		return nil, ErrDamagedAnchors
	}
	a := &netAnchors{items: make([]Pos, n), vni: make([]bool, n)}
	if a.list, ok = pos(); !ok {
		return nil, ErrDamagedAnchors
	}
	for i := range n {
		if a.items[i], ok = pos(); !ok {
			return nil, ErrDamagedAnchors
		}
		written, ok := next()
		if !ok || written > 1 {
			return nil, ErrDamagedAnchors
		}
		a.vni[i] = written == 1
	}
	if len(data) != 0 {
		return nil, ErrDamagedAnchors
	}
	return a, nil
}

// anchorsIn are the anchors among a document's positions, nil when it has
// no list of networks.
func anchorsIn(positions map[string]Pos, networks int) *netAnchors {
	list, ok := positions["networks"]
	if !ok {
		return nil
	}
	a := &netAnchors{list: list, items: make([]Pos, networks), vni: make([]bool, networks)}
	for i := range networks {
		path := indexPath("networks", i)
		a.items[i] = positions[path]
		_, a.vni[i] = positions[path+".vni"]
	}
	return a
}

// knownAnchors are a document's anchors when they are known without
// decoding its YAML, else nil.
func knownAnchors(doc *Document) *netAnchors {
	if doc.located == nil {
		return anchorsIn(doc.positions, len(doc.Spec.Networks))
	}
	return doc.located.anchors
}

// pinAnchors are the document's anchors, from its positions when it
// carries no anchors of its own.
func (d *Document) pinAnchors() *netAnchors {
	if a := knownAnchors(d); a != nil && len(a.items) == len(d.Spec.Networks) {
		return a
	}
	positions, _ := d.where()
	return anchorsIn(positions, len(d.Spec.Networks))
}

// moved are the anchors once the edits are made.
func (a *netAnchors) moved(edits []pinEdit) *netAnchors {
	m := newMover(edits)
	out := &netAnchors{list: m.move(a.list), items: make([]Pos, len(a.items)), vni: slices.Clone(a.vni)}
	for i, p := range a.items {
		out.items[i] = m.move(p)
	}
	for _, e := range edits {
		out.vni[e.network] = true
		if e.block {
			out.items[e.network] = m.editStart(e)
		}
	}
	return out
}

// vnisValid checks the networks' VNIs as Validate does, for a spec that
// validated before they were set.
func vnisValid(s *Spec) bool {
	taken := map[int]bool{}
	for _, sw := range s.Switches {
		if sw.VNI != 0 {
			taken[sw.VNI] = true
		}
	}
	for _, n := range s.Networks {
		if n.VNI == 0 {
			continue
		}
		if n.VNI < 1 || n.VNI > MaxVNI || taken[n.VNI] {
			return false
		}
		taken[n.VNI] = true
	}
	return true
}

// pinEdit is one insertion into the source: text at byte off, which is at
// pos. A block edit puts a line of its own before a mapping's first key;
// a flow edit goes after a mapping's opening brace.
type pinEdit struct {
	off   int
	pos   Pos
	text  string
	block bool
	// network is the index of the network the edit pins, path its path.
	network int
	path    string
	vni     Pos // where its vni's value stands once inserted
}

// pinEditAt makes the edit that gives the mapping at pos the VNI.
func pinEditAt(src []byte, lines []int, pos Pos, vni int) (pinEdit, bool) {
	off, ok := offsetOf(src, lines, pos)
	if !ok {
		return pinEdit{}, false
	}
	value := "vni: " + strconv.Itoa(vni)
	switch c := src[off]; {
	case c == '{':
		return pinEdit{off: off + 1, pos: pos, text: value + ", ", vni: Pos{pos.Line, pos.Col + 1 + len("vni: ")}}, true
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		// The key keeps its column on the next line, under what is
		// before it on this one: spaces and the item's dash.
		prefix := src[lines[pos.Line-1]:off]
		if len(bytes.Trim(prefix, " -")) > 0 || len(prefix) != pos.Col-1 {
			return pinEdit{}, false
		}
		indent := bytes.Repeat([]byte{' '}, len(prefix))
		return pinEdit{off: off, pos: pos, text: value + "\n" + string(indent), block: true, vni: Pos{pos.Line, pos.Col + len("vni: ")}}, true
	}
	return pinEdit{}, false
}

// movePositions is where every value stands after the edits, which are in
// file order, with the position of each inserted vni.
func movePositions(positions map[string]Pos, edits []pinEdit) map[string]Pos {
	m := newMover(edits)
	out := make(map[string]Pos, len(positions)+len(edits))
	for path, p := range positions {
		out[path] = m.move(p)
	}
	for _, e := range edits {
		before, _ := slices.BinarySearch(m.blockLines, e.pos.Line)
		out[e.path+".vni"] = Pos{e.vni.Line + before, e.vni.Col}
		if e.block { // the mapping starts where its new first key does
			out[e.path] = m.editStart(e)
		}
	}
	return out
}

// mover moves positions past edits in file order. blockAt[l]: a block
// edit on line l at that column; blockLines: the lines of block edits, in
// order. flowAt[l]: a flow edit's column and length on line l.
type mover struct {
	blockAt    map[int]int
	flowAt     map[int]flowEdit
	blockLines []int
}

type flowEdit struct{ col, width int }

func newMover(edits []pinEdit) *mover {
	m := &mover{blockAt: map[int]int{}, flowAt: map[int]flowEdit{}}
	for _, e := range edits {
		if e.block {
			m.blockAt[e.pos.Line] = e.pos.Col
			m.blockLines = append(m.blockLines, e.pos.Line)
		} else {
			m.flowAt[e.pos.Line] = flowEdit{e.pos.Col, utf8.RuneCountInString(e.text)}
		}
	}
	return m
}

// move is where the value at p stands after the edits.
func (m *mover) move(p Pos) Pos {
	moved := p
	before, _ := slices.BinarySearch(m.blockLines, p.Line) // block edits on earlier lines
	moved.Line += before
	if col, ok := m.blockAt[p.Line]; ok && p.Col >= col {
		moved.Line++
	}
	if f, ok := m.flowAt[p.Line]; ok && p.Col > f.col {
		moved.Col += f.width
	}
	return moved
}

// editStart is where a block edit's mapping starts: at its new first key,
// the vni.
func (m *mover) editStart(e pinEdit) Pos {
	before, _ := slices.BinarySearch(m.blockLines, e.pos.Line)
	return Pos{e.pos.Line + before, e.pos.Col}
}

// plainLines reports whether the source breaks lines only with \n and
// has no byte-order mark, so that its lines and columns are counted as
// yaml.v3 counts them: by \n, and by characters.
func plainLines(src []byte) bool {
	return bytes.IndexByte(src, '\r') < 0 && !bytes.HasPrefix(src, []byte("\xef\xbb\xbf")) &&
		!bytes.Contains(src, []byte("\u0085")) && !bytes.Contains(src, []byte("\u2028")) && !bytes.Contains(src, []byte("\u2029")) &&
		utf8.Valid(src)
}

// lineStarts is the byte offset of each line's start.
func lineStarts(src []byte) []int {
	starts := make([]int, 1, bytes.Count(src, []byte{'\n'})+1)
	for i, c := range src {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// offsetOf is the byte offset of a position: its line's start, and as
// many characters on as its column says.
func offsetOf(src []byte, lines []int, p Pos) (int, bool) {
	if p.Line < 1 || p.Line > len(lines) || p.Col < 1 {
		return 0, false
	}
	off := lines[p.Line-1]
	for range p.Col - 1 {
		if off >= len(src) || src[off] == '\n' {
			return 0, false
		}
		_, w := utf8.DecodeRune(src[off:])
		off += w
	}
	if off >= len(src) {
		return 0, false
	}
	return off, true
}
