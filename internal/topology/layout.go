package topology

import (
	"cmp"
	"slices"
	"unicode/utf8"
)

// The geometry of the SVG, in pixels. Text is monospace, so that a
// label's width is known here without a font: a character is 0.6 em.
const (
	nameSize   = 12
	detailSize = 10
	nameChar   = 0.61 * nameSize
	detailChar = 0.61 * detailSize
	lineHeight = 13 // a detail line
	nameHeight = 15
	padX       = 8
	padY       = 6
	minWidth   = 56

	margin     = 20
	titleSpace = 34 // the infrastructure's name above everything
	nodeGap    = 16 // between nodes of a row
	rowGap     = 56 // between rows
	hostPad    = 10 // inside a host's box
	hostLabel  = 20 // a host box's name, above its nodes
	hostGap    = 24 // between host boxes

	sweeps = 4 // rounds of barycentre ordering
)

// rect is a rectangle by its top-left corner.
type rect struct{ x, y, w, h float64 }

func (r rect) centre() float64 { return r.x + r.w/2 }
func (r rect) bottom() float64 { return r.y + r.h }

// placed is a node with its place.
type placed struct {
	n     *Node
	row   int
	rect  rect
	ports []rect // a VM's vNIC cells
	title float64
	// above and below are the neighbours in the rows before and after;
	// portTargets the node each vNIC's edge goes to.
	above, below []*placed
	portTargets  []*placed
	done         bool // placed
}

// hostBox is a host's box around its part of a row.
type hostBox struct {
	host  Host
	row   int
	rect  rect
	nodes []*placed
}

// layout is where everything of a graph goes.
type layout struct {
	title         string
	width, height float64
	rows          [numRows][]*placed
	byID          map[string]*placed
	boxes         []*hostBox
}

// hostRow reports whether a row's nodes live on hosts.
func hostRow(r int) bool { return r == rowOf[KindVM] || r == rowOf[KindNIC] }

func layOut(g *Graph) *layout {
	l := &layout{title: "infrastructure " + g.Name, byID: make(map[string]*placed, len(g.Nodes))}
	for i := range g.Nodes {
		p := &placed{n: &g.Nodes[i], row: rowOf[g.Nodes[i].Kind], portTargets: make([]*placed, len(g.Nodes[i].Ports))}
		p.size()
		l.byID[p.n.ID] = p
		l.rows[p.row] = append(l.rows[p.row], p)
	}
	for _, e := range g.Edges {
		from, to := l.byID[e.From], l.byID[e.To]
		if from != nil && to != nil && e.FromPort != "" {
			for i, port := range from.n.Ports {
				if port.Name == e.FromPort {
					from.portTargets[i] = to
				}
			}
		}
		if from != nil && to != nil && from.row != to.row {
			upper, lower := from, to
			if upper.row > lower.row {
				upper, lower = lower, upper
			}
			upper.below = append(upper.below, lower)
			lower.above = append(lower.above, upper)
		}
	}
	l.groupByHost(g)
	l.order()
	l.place()
	return l
}

// size gives a node its width and height from its text.
func (p *placed) size() {
	lines := p.lines()
	w := textWidth(p.n.Name, nameChar)
	for _, d := range lines {
		w = max(w, textWidth(d, detailChar))
	}
	p.title = padY + nameHeight + lineHeight*float64(len(lines)) + padY/2
	p.rect.w = max(minWidth, w+2*padX)
	p.rect.h = p.title
	if p.n.Kind != KindVM || len(p.n.Ports) == 0 {
		p.rect.h += padY / 2
		return
	}
	cells, cellsH := 0.0, 0.0
	widths := make([]float64, len(p.n.Ports))
	for i, port := range p.n.Ports {
		text := portLines(port)
		cw := 0.0
		for _, t := range text {
			cw = max(cw, textWidth(t, detailChar))
		}
		widths[i] = cw + 2*padX
		cells += widths[i]
		cellsH = max(cellsH, padY+lineHeight*float64(len(text))+padY/2)
	}
	if cells < p.rect.w { // cells share the VM's width
		for i := range widths {
			widths[i] += (p.rect.w - cells) / float64(len(widths))
		}
	}
	p.rect.w = max(p.rect.w, cells)
	p.rect.h += cellsH
	p.ports = make([]rect, len(widths))
	x := 0.0
	for i, w := range widths {
		p.ports[i] = rect{x: x, y: p.title, w: w, h: cellsH} // relative until placed
		x += w
	}
}

// lines are what a node shows under its name.
func (p *placed) lines() []string {
	if troubled(p.n.State) {
		return append(append([]string(nil), p.n.Detail...), p.n.State)
	}
	return p.n.Detail
}

// portLines are what a vNIC's cell shows.
func portLines(p Port) []string {
	out := []string{p.Name}
	if p.Detail != "" {
		out = append(out, p.Detail)
	}
	if troubled(p.State) {
		out = append(out, p.State)
	}
	return out
}

func textWidth(s string, char float64) float64 { return float64(utf8.RuneCountInString(s)) * char }

// groupByHost orders the host rows by host, in the spec's order, and makes
// each host's boxes.
func (l *layout) groupByHost(g *Graph) {
	for _, r := range []int{rowOf[KindVM], rowOf[KindNIC]} {
		var ordered []*placed
		for _, h := range hostOrder(g) {
			box := &hostBox{host: h, row: r}
			for _, p := range l.rows[r] {
				if p.n.Host == h.Name {
					box.nodes = append(box.nodes, p)
				}
			}
			if len(box.nodes) > 0 {
				l.boxes = append(l.boxes, box)
				ordered = append(ordered, box.nodes...)
			}
		}
		l.rows[r] = ordered
	}
}

// order sorts each row by the barycentre of its neighbours, down the rows
// and back up, a few times: the usual way to have few edges cross. The
// nodes of a host row move within their host only, so hosts keep the
// spec's order.
func (l *layout) order() {
	for range sweeps {
		for r := 1; r < numRows; r++ {
			l.sortRow(r, func(p *placed) []*placed { return p.above })
		}
		for r := numRows - 2; r >= 0; r-- {
			l.sortRow(r, func(p *placed) []*placed { return p.below })
		}
	}
}

func (l *layout) sortRow(r int, neighbours func(*placed) []*placed) {
	pos := func(p *placed, i int) float64 { return float64(i) / float64(max(1, len(l.rows[p.row])-1)) }
	index := map[*placed]int{}
	for _, row := range l.rows {
		for i, p := range row {
			index[p] = i
		}
	}
	keys := make(map[*placed]float64, len(l.rows[r]))
	for _, p := range l.rows[r] {
		ns := neighbours(p)
		if len(ns) == 0 {
			keys[p] = pos(p, index[p])
			continue
		}
		sum := 0.0
		for _, n := range ns {
			sum += pos(n, index[n])
		}
		keys[p] = sum / float64(len(ns))
	}
	byKey := func(a, b *placed) int { return cmp.Compare(keys[a], keys[b]) }
	if !hostRow(r) {
		slices.SortStableFunc(l.rows[r], byKey)
		return
	}
	i := 0
	for _, box := range l.boxes {
		if box.row == r {
			slices.SortStableFunc(box.nodes, byKey)
			i += copy(l.rows[r][i:], box.nodes)
		}
	}
}

// place gives every node its coordinates: hosts side by side, each as wide
// as the wider of its two boxes, the host rows' nodes centred in them;
// the other rows' nodes as near the mean of their neighbours as the nodes
// before them in the row allow.
func (l *layout) place() {
	y := float64(margin + titleSpace)
	var rowY [numRows]float64
	for r := range l.rows {
		if len(l.rows[r]) == 0 {
			continue
		}
		if hostRow(r) {
			y += hostLabel
		}
		rowY[r] = y
		h := 0.0
		for _, p := range l.rows[r] {
			p.rect.y = y
			h = max(h, p.rect.h)
		}
		y += h + rowGap
		if hostRow(r) {
			y += hostPad
		}
	}
	l.height = y - rowGap + margin

	l.placeHosts(rowY)
	pg, sw, phys := rowOf[KindPortGroup], rowOf[KindSwitch], rowOf[KindPhysical]
	both := func(p *placed) []*placed { return append(append([]*placed(nil), p.above...), p.below...) }
	l.placeFree(pg, func(p *placed) []*placed { return p.above })
	l.placeFree(sw, both)
	l.placeFree(pg, both) // again, now that the switches below are placed
	l.placeFree(phys, func(p *placed) []*placed { return p.above })

	l.width = 2*margin + textWidth(l.title, nameChar)
	for _, row := range l.rows {
		for _, p := range row {
			l.width = max(l.width, p.rect.x+p.rect.w+margin)
			for i := range p.ports {
				p.ports[i].x += p.rect.x
				p.ports[i].y += p.rect.y
			}
		}
	}
	for _, b := range l.boxes {
		l.width = max(l.width, b.rect.x+b.rect.w+margin)
	}
}

// placeHosts lays the hosts' columns side by side.
func (l *layout) placeHosts(rowY [numRows]float64) {
	x := float64(margin)
	for _, name := range l.hostNames() {
		var boxes []*hostBox
		colW := 0.0
		for _, b := range l.boxes {
			if b.host.Name == name {
				boxes = append(boxes, b)
				colW = max(colW, segmentWidth(b.nodes)+2*hostPad, textWidth(hostTitle(b.host), detailChar)+2*hostPad)
			}
		}
		for _, b := range boxes {
			h := 0.0
			for _, p := range l.rows[b.row] {
				h = max(h, p.rect.h)
			}
			b.rect = rect{x: x, y: rowY[b.row] - hostLabel, w: colW, h: hostLabel + h + hostPad}
			nx := x + (colW-segmentWidth(b.nodes))/2
			for _, p := range b.nodes {
				p.rect.x = nx
				p.done = true
				nx += p.rect.w + nodeGap
			}
		}
		x += colW + hostGap
	}
}

// hostNames are the hosts that have a box, in order.
func (l *layout) hostNames() []string {
	var out []string
	for _, b := range l.boxes {
		if !slices.Contains(out, b.host.Name) {
			out = append(out, b.host.Name)
		}
	}
	return out
}

func hostTitle(h Host) string {
	if h.Native {
		return "host " + h.Name + " (native)"
	}
	return "host " + h.Name
}

func segmentWidth(nodes []*placed) float64 {
	w := 0.0
	for i, p := range nodes {
		if i > 0 {
			w += nodeGap
		}
		w += p.rect.w
	}
	return w
}

// placeFree places a row whose nodes are on no host: each wants its centre
// at the mean of where the edges to its placed neighbours meet them, and
// keeps the row's order, so that it may have to stand right of that.
func (l *layout) placeFree(r int, neighbours func(*placed) []*placed) {
	next := float64(margin)
	for _, p := range l.rows[r] {
		sum, n := 0.0, 0
		for _, q := range neighbours(p) {
			if q.done {
				sum += anchor(q, p)
				n++
			}
		}
		x := next
		if n > 0 {
			x = max(x, sum/float64(n)-p.rect.w/2)
		}
		p.rect.x = x
		p.done = true
		next = x + p.rect.w + nodeGap
	}
}

// anchor is where an edge between q and p meets q: the cell of the vNIC
// that joins them, for a VM (cells are relative to their VM until every
// node is placed), or q's centre.
func anchor(q, p *placed) float64 {
	for i, t := range q.portTargets {
		if t == p {
			return q.rect.x + q.ports[i].centre()
		}
	}
	return q.rect.centre()
}
