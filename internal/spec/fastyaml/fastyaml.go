// Package fastyaml parses the plain shape large specs are written in
// (block mappings and sequences, one flow mapping or list per line, plain
// and simply quoted scalars, no comments) into the node tree yaml.v3's
// parser makes of it, several times faster than that parser
// (docs/benchmarks.md, "Loading a spec"): a spec of 10,000 virtual
// networks is some 40,000 lines of a few values each, where yaml.v3 spends
// most of its time on generality the shape does not use. It refuses
// anything outside the shape, which yaml.v3 then parses: the tree is the
// same either way, and every error is yaml.v3's.
package fastyaml

import (
	"bytes"
	"strings"

	"gopkg.in/yaml.v3"
)

// Parse parses the simple shape of YAML into the tree yaml.v3 makes of it
// (kinds, values, styles, lines and columns; tags are left to
// Node.ShortTag, which resolves them as the parser does). It returns
// false for anything outside that shape, which yaml.v3 then parses.
func Parse(src []byte) (*yaml.Node, bool) {
	if len(src) == 0 || bytes.ContainsAny(src, "#&*!|>%@`\\") || bytes.HasPrefix(src, []byte("---")) {
		return nil, false
	}
	for _, c := range src {
		if (c < ' ' || c > '~') && c != '\n' {
			return nil, false // tabs, CRs, control characters, UTF-8: the parser's to judge
		}
	}
	p := &simpleParser{lines: strings.Split(string(src), "\n")}
	p.skipBlank()
	if p.i >= len(p.lines) || indentOf(p.lines[p.i]) != 0 || isSeqLine(p.lines[p.i], 0) {
		return nil, false
	}
	top := p.mapping(0)
	p.skipBlank()
	if p.bad || p.i < len(p.lines) {
		return nil, false
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Line: top.Line, Column: 1, Content: []*yaml.Node{top}}, true
}

type simpleParser struct {
	lines []string
	i     int  // the line being read
	bad   bool // outside the simple shape
	nodes nodeSlab
}

// nodeSlab hands out nodes from blocks: a large spec has hundreds of
// thousands, which one allocation each would make the most of the cost.
// The blocks grow from a few nodes to 1024, so that a small document (one
// VM's entry) does not cost a large one's block.
type nodeSlab []yaml.Node

func (s *nodeSlab) new(n yaml.Node) *yaml.Node {
	if len(*s) == cap(*s) {
		*s = make([]yaml.Node, 0, min(max(16, 2*cap(*s)), 1024))
	}
	*s = append(*s, n)
	return &(*s)[len(*s)-1]
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

func isSeqLine(l string, indent int) bool {
	rest := l[indent:]
	return rest == "-" || strings.HasPrefix(rest, "- ")
}

func (p *simpleParser) skipBlank() {
	for p.i < len(p.lines) && strings.TrimSpace(p.lines[p.i]) == "" {
		p.i++
	}
}

// next is the indentation of the next line that is not blank, -1 at the
// end.
func (p *simpleParser) next() int {
	p.skipBlank()
	if p.i >= len(p.lines) {
		return -1
	}
	return indentOf(p.lines[p.i])
}

// mapping reads a block mapping whose keys start at column indent.
func (p *simpleParser) mapping(indent int) *yaml.Node {
	n := p.nodes.new(yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: p.i + 1, Column: indent + 1})
	for !p.bad && p.next() == indent && !isSeqLine(p.lines[p.i], indent) {
		line, row := p.lines[p.i], p.i+1
		colon := strings.Index(line, ":")
		if colon < 0 || !simpleKey(line[indent:colon]) || colon+1 < len(line) && line[colon+1] != ' ' {
			p.bad = true
			return n
		}
		key := plainScalar(&p.nodes, line[indent:colon], row, indent+1)
		p.i++
		rest := strings.TrimLeft(line[colon+1:], " ")
		var value *yaml.Node
		switch {
		case rest != "":
			value = p.inline(rest, row, len(line)-len(rest)+1)
		default:
			switch next := p.next(); {
			case next > indent:
				value = p.block(next)
			case next == indent && isSeqLine(p.lines[p.i], indent):
				value = p.sequence(indent)
			default:
				p.bad = true // an empty value: its position is the parser's to say
				return n
			}
		}
		n.Content = append(n.Content, key, value)
	}
	if len(n.Content) == 0 {
		p.bad = true
	}
	return n
}

// block reads the block collection that starts on the next line, at
// column indent.
func (p *simpleParser) block(indent int) *yaml.Node {
	if isSeqLine(p.lines[p.i], indent) {
		return p.sequence(indent)
	}
	return p.mapping(indent)
}

// sequence reads a block sequence whose dashes are at column indent.
func (p *simpleParser) sequence(indent int) *yaml.Node {
	n := p.nodes.new(yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: p.i + 1, Column: indent + 1})
	for !p.bad && p.next() == indent && isSeqLine(p.lines[p.i], indent) {
		line, row := p.lines[p.i], p.i+1
		rest := strings.TrimLeft(line[indent+1:], " ")
		col := len(line) - len(rest) // of the item, from 0
		switch {
		case rest == "" || col != indent+2:
			p.bad = true
		case rest[0] == '{' || rest[0] == '[' || rest[0] == '"' || rest[0] == '\'' || !strings.Contains(rest, ":"):
			p.i++
			n.Content = append(n.Content, p.inline(rest, row, col+1))
		default:
			// A mapping that starts on the dash's line: read it as if its
			// first key stood on a line of its own.
			p.lines[p.i] = strings.Repeat(" ", col) + rest
			n.Content = append(n.Content, p.mapping(col))
		}
	}
	return n
}

// inline reads a value that ends its line: a flow collection or a scalar,
// at 1-based column col of line row.
func (p *simpleParser) inline(text string, row, col int) *yaml.Node {
	text = strings.TrimRight(text, " ")
	if text[0] == '{' || text[0] == '[' {
		f := flowParser{text: text, row: row, col0: col, nodes: &p.nodes}
		n := f.value()
		f.space()
		if f.bad || f.pos != len(text) {
			p.bad = true
		}
		return n
	}
	n, ok := blockScalar(&p.nodes, text, row, col)
	if !ok {
		p.bad = true
	}
	return n
}

// blockScalar is a scalar that makes up the rest of a line.
func blockScalar(nodes *nodeSlab, text string, row, col int) (*yaml.Node, bool) {
	switch text[0] {
	case '"', '\'':
		v, ok := quoted(text)
		style := yaml.DoubleQuotedStyle
		if text[0] == '\'' {
			style = yaml.SingleQuotedStyle
		}
		return nodes.new(yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: style, Value: v, Line: row, Column: col}), ok && len(v)+2 == len(text)
	}
	if !plainStart(text) || strings.Contains(text, ": ") || strings.HasSuffix(text, ":") {
		return nil, false
	}
	return plainScalar(nodes, text, row, col), true
}

// plainScalar is a plain scalar with its tag resolved once, as the parser
// resolves it: a value that starts with a letter is a string unless it
// is a boolean or null; any other is left to yaml.v3's resolution.
func plainScalar(nodes *nodeSlab, v string, row, col int) *yaml.Node {
	n := nodes.new(yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Line: row, Column: col})
	if c := v[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') || specialWords[v] {
		if tag, ok := digitsTag(v); ok {
			n.Tag = tag
		} else {
			n.Tag = ""
			n.Tag = n.ShortTag()
		}
	}
	return n
}

// digitsTag resolves, without yaml.v3's resolution (which tries a
// timestamp, integers and a regular expression for floats in turn), the
// plain scalars that start with a digit and that most specs are full
// of: a decimal number with no leading zero is an integer, and a value
// with a slash or more than one dot (an address, a subnet) is a string,
// since no integer, float or timestamp has either. It is false for any
// other value.
func digitsTag(v string) (string, bool) {
	if v == "" || v[0] < '0' || v[0] > '9' {
		return "", false
	}
	digits, dots, slash := 0, 0, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		case c == '/':
			slash = true
		}
	}
	switch {
	case slash || dots > 1:
		return "!!str", true
	case digits == len(v) && (v[0] != '0' || len(v) == 1) && len(v) <= 18:
		return "!!int", true
	}
	return "", false
}

// specialWords are the plain scalars starting with a letter that the
// parser does not take for strings.
var specialWords = map[string]bool{"true": true, "True": true, "TRUE": true, "false": true, "False": true, "FALSE": true,
	"null": true, "Null": true, "NULL": true}

// quoted is the value of a quoted scalar at the start of text, without
// escapes or doubled quotes.
func quoted(text string) (string, bool) {
	end := strings.IndexByte(text[1:], text[0])
	if end < 0 {
		return "", false
	}
	v := text[1 : 1+end]
	if text[0] == '\'' && strings.HasPrefix(text[2+end:], "'") {
		return "", false // a doubled quote
	}
	return v, !strings.Contains(v, "\\")
}

// plainStart reports whether a plain scalar may start so: no indicator.
func plainStart(s string) bool {
	return s != "" && !strings.ContainsRune("-?:,[]{}#&*!|>'\"%@` ", rune(s[0]))
}

// simpleKey reports whether a mapping key is a plain word.
func simpleKey(k string) bool {
	if k == "" || len(k) > maxSimpleKey {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return plainStart(k)
}

// maxSimpleKey bounds a key's length: the parser takes a key only within
// 1,024 characters of its start, and a spec's keys are short words.
const maxSimpleKey = 128

// flowParser reads a flow collection on one line.
type flowParser struct {
	text  string
	pos   int
	row   int
	col0  int // the 1-based column of text[0]
	bad   bool
	nodes *nodeSlab
}

func (f *flowParser) space() {
	for f.pos < len(f.text) && f.text[f.pos] == ' ' {
		f.pos++
	}
}

func (f *flowParser) value() *yaml.Node {
	f.space()
	if f.pos >= len(f.text) {
		f.bad = true
		return nil
	}
	switch f.text[f.pos] {
	case '{':
		return f.collection(yaml.MappingNode, '}')
	case '[':
		return f.collection(yaml.SequenceNode, ']')
	}
	return f.scalar()
}

func (f *flowParser) collection(kind yaml.Kind, end byte) *yaml.Node {
	tag := "!!seq"
	if kind == yaml.MappingNode {
		tag = "!!map"
	}
	n := f.nodes.new(yaml.Node{Kind: kind, Tag: tag, Style: yaml.FlowStyle, Line: f.row, Column: f.col0 + f.pos})
	if kind == yaml.MappingNode {
		// Room for a few entries' keys and values, as many as the commas
		// to the end of the line allow: those of a spec's flow mappings.
		n.Content = make([]*yaml.Node, 0, 2*(min(strings.Count(f.text[f.pos:], ","), 7)+1))
	}
	f.pos++
	for !f.bad {
		f.space()
		if f.pos < len(f.text) && f.text[f.pos] == end {
			f.pos++
			return n
		}
		if kind == yaml.MappingNode {
			key := f.scalar()
			if f.bad || key == nil || key.Style != 0 || !simpleKey(key.Value) || f.pos >= len(f.text) || f.text[f.pos] != ':' || f.pos+1 < len(f.text) && f.text[f.pos+1] != ' ' {
				f.bad = true
				return n
			}
			f.pos++
			n.Content = append(n.Content, key)
		}
		v := f.value()
		if f.bad {
			return n
		}
		n.Content = append(n.Content, v)
		f.space()
		switch {
		case f.pos < len(f.text) && f.text[f.pos] == ',':
			f.pos++
			f.space()
			if f.pos < len(f.text) && f.text[f.pos] == end {
				f.bad = true // a trailing comma: the parser's to judge
			}
		case f.pos < len(f.text) && f.text[f.pos] == end:
		default:
			f.bad = true
		}
	}
	return n
}

// scalar reads a quoted scalar, or a plain one up to a flow indicator or
// ": ".
func (f *flowParser) scalar() *yaml.Node {
	start := f.pos
	if start >= len(f.text) {
		f.bad = true
		return nil
	}
	if c := f.text[start]; c == '"' || c == '\'' {
		v, ok := quoted(f.text[start:])
		if !ok {
			f.bad = true
			return nil
		}
		n := f.nodes.new(yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: v, Line: f.row, Column: f.col0 + start})
		if c == '\'' {
			n.Style = yaml.SingleQuotedStyle
		}
		f.pos += len(v) + 2
		return n
	}
	end := start
	for end < len(f.text) && !strings.ContainsRune(",[]{}:", rune(f.text[end])) {
		end++
	}
	v := strings.TrimRight(f.text[start:end], " ")
	if !plainStart(v) || strings.Contains(v, "  ") {
		f.bad = true
		return nil
	}
	f.pos = start + len(v)
	return plainScalar(f.nodes, v, f.row, f.col0+start)
}
