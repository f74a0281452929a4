package spec

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// VMEntry is one VM's entry of a spec, decoded from a text of its own
// (a request's body that creates or replaces one VM), with where each of
// its fields stands in that text.
type VMEntry struct {
	VM  VM
	doc *Document // the entry as the only item of a spec's vms
}

// entryPath is where DecodeVM puts the entry in the spec it decodes.
const entryPath = "vms[0]"

// The entry is decoded as the only item of a spec's vms, indented under
// it, so that it is read exactly as Decode reads a spec's VMs: these are
// the lines and columns that wrapping adds before the entry's text.
const (
	entryHead   = "vms:\n  -\n"
	entryIndent = "    "
	entryLines  = 2
)

// DecodeVM reads one VM's entry, YAML or JSON (JSON is YAML), strictly as
// Decode reads an item of a spec's vms. Errors name the entry's own
// field paths (nics[0].ip) and the lines and columns of src.
func DecodeVM(file string, src []byte) (*VMEntry, error) {
	var b bytes.Buffer
	b.Grow(len(entryHead) + len(src) + len(entryIndent)*(bytes.Count(src, []byte("\n"))+1))
	b.WriteString(entryHead)
	for line := range strings.Lines(string(src)) {
		b.WriteString(entryIndent + line)
	}
	doc, err := Decode(file, b.Bytes())
	var errs Errors
	if errors.As(err, &errs) {
		return nil, relocate(errs, entryPath, entryPos)
	}
	if err != nil {
		return nil, err
	}
	if len(doc.Spec.VMs) != 1 {
		return nil, Errors{{Msg: "the body is empty: send the VM's entry"}}
	}
	return &VMEntry{VM: doc.Spec.VMs[0], doc: doc}, nil
}

// entryPos is a position of the wrapped entry as a position in its text.
func entryPos(p Pos) Pos {
	if p.Line <= entryLines {
		return Pos{} // the wrapping's own lines: no place in the text
	}
	return Pos{Line: p.Line - entryLines, Col: max(p.Col-len(entryIndent), 1)}
}

// Given reports whether the entry gives a field (a path of the entry's
// own, such as name) a value of its own.
func (e *VMEntry) Given(path string) bool { return e.doc.Given(join(entryPath, path)) }

// PosOf is where a field of the entry (a path of its own) stands in its
// text, or the nearest enclosing field written out.
func (e *VMEntry) PosOf(path string) Pos { return entryPos(e.doc.PosOf(join(entryPath, path))) }

// Errorf is a problem with a field of the entry, located in its text.
func (e *VMEntry) Errorf(path, format string, args ...any) *FieldError {
	return e.doc.Errorf(join(entryPath, path), format, args...).in(entryPath, entryPos)
}

// Relocate makes the problems a spec with the entry as its VMs' item at
// index i has into problems of the entry: those of that item name its
// own field paths, located in the entry's text; the others keep the
// spec's field paths, without a line, since the spec with the entry
// written in is a text no one wrote.
func (e *VMEntry) Relocate(errs Errors, i int) Errors {
	item := "vms[" + strconv.Itoa(i) + "]"
	out := make(Errors, 0, len(errs))
	for _, fe := range errs {
		if under(fe.Path, item) {
			rel := strings.TrimPrefix(strings.TrimPrefix(fe.Path, item), ".")
			out = append(out, &FieldError{Path: rel, Msg: fe.Msg, Pos: e.PosOf(rel)})
			continue
		}
		out = append(out, &FieldError{Path: fe.Path, Msg: fe.Msg})
	}
	return out
}

// relocate makes errors at field paths under prefix errors at paths
// relative to it, their positions moved by pos; others lose prefix's
// place too (a problem of the wrapping, such as a second document).
func relocate(errs Errors, prefix string, pos func(Pos) Pos) Errors {
	out := make(Errors, 0, len(errs))
	for _, fe := range errs {
		out = append(out, fe.in(prefix, pos))
	}
	return out
}

// in is the problem at a path relative to prefix, its position moved by pos.
func (e *FieldError) in(prefix string, pos func(Pos) Pos) *FieldError {
	path := e.Path
	switch {
	case under(path, prefix):
		path = strings.TrimPrefix(strings.TrimPrefix(path, prefix), ".")
	case path == "vms":
		path = ""
	}
	// A parser's message may name a line of the text it parsed too.
	msg := lineInMessage.ReplaceAllStringFunc(e.Msg, func(m string) string {
		n, _ := strconv.Atoi(lineInMessage.FindStringSubmatch(m)[1])
		if p := pos(Pos{Line: n, Col: 1}); p.Line > 0 {
			return "line " + strconv.Itoa(p.Line)
		}
		return m
	})
	return &FieldError{Path: path, Msg: msg, Pos: pos(e.Pos)}
}

// lineInMessage is how yaml.v3's messages name a line.
var lineInMessage = regexp.MustCompile(`\bline (\d+)\b`)

// under reports whether path is prefix or a field path inside it.
func under(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	rest := path[len(prefix):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}

// join is a field path inside parent.
func join(parent, path string) string {
	if path == "" {
		return parent
	}
	if path[0] == '[' {
		return parent + path
	}
	return parent + "." + path
}
