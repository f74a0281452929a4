package topology

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// style is how a kind of node is drawn: the same colours in dot and SVG.
type style struct{ fill, stroke string }

var styles = map[Kind]style{
	KindVM:        {"#e3f2fd", "#1e88e5"},
	KindHostPort:  {"#ede7f6", "#5e35b1"},
	KindPortGroup: {"#e8f5e9", "#43a047"},
	KindNetwork:   {"#fff3e0", "#fb8c00"},
	KindSwitch:    {"#e0f2f1", "#00897b"},
	KindRouter:    {"#fce4ec", "#d81b60"},
	KindNIC:       {"#eceff1", "#546e7a"},
	KindPhysical:  {"#f5f5f5", "#757575"},
}

const edgeColour = "#78909c"

// troubled reports whether a state is one to show: anything a status
// reports but "up".
func troubled(state string) bool { return state != "" && state != "up" }

// stateStyle is how something in a state is drawn, given how it is drawn
// when up: red for trouble, grey for what is off on purpose (a vNIC cut
// from its port group, or paused).
func stateStyle(state string, up style) style {
	switch {
	case !troubled(state):
		return up
	case state == "disconnected" || state == "paused":
		return style{"#eeeeee", "#9e9e9e"}
	}
	return style{"#ffebee", "#e53935"}
}

// WriteDOT writes the graph as Graphviz dot: a cluster per host holding its
// VMs, host ports and NICs, the rows of the package's picture as ranks,
// VMs as tables with a cell per vNIC that the vNICs' edges leave from.
// The text depends only on the graph.
func (g *Graph) WriteDOT(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "digraph %s {\n", dotID("vnet "+g.Name))
	fmt.Fprintf(b, "\tgraph [label=%s, labelloc=t, fontname=\"Helvetica\", newrank=true, rankdir=TB, nodesep=0.25, ranksep=0.6];\n", dotID("infrastructure "+g.Name))
	b.WriteString("\tnode [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n")
	fmt.Fprintf(b, "\tedge [arrowhead=none, color=%q, fontname=\"Helvetica\", fontsize=9];\n", edgeColour)
	byHost := map[string][]*Node{}
	var free []*Node
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if n.Host != "" {
			byHost[n.Host] = append(byHost[n.Host], n)
		} else {
			free = append(free, n)
		}
	}
	for i, h := range hostOrder(g) {
		if len(byHost[h.Name]) == 0 {
			continue
		}
		label := "host " + h.Name
		if h.Native {
			label += " (native)"
		}
		fmt.Fprintf(b, "\tsubgraph %s {\n\t\tlabel=%s; style=\"rounded,dashed\"; color=\"#9e9e9e\";\n", dotID(fmt.Sprintf("cluster_%d", i)), dotID(label))
		for _, n := range byHost[h.Name] {
			writeDOTNode(b, n, "\t\t")
		}
		b.WriteString("\t}\n")
	}
	for _, n := range free {
		writeDOTNode(b, n, "\t")
	}
	for _, row := range rowsOf(g) {
		if len(row) == 0 {
			continue
		}
		b.WriteString("\t{rank=same;")
		for _, n := range row {
			b.WriteString(" " + dotID(n.ID) + ";")
		}
		b.WriteString("}\n")
	}
	kinds := make(map[string]Kind, len(g.Nodes))
	for _, n := range g.Nodes {
		kinds[n.ID] = n.Kind
	}
	for _, e := range g.Edges {
		from := dotID(e.From)
		if e.FromPort != "" {
			from += ":" + dotID(e.FromPort) + ":s"
		}
		var attrs []string
		if e.Label != "" {
			attrs = append(attrs, "label="+dotID(e.Label))
		}
		if e.Dashed {
			attrs = append(attrs, "style=dashed")
		}
		if rowOf[kinds[e.From]] == rowOf[kinds[e.To]] {
			attrs = append(attrs, "constraint=false")
		}
		fmt.Fprintf(b, "\t%s -> %s", from, dotID(e.To))
		if len(attrs) > 0 {
			fmt.Fprintf(b, " [%s]", strings.Join(attrs, ", "))
		}
		b.WriteString(";\n")
	}
	b.WriteString("}\n")
	return b.Flush()
}

func writeDOTNode(b *bufio.Writer, n *Node, indent string) {
	st := stateStyle(n.State, styles[n.Kind])
	stroke, fill := st.stroke, st.fill
	if n.Kind == KindVM {
		fmt.Fprintf(b, "%s%s [shape=plain, label=<%s>];\n", indent, dotID(n.ID), vmTable(n))
		return
	}
	lines := append([]string{n.Name}, n.Detail...)
	if troubled(n.State) {
		lines = append(lines, n.State)
	}
	shape := "box"
	switch n.Kind {
	case KindRouter:
		shape = "ellipse"
	case KindPhysical:
		shape = "box3d"
	}
	fmt.Fprintf(b, "%s%s [label=%s, shape=%s, fillcolor=%q, color=%q];\n", indent, dotID(n.ID), dotID(strings.Join(lines, "\n")), shape, fill, stroke)
}

// vmTable is a VM's HTML-like label: its name over a cell per vNIC.
func vmTable(n *Node) string {
	st := styles[KindVM]
	var b strings.Builder
	fmt.Fprintf(&b, `<TABLE BORDER="1" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3" BGCOLOR=%q COLOR=%q>`, st.fill, st.stroke)
	cols := max(1, len(n.Ports))
	title := "<B>" + htmlEscape(n.Name) + "</B>"
	for _, d := range n.Detail {
		title += `<BR/><FONT POINT-SIZE="8">` + htmlEscape(d) + "</FONT>"
	}
	fmt.Fprintf(&b, `<TR><TD COLSPAN="%d">%s</TD></TR><TR>`, cols, title)
	for _, p := range n.Ports {
		bg := ""
		cell := htmlEscape(p.Name)
		for _, d := range []string{p.Detail, stateText(p.State)} {
			if d != "" {
				cell += `<BR/><FONT POINT-SIZE="8">` + htmlEscape(d) + "</FONT>"
			}
		}
		if troubled(p.State) {
			ps := stateStyle(p.State, st)
			bg = fmt.Sprintf(" BGCOLOR=%q COLOR=%q", ps.fill, ps.stroke)
		}
		fmt.Fprintf(&b, `<TD PORT=%q%s>%s</TD>`, p.Name, bg, cell)
	}
	if len(n.Ports) == 0 {
		b.WriteString(`<TD><FONT POINT-SIZE="8">no vNIC</FONT></TD>`)
	}
	b.WriteString("</TR></TABLE>")
	return b.String()
}

// stateText is a state worth printing: any but up.
func stateText(state string) string {
	if troubled(state) {
		return state
	}
	return ""
}

// dotID quotes a string as a dot ID.
func dotID(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// hostOrder is the graph's hosts, then any host a node names that the
// spec does not define (so that no node is lost).
func hostOrder(g *Graph) []Host {
	out := append([]Host(nil), g.Hosts...)
	seen := map[string]bool{}
	for _, h := range g.Hosts {
		seen[h.Name] = true
	}
	for _, n := range g.Nodes {
		if n.Host != "" && !seen[n.Host] {
			seen[n.Host] = true
			out = append(out, Host{Name: n.Host})
		}
	}
	return out
}

// rowsOf is the nodes of each row, in the graph's order.
func rowsOf(g *Graph) [numRows][]*Node {
	var rows [numRows][]*Node
	for i := range g.Nodes {
		n := &g.Nodes[i]
		rows[rowOf[n.Kind]] = append(rows[rowOf[n.Kind]], n)
	}
	return rows
}
