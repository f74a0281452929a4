package spec

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/vnet-project/vnet/internal/quote"
	"github.com/vnet-project/vnet/internal/spec/fastyaml"
)

// Bounds on what Decode reads, so that no input, however hostile, makes a
// command take more than a few seconds or more than a few hundred MB. They
// are sized for the largest spec vnet is meant to hold: a cluster's, with
// 10,000 virtual networks of two VMs each (about 2 MiB and 310,000 values
// written one object a line, 2.6 MiB in block style), with room to spare.
// The study testbeds are a few KB and a few hundred values.
const (
	// MaxSpecBytes is the largest spec file. The YAML parser alone takes
	// about half a second and 60 MB per MiB of dense input, so the worst
	// file costs about two seconds and 250 MB before it is refused or read.
	MaxSpecBytes = 4 << 20
	// MaxValues is how many YAML values (mappings, lists, scalars, keys)
	// a spec may hold once its aliases are expanded: an alias repeats
	// everything under its anchor, so a small file can stand for millions.
	MaxValues = 500_000
	// MaxValueBytes is the longest single value or key.
	MaxValueBytes = 256
	// MaxReported is how many problems an error lists before it counts
	// the rest.
	MaxReported = 20
)

// Pos is a line and column in the spec file, both from 1.
type Pos struct{ Line, Col int }

// FieldError is one problem with one field of a spec.
type FieldError struct {
	Path string // e.g. vms[0].nics[1].portgroup
	Msg  string
	Pos  Pos
}

// Error is the problem as a line of text. The path holds a spec's mapping
// keys, and the message may hold its values: both are escaped (package
// quote), whoever made the error.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(quote.Escape(e.Path) + ": ")
	}
	b.WriteString(quote.Escape(e.Msg))
	if e.Pos.Line > 0 {
		fmt.Fprintf(&b, " (line %d:%d)", e.Pos.Line, e.Pos.Col)
	}
	return b.String()
}

// Errors is every problem found in a spec, in file order.
type Errors []*FieldError

func (es Errors) Error() string {
	shown := es[:min(len(es), MaxReported)]
	msgs := make([]string, 0, len(shown)+1)
	for _, e := range shown {
		msgs = append(msgs, e.Error())
	}
	if rest := len(es) - len(shown); rest > 0 {
		msgs = append(msgs, fmt.Sprintf("... and %d more %s", rest, plural(rest, "problem", "problems")))
	}
	return strings.Join(msgs, "\n")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// clip shortens a value shown in an error message, so that a huge one
// cannot flood the terminal.
func clip(s string) string { return quote.Clip(s, quote.ClipBytes) }

// safeArgs makes every string and error argument of an error message safe
// to print (package quote): a spec's values reach terminals and logs.
func safeArgs(args []any) []any { return quote.Args(args) }

// ErrInvalid is wrapped by every validation failure, so callers can map it
// to their "bad input" exit status.
var ErrInvalid = errors.New("invalid spec")

func (es Errors) Unwrap() error { return ErrInvalid }

// Document is a parsed spec with the position of every field path, so that
// later checks (validation, admission control) can point at the line.
type Document struct {
	Spec      *Spec
	File      string
	Source    []byte
	positions map[string]Pos
	nulls     map[string]bool // paths written out as null (~), which leaves the default
	// located, when set, holds the positions and nulls instead, read from
	// Source when first asked for: a document FromValidated made has its
	// Spec without decoding its YAML.
	located *lazyPositions
	// valid is set on a document that validated (Load, Validate,
	// FromValidated, PinVNIs), which a cache may keep.
	valid bool
	// kept is what the edit that made the document knows of its VMs, for
	// the next edit of it (vmLayout); edited says an edit made it.
	kept   keptLayout
	edited bool
}

// lazyPositions are the positions of a document that FromValidated or
// PinVNIs made: they are read from its YAML, or made by fill, once, when
// first asked for. anchors, when known, are the few that pinning VNIs
// reads, so that it need not ask for the rest.
type lazyPositions struct {
	once      sync.Once
	fill      func() (map[string]Pos, map[string]bool)
	positions map[string]Pos
	nulls     map[string]bool
	anchors   *netAnchors
}

// Validated reports whether the document validated: Load's, PinVNIs', one
// Validate found no problem in, or one FromValidated made.
func (d *Document) Validated() bool { return d.valid }

// Positions returns where each field path written out stands in the file,
// and the paths written out as null (~), which leave the default. The
// caller must not change them.
func (d *Document) Positions() (positions map[string]Pos, nulls map[string]bool) {
	return d.where()
}

// where returns the document's positions and nulls.
func (d *Document) where() (map[string]Pos, map[string]bool) {
	l := d.located
	if l == nil {
		return d.positions, d.nulls
	}
	l.once.Do(func() {
		if l.fill != nil {
			l.positions, l.nulls = l.fill()
			return
		}
		// The source decoded before it was kept, so it decodes again.
		if doc, err := Decode(d.File, d.Source); err == nil {
			l.positions, l.nulls = doc.positions, doc.nulls
		}
	})
	return l.positions, l.nulls
}

// Given reports whether the spec gives a field a value of its own, rather
// than leaving it out or null.
func (d *Document) Given(path string) bool {
	positions, nulls := d.where()
	_, ok := positions[path]
	return ok && !nulls[path]
}

// PosOf returns where a field path stands in the file, or the nearest
// enclosing path that was written out.
func (d *Document) PosOf(path string) Pos {
	positions, _ := d.where()
	for p := path; p != ""; p = parentPath(p) {
		if pos, ok := positions[p]; ok {
			return pos
		}
	}
	return positions[""] // a missing top-level field: point at the document
}

// Errorf builds a FieldError located at path.
func (d *Document) Errorf(path, format string, args ...any) *FieldError {
	return &FieldError{Path: path, Msg: fmt.Sprintf(format, safeArgs(args)...), Pos: d.PosOf(path)}
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i <= 0 {
		return ""
	}
	return p[:i]
}

// LoadFile reads, decodes and validates a spec file.
func LoadFile(path string) (*Document, error) {
	src, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(path, src)
}

// ReadFile reads a spec file, up to one byte more than MaxSpecBytes, so
// that Decode tells a file too large.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	defer f.Close()
	// One byte more than allowed is enough to tell a file too large, and a
	// device or a pipe that never ends is not read to its end.
	src, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	return src, nil
}

// Load decodes and validates a spec. Every problem is reported, not just the
// first; the error is an Errors.
func Load(file string, src []byte) (*Document, error) {
	doc, err := Decode(file, src)
	if err != nil {
		return nil, err
	}
	if errs := Validate(doc); len(errs) > 0 {
		return nil, errs
	}
	return doc, nil
}

// Decode reads YAML into a Spec strictly: unknown fields and wrong types are
// errors with their field path and line.
func Decode(file string, src []byte) (*Document, error) {
	if len(src) > MaxSpecBytes {
		return nil, Errors{{Msg: fmt.Sprintf("the spec is larger than %d KiB; vnet reads no more", MaxSpecBytes>>10)}}
	}
	root, err := parseYAML(src)
	var second errSecondDocument
	if errors.As(err, &second) {
		return nil, Errors{{Msg: second.msg(), Pos: Pos{second.line, 1}}}
	}
	if err != nil {
		// The parser's message may quote the input (an anchor's name), so it is clipped too.
		msg := quote.Clip(strings.TrimPrefix(err.Error(), "yaml: "), 4*quote.ClipBytes)
		return nil, Errors{syntaxError(src, msg, yamlErrorPos(err))}
	}
	if len(root.Content) == 0 {
		return nil, Errors{{Msg: "the spec is empty"}}
	}
	// A position for each value written out: a map made at its size is
	// not grown (and rehashed) a dozen times over.
	doc := &Document{Spec: &Spec{}, File: file, Source: src,
		positions: make(map[string]Pos, min(countNodes(root.Content[0]), MaxValues)), nulls: map[string]bool{}}
	d := decoder{doc: doc, expanding: map[*yaml.Node]bool{}}
	d.decode(root.Content[0], reflect.ValueOf(doc.Spec).Elem(), "", asField)
	if len(d.errs) > 0 {
		sortErrors(d.errs)
		if d.stopped {
			// Why the rest went unread comes first, not after the problems
			// that an error lists before it counts the rest.
			d.errs = append(Errors{d.stop}, slices.DeleteFunc(d.errs, func(e *FieldError) bool { return e == d.stop })...)
		}
		return nil, d.errs
	}
	return doc, nil
}

// parseYAML parses a spec's YAML into yaml.v3's node tree. The plain
// shape a large spec is written in (block mappings and sequences, one
// flow mapping or list per line, plain and simply quoted scalars, no
// comments) is parsed by package fastyaml, several times faster than
// yaml.v3's parser; anything else, and every error, is yaml.v3's.
//
// A spec is one YAML document. yaml.v3 reads the first of several and
// ignores the rest, so a file (or a request's body) holding two would
// apply the first alone: a second document is an error at its line.
// fastyaml refuses "---" and "...", so such a file is always yaml.v3's.
func parseYAML(src []byte) (*yaml.Node, error) {
	if root, ok := fastParse(src); ok {
		return root, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return &yaml.Node{Kind: yaml.DocumentNode}, nil // nothing but blanks and comments
		}
		return nil, err
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return &root, nil
	case err != nil:
		return nil, err
	}
	return nil, errSecondDocument{line: next.Line}
}

// fastParse is fastyaml.Parse, which tests turn off to compare both
// parsers' trees.
var fastParse = fastyaml.Parse

// errSecondDocument is a spec file that holds more than one YAML document.
type errSecondDocument struct{ line int }

func (e errSecondDocument) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg()) }

func (e errSecondDocument) msg() string {
	return `a second YAML document starts here; a spec is one document (remove the "---" and what follows, or apply each document as a spec of its own)`
}

// countNodes is how many values a tree holds as written, its aliases
// counted once each; keys are not counted, as they have no position of
// their own.
func countNodes(n *yaml.Node) int {
	c := 1
	if n.Kind == yaml.MappingNode {
		for i := 1; i < len(n.Content); i += 2 {
			c += countNodes(n.Content[i])
		}
		return c
	}
	for _, m := range n.Content {
		c += countNodes(m)
	}
	return c
}

// syntaxError is the parser's error at the line the mistake is on: an
// indentation mistake a few lines below where the parser noticed it is
// pointed at, and says where the parser noticed.
func syntaxError(src []byte, msg string, at Pos) *FieldError {
	line := misindented(src)
	if at.Line == 0 || line == 0 || line < at.Line-maxNoticedAbove || line > at.Line+maxNoticedBelow {
		return &FieldError{Msg: msg, Pos: at}
	}
	msg = strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", at.Line))
	if line != at.Line {
		msg += fmt.Sprintf("; this line is indented unlike the lines around it (the YAML parser noticed at line %d)", at.Line)
	} else {
		msg += "; this line is indented unlike the lines around it"
	}
	text := strings.Split(string(src), "\n")[line-1]
	return &FieldError{Msg: msg, Pos: Pos{Line: line, Col: len(text) - len(strings.TrimLeft(text, " ")) + 1}}
}

// How far from where the parser noticed an indentation mistake the line
// misindented finds may be and still be taken for it: the parser notices
// at the start of the block the line is in, or at the line itself.
const (
	maxNoticedAbove = 2
	maxNoticedBelow = 40
)

func yamlErrorPos(err error) Pos {
	var line int
	if _, e := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); e == nil {
		return Pos{Line: line}
	}
	return Pos{}
}

type decoder struct {
	doc  *Document
	errs Errors
	// values counts what has been decoded, aliases expanded; past
	// MaxValues the decoder stops.
	values  int
	stopped bool
	stop    *FieldError // the error that says so
	// expanding holds the anchored values being decoded: an alias to one
	// of them is a value that contains itself, which the parser allows.
	expanding map[*yaml.Node]bool
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, safeArgs(args)...), Pos: Pos{n.Line, n.Column}})
}

// spend counts k more values and reports whether they are within
// MaxValues. It is asked before a list or mapping is made, so that no
// memory goes to one the limit would refuse anyway.
func (d *decoder) spend(n *yaml.Node, path string, k int) bool {
	if d.stopped {
		return false
	}
	d.values += k
	if d.values > MaxValues {
		d.stopped = true
		d.fail(n, path, "the spec holds more than %d values once its aliases (*name) are expanded; vnet reads no more (does an alias repeat a large part many times over?)", MaxValues)
		d.stop = d.errs[len(d.errs)-1]
		return false
	}
	return true
}

var textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()

// readsTextType caches readsText, which is asked of every value.
var readsTextType sync.Map // reflect.Type -> bool

// readsText reports whether a value of type t reads itself from text.
func readsText(t reflect.Type) bool {
	if r, ok := readsTextType.Load(t); ok {
		return r.(bool)
	}
	r := reflect.PointerTo(t).Implements(textUnmarshaler)
	readsTextType.Store(t, r)
	return r
}

// A role is how a value stands in what holds it, which decides what a
// zero or a null written out there means.
type role uint8

const (
	// asField is a field that is no pointer. Left out, it holds its zero
	// value and takes its default (mtu: the switch's MTU, limit: none,
	// dport: any port), so a zero written out would silently become that
	// default: it is refused. Null (~) leaves the field out.
	asField role = iota
	// asZeroField is a field whose zero may be written out: a pointer,
	// which keeps "given as zero" apart from "left out" (dscp: 0,
	// connected: false), or a field whose zero is also its default
	// (native: false), which says so with the tag spec:"zero".
	asZeroField
	// asEntry is an item of a list or a mapping's value, which is there
	// to be a value: neither null nor a zero is one.
	asEntry
)

// decode reads n into v, which stands in its parent as r says.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, r role) {
	if !d.spend(n, path, 1) {
		return
	}
	d.doc.positions[path] = Pos{n.Line, n.Column} // an alias: where it is used
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Anchor != "" {
		if d.expanding[n] {
			d.fail(n, path, "the value anchored &%s contains an alias to itself", n.Anchor)
			return
		}
		d.expanding[n] = true
		defer delete(d.expanding, n)
	}
	if n.Kind == yaml.ScalarNode {
		if n.ShortTag() == "!!null" {
			switch {
			case n.Value == "":
				d.emptyValue(n, v, path)
			case r == asEntry:
				d.fail(n, path, "%s in a list or as a mapping's value: give a value", n.Value)
			default:
				d.doc.nulls[path] = true
			}
			return
		}
		if len(n.Value) > MaxValueBytes {
			d.fail(n, path, "value %q is longer than %d bytes", n.Value, MaxValueBytes)
			return
		}
	}
	for v.Kind() == reflect.Pointer {
		v.Set(reflect.New(v.Type().Elem()))
		v = v.Elem()
		r = asZeroField // the pointer says it was given
	}
	// A struct that also reads from text (spec.Peer) takes either form.
	if readsText(v.Type()) && (n.Kind != yaml.MappingNode || v.Kind() != reflect.Struct) {
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a single value, got %s", kindName(n))
			return
		}
		if tag := n.ShortTag(); tag == "!!bool" || tag == "!!binary" {
			// A rate, a size or a peer is text: true is none of them.
			d.fail(n, path, "want %s, got %s", textKind(v.Type()), writtenAs(n))
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		if r != asZeroField && v.IsZero() {
			d.refuseZero(n, path, r)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "want a list, got %s", kindName(n))
			return
		}
		if !d.spend(n, path, len(n.Content)) { // what the items will spend, counted before the slice is made
			return
		}
		d.values -= len(n.Content)
		v.Set(reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content)))
		for i, item := range n.Content {
			d.decode(item, v.Index(i), itemPath(path, i), asEntry)
		}
	case reflect.Map:
		d.decodeMap(n, v, path)
	default:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a %s, got %s", typeName(v.Type()), kindName(n))
			return
		}
		if d.decodeScalar(n, v, path) && r != asZeroField && v.IsZero() {
			d.refuseZero(n, path, r)
		}
	}
}

// emptyValue reads a value written as nothing at all ("vms:" with
// nothing after it), which YAML reads as null. A list or mapping written
// so is an empty one, as vms: [] is, rather than one left out (which ~
// says explicitly): where the two differ (a port group's teaming.standby:
// none, or the switch's) it is what was written. A single value written
// so is refused: what was meant is anyone's guess.
func (d *decoder) emptyValue(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Slice, t.Kind() == reflect.Map, t.Kind() == reflect.Struct && !readsText(t):
	default:
		d.fail(n, path, "no value: give one, or leave the field out (~ says so explicitly)")
		return
	}
	for v.Kind() == reflect.Pointer {
		v.Set(reflect.New(v.Type().Elem()))
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	}
}

// refuseZero fails a scalar that reads as its type's zero value in a
// role that does not make that a value (see role).
func (d *decoder) refuseZero(n *yaml.Node, path string, r role) {
	switch {
	case r == asEntry:
		d.fail(n, path, "%s is not a value here: give one", writtenAs(n))
	default:
		d.fail(n, path, "%s would be taken for the field left out, and its default used: give a value, or leave the field out", writtenAs(n))
	}
}

// writtenAs shows a scalar as the spec wrote it.
func writtenAs(n *yaml.Node) string {
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 || n.Value == "" {
		return fmt.Sprintf("%q", clip(n.Value))
	}
	return clip(n.Value)
}

// decodeScalar reads a number, a boolean or a string, and reports whether
// it did. A value must be of the field's type as YAML reads it: a number
// unquoted and exactly what the field holds (YAML would otherwise cut
// 1500.5 to 1500 for a whole-number field, and let .inf and .nan into
// any number), a boolean true or false unquoted (yaml.v3 would also take
// the strings yes, no, on and off, quoted or not, where a quoted number
// is refused). A string takes any scalar as it is written.
func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string) bool {
	if setPlainScalar(n, v) {
		return true
	}
	tag := n.ShortTag()
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if tag != "!!int" {
			d.fail(n, path, "want a whole number, got %q", n.Value)
			return false
		}
		if leadingZero(n.Value) {
			d.fail(n, path, "%s: with a leading zero, YAML readers differ on whether it is octal; write it without, or as 0o%s for octal", n.Value, strings.TrimLeft(strings.TrimLeft(n.Value, "+-"), "0_"))
			return false
		}
	case reflect.Float32, reflect.Float64:
		if tag != "!!int" && tag != "!!float" {
			d.fail(n, path, "want a number, got %q", n.Value)
			return false
		}
		if tag == "!!int" && leadingZero(n.Value) {
			d.fail(n, path, "%s: with a leading zero, YAML readers differ on whether it is octal; write it without", n.Value)
			return false
		}
	case reflect.Bool:
		if tag != "!!bool" {
			d.fail(n, path, "want a boolean (true or false, unquoted), got %s", writtenAs(n))
			return false
		}
	case reflect.String:
		if tag == "!!binary" {
			d.fail(n, path, "want text, got a !!binary value")
			return false
		}
		v.SetString(n.Value) // as written: mac: 02:00:00:00:00:01, shares: 50
		return true
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		d.fail(n, path, "want a %s, got %q", typeName(v.Type()), n.Value)
		return false
	}
	if v.CanFloat() && (math.IsInf(v.Float(), 0) || math.IsNaN(v.Float())) {
		d.fail(n, path, "want a finite number, got %q", n.Value)
		return false
	}
	return true
}

// leadingZero reports whether a whole number is written in decimal digits
// with a leading zero (0755, -01_500): yaml.v3 reads it as octal, as YAML
// 1.1 did, where YAML 1.2 reads it as decimal.
func leadingZero(s string) bool {
	s = strings.TrimLeft(s, "+-")
	if len(s) < 2 || s[0] != '0' {
		return false
	}
	for _, c := range s[1:] {
		if !(c >= '0' && c <= '9' || c == '_') {
			return false // 0x.., 0o.., 0b..
		}
	}
	return true
}

// setPlainScalar sets v to n's value for the forms that make most of a
// spec, a string, a decimal whole number and true or false, as yaml.v3
// would but without its decoder for every value. It reports false for
// anything else, left to yaml.v3.
func setPlainScalar(n *yaml.Node, v reflect.Value) bool {
	if v.Type().PkgPath() != "" {
		return false // a named type may decode itself
	}
	switch v.Kind() {
	case reflect.String:
		if n.ShortTag() != "!!str" {
			return false
		}
		v.SetString(n.Value)
		return true
	case reflect.Bool:
		if n.ShortTag() != "!!bool" || (n.Value != "true" && n.Value != "false") {
			return false
		}
		v.SetBool(n.Value == "true")
		return true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, ok := plainDecimal(n)
		if !ok || v.OverflowInt(i) {
			return false
		}
		v.SetInt(i)
		return true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		i, ok := plainDecimal(n)
		if !ok || i < 0 || v.OverflowUint(uint64(i)) {
			return false
		}
		v.SetUint(uint64(i))
		return true
	}
	return false
}

// plainDecimal reads a whole number written in decimal without a sign, an
// underscore or a leading zero, which every YAML reading takes for the
// same number; anything else is left to yaml.v3.
func plainDecimal(n *yaml.Node) (int64, bool) {
	s := n.Value
	if n.ShortTag() != "!!int" || s == "" || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var i int64
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int64(c-'0')
	}
	return i, true
}

// key resolves a mapping key, which must be a plain value.
func (d *decoder) key(k *yaml.Node, path string) (*yaml.Node, bool) {
	if !d.spend(k, path, 1) {
		return nil, false
	}
	if k.Kind == yaml.AliasNode {
		k = k.Alias
	}
	switch {
	case k.Kind != yaml.ScalarNode:
		d.fail(k, path, "a key must be a single value, not %s", kindName(k))
	case len(k.Value) > MaxValueBytes:
		d.fail(k, path, "key %q is longer than %d bytes", k.Value, MaxValueBytes)
	default:
		return k, true
	}
	return nil, false
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	v.Set(reflect.MakeMap(v.Type()))
	first := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, ok := d.key(n.Content[i], path)
		if !ok {
			continue
		}
		kp := joinPath(path, k.Value)
		if prev, dup := first[k.Value]; dup {
			// YAML keeps the last; a spec that says two things means neither.
			d.fail(k, kp, "key %q given twice (first at line %d)", k.Value, prev.Line)
			continue
		}
		first[k.Value] = k
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(n.Content[i+1], elem, kp, asEntry)
		v.SetMapIndex(reflect.ValueOf(k.Value), elem)
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping of fields, got %s", kindName(n))
		return
	}
	info := fieldsOf(v.Type())
	var given uint64 // the fields seen so far, by index
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, ok := d.key(n.Content[i], path)
		if !ok {
			continue
		}
		fp := joinPath(path, k.Value)
		idx, ok := info.index[k.Value]
		if !ok {
			d.fail(k, fp, "unknown field%s (known: %s)", suggest(k.Value, info.names), strings.Join(info.names, ", "))
			continue
		}
		if given&(1<<idx) != 0 {
			d.fail(k, fp, "field given twice (first at line %d)", firstKey(n, i, k.Value).Line)
			continue
		}
		given |= 1 << idx
		d.decode(n.Content[i+1], v.Field(idx), fp, info.roles[idx])
	}
}

// firstKey is the first key of mapping n, before its i-th content node,
// that names value.
func firstKey(n *yaml.Node, i int, value string) *yaml.Node {
	for j := 0; j < i; j += 2 {
		k := n.Content[j]
		if k.Kind == yaml.AliasNode {
			k = k.Alias
		}
		if k.Kind == yaml.ScalarNode && k.Value == value {
			return k
		}
	}
	return n.Content[i]
}

// structFields is what decoding needs of a struct type: its fields by
// YAML name, and the names in order for messages.
type structFields struct {
	index map[string]int
	names []string
	// roles are the fields' roles, by index: asField, or asZeroField
	// where ZeroIsValue.
	roles []role
}

// fieldsOfType holds the structFields of each struct type decoded so far:
// a spec has hundreds of thousands of structs of a dozen types.
var fieldsOfType sync.Map // reflect.Type -> *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldsOfType.Load(t); ok {
		return f.(*structFields)
	}
	if t.NumField() > 64 {
		panic(fmt.Sprintf("spec: %s has more fields than decodeStruct tracks", t))
	}
	f := &structFields{index: map[string]int{}, roles: make([]role, t.NumField())}
	for i := 0; i < t.NumField(); i++ {
		if ZeroIsValue(t.Field(i)) {
			f.roles[i] = asZeroField
		}
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag != "" && tag != "-" {
			f.index[tag] = i
			f.names = append(f.names, tag)
		}
	}
	fieldsOfType.Store(t, f)
	return f
}

// ZeroIsValue reports whether a field of a spec type may be given its
// zero value (false, 0, ""): a pointer, whose nil says it was left out, or
// a field tagged spec:"zero", whose zero is also its default. Any other
// field refuses its zero when written out (see role).
func ZeroIsValue(f reflect.StructField) bool {
	return f.Type.Kind() == reflect.Pointer || f.Tag.Get("spec") == "zero"
}

// itemPath is indexPath made in one allocation, for a path that is kept
// (a position's): a large spec has hundreds of thousands of them.
func itemPath(path string, i int) string {
	var digits [20]byte
	n := strconv.AppendInt(digits[:0], int64(i), 10)
	var b strings.Builder
	b.Grow(len(path) + len(n) + 2)
	b.WriteString(path)
	b.WriteByte('[')
	b.Write(n)
	b.WriteByte(']')
	return b.String()
}

// joinPath names a field or a map entry under path; a long map key is
// clipped, as in messages.
func joinPath(path, key string) string {
	key = clip(key)
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "*" + clip(n.Value)
	default:
		return fmt.Sprintf("%q", clip(n.Value))
	}
}

// textKind names what a type that reads itself from text wants.
func textKind(t reflect.Type) string {
	switch t.Name() {
	case "Rate":
		return "a rate (e.g. 1Gbit)"
	case "Size":
		return "a size (e.g. 64KiB)"
	case "Percent":
		return "a percentage (e.g. 75%)"
	case "Duration":
		return "a duration (e.g. 30s)"
	case "Peer":
		return "a prefix or an address"
	}
	return "text"
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	case reflect.Float64:
		return "number"
	default:
		return t.Kind().String()
	}
}

// suggest names the known field closest to a misspelt one.
func suggest(got string, known []string) string {
	if len(got) > 2*quote.ClipBytes {
		return "" // nothing this long is a near miss, and comparing costs its length squared
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(got), k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func sortErrors(es Errors) {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].Pos.Line != es[j].Pos.Line {
			return es[i].Pos.Line < es[j].Pos.Line
		}
		return es[i].Pos.Col < es[j].Pos.Col
	})
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
