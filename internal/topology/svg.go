package topology

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// WriteSVG draws the graph as a standalone SVG document, laid out here
// (see the package's comment for why not by Graphviz). Colours are
// attributes, not a <style> sheet, since a page that embeds the SVG inline
// would apply a sheet to the whole page; classes and data-* attributes
// (data-id, data-kind, data-host, data-state) are there for the page to
// style and script it. The bytes depend only on the graph.
func (g *Graph) WriteSVG(w io.Writer) error {
	l := layOut(g)
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" class="vnet-topology" width="%s" height="%s" viewBox="0 0 %s %s" `+
		`font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="%d">`+"\n", num(l.width), num(l.height), num(l.width), num(l.height), nameSize)
	fmt.Fprintf(b, "<title>%s</title>\n", xmlEscape(l.title))
	fmt.Fprintf(b, `<rect class="background" width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="14" font-weight="bold" fill="#263238">%s</text>`+"\n", margin, margin+14, xmlEscape(l.title))

	b.WriteString(`<g class="hosts">` + "\n")
	for _, box := range l.boxes {
		r := box.rect
		fmt.Fprintf(b, `<g class="host" data-host="%s"><rect x="%s" y="%s" width="%s" height="%s" rx="8" fill="#fafafa" stroke="#9e9e9e" stroke-dasharray="5 3"/>`,
			xmlEscape(box.host.Name), num(r.x), num(r.y), num(r.w), num(r.h))
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="%d" fill="#616161">%s</text></g>`+"\n", num(r.x+hostPad), num(r.y+14), detailSize, xmlEscape(hostTitle(box.host)))
	}
	b.WriteString("</g>\n")

	b.WriteString(`<g class="edges" fill="none">` + "\n")
	for _, e := range g.Edges {
		writeEdge(b, l, e)
	}
	b.WriteString("</g>\n")

	b.WriteString(`<g class="nodes">` + "\n")
	for _, row := range l.rows {
		for _, p := range row {
			writeNode(b, p)
		}
	}
	b.WriteString("</g>\n</svg>\n")
	return b.Flush()
}

// writeEdge draws an edge as a curve from the bottom of its upper end
// (the vNIC's cell, for a VM) to the top of its lower end; an edge within
// a row bows below it.
func writeEdge(b *bufio.Writer, l *layout, e Edge) {
	from, to := l.byID[e.From], l.byID[e.To]
	if from == nil || to == nil {
		return
	}
	x1, y1 := from.rect.centre(), from.rect.bottom()
	for i, port := range from.n.Ports {
		if port.Name == e.FromPort && i < len(from.ports) {
			x1, y1 = from.ports[i].centre(), from.ports[i].bottom()
		}
	}
	var d string
	var lx, ly float64
	switch {
	case from.row == to.row:
		x2, y2 := to.rect.centre(), to.rect.bottom()
		bow := max(y1, y2) + rowGap*0.6
		d = fmt.Sprintf("M%s %s C%s %s %s %s %s %s", num(x1), num(y1), num(x1), num(bow), num(x2), num(bow), num(x2), num(y2))
		lx, ly = (x1+x2)/2, bow-4
	default:
		if from.row > to.row {
			from, to = to, from
			x1, y1 = from.rect.centre(), from.rect.bottom()
		}
		x2, y2 := to.rect.centre(), to.rect.y
		mid := (y1 + y2) / 2
		d = fmt.Sprintf("M%s %s C%s %s %s %s %s %s", num(x1), num(y1), num(x1), num(mid), num(x2), num(mid), num(x2), num(y2))
		// The label stands where the curve comes down to its lower end,
		// above the host's box if it has one: the labels of a switch's
		// edges then stand apart, a node's width from each other.
		lx, ly = x2, y2-6
		if hostRow(to.row) {
			ly -= hostLabel
		}
	}
	dash := ""
	if e.Dashed {
		dash = ` stroke-dasharray="4 3"`
	}
	fmt.Fprintf(b, `<path class="edge" data-from="%s" data-to="%s" d="%s" stroke="%s" stroke-width="1.3"%s/>`+"\n",
		xmlEscape(e.From), xmlEscape(e.To), d, edgeColour, dash)
	if e.Label != "" {
		fmt.Fprintf(b, `<text class="edge-label" x="%s" y="%s" text-anchor="middle" font-size="%d" fill="#455a64" stroke="#ffffff" stroke-width="3" paint-order="stroke">%s</text>`+"\n",
			num(lx), num(ly), detailSize, xmlEscape(e.Label))
	}
}

// writeNode draws a node: a box with its name and detail, and for a VM a
// cell per vNIC below its name.
func writeNode(b *bufio.Writer, p *placed) {
	n, r := p.n, p.rect
	st := stateStyle(n.State, styles[n.Kind])
	fill, stroke := st.fill, st.stroke
	fmt.Fprintf(b, `<g class="node %s" data-id="%s" data-kind="%s"`, n.Kind, xmlEscape(n.ID), n.Kind)
	if n.Host != "" {
		fmt.Fprintf(b, ` data-host="%s"`, xmlEscape(n.Host))
	}
	if n.State != "" {
		fmt.Fprintf(b, ` data-state="%s"`, xmlEscape(n.State))
	}
	b.WriteString(">")
	fmt.Fprintf(b, "<title>%s</title>", xmlEscape(tooltip(n)))
	rx := 6.0
	switch n.Kind {
	case KindRouter:
		rx = r.h / 2
	case KindPhysical, KindNIC:
		rx = 2
	}
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" rx="%s" fill="%s" stroke="%s" stroke-width="1.5"/>`,
		num(r.x), num(r.y), num(r.w), num(r.h), num(rx), fill, stroke)
	cx := r.centre()
	y := r.y + padY + nameHeight - 3
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-weight="bold" fill="#212121">%s</text>`, num(cx), num(y), xmlEscape(n.Name))
	for _, line := range p.lines() {
		y += lineHeight
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="%d" fill="#424242">%s</text>`, num(cx), num(y), detailSize, xmlEscape(line))
	}
	for i, port := range n.Ports {
		writePort(b, port, p.ports[i], stroke)
	}
	b.WriteString("</g>\n")
}

func writePort(b *bufio.Writer, port Port, c rect, stroke string) {
	ps := stateStyle(port.State, style{"#ffffff", stroke})
	fill, stroke := ps.fill, ps.stroke
	fmt.Fprintf(b, `<g class="port" data-port="%s"`, xmlEscape(port.Name))
	if port.State != "" {
		fmt.Fprintf(b, ` data-state="%s"`, xmlEscape(port.State))
	}
	fmt.Fprintf(b, `><rect x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="%s"/>`, num(c.x), num(c.y), num(c.w), num(c.h), fill, stroke)
	y := c.y + padY - 2
	for _, line := range portLines(port) {
		y += lineHeight
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="%d" fill="#212121">%s</text>`, num(c.centre()), num(y), detailSize, xmlEscape(line))
	}
	b.WriteString("</g>")
}

// tooltip is what a browser shows over a node.
func tooltip(n *Node) string {
	parts := []string{string(n.Kind) + " " + n.Name}
	if n.Host != "" {
		parts = append(parts, "on host "+n.Host)
	}
	parts = append(parts, n.Detail...)
	for _, p := range n.Ports {
		s := p.Name
		if p.Detail != "" {
			s += " " + p.Detail
		}
		if p.State != "" {
			s += " (" + p.State + ")"
		}
		parts = append(parts, s)
	}
	if n.State != "" {
		parts = append(parts, "state "+n.State)
	}
	return strings.Join(parts, "\n")
}

// num prints a coordinate with one decimal at most.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10+0, 'f', -1, 64)
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

// xmlEscape makes text safe in an element or an attribute; a control
// character XML cannot hold at all becomes U+FFFD.
func xmlEscape(s string) string {
	return xmlEscaper.Replace(strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' {
			return '\uFFFD'
		}
		return r
	}, s))
}
