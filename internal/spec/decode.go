package spec

import (
	"encoding"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Pos is a line and column in the spec file, both from 1.
type Pos struct{ Line, Col int }

// FieldError is one problem with one field of a spec.
type FieldError struct {
	Path string // e.g. vms[0].nics[1].portgroup
	Msg  string
	Pos  Pos
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	if e.Pos.Line > 0 {
		fmt.Fprintf(&b, " (line %d:%d)", e.Pos.Line, e.Pos.Col)
	}
	return b.String()
}

// Errors is every problem found in a spec, in file order.
type Errors []*FieldError

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

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
}

// PosOf returns where a field path stands in the file, or the nearest
// enclosing path that was written out.
func (d *Document) PosOf(path string) Pos {
	for p := path; p != ""; p = parentPath(p) {
		if pos, ok := d.positions[p]; ok {
			return pos
		}
	}
	return d.positions[""] // a missing top-level field: point at the document
}

// Errorf builds a FieldError located at path.
func (d *Document) Errorf(path, format string, args ...any) *FieldError {
	return &FieldError{Path: path, Msg: fmt.Sprintf(format, args...), Pos: d.PosOf(path)}
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
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	return Load(path, src)
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
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, Errors{{Msg: strings.TrimPrefix(err.Error(), "yaml: "), Pos: yamlErrorPos(err)}}
	}
	doc := &Document{Spec: &Spec{}, File: file, Source: src, positions: map[string]Pos{}}
	if len(root.Content) == 0 {
		return nil, Errors{{Msg: "the spec is empty"}}
	}
	d := decoder{doc: doc}
	d.decode(root.Content[0], reflect.ValueOf(doc.Spec).Elem(), "")
	if len(d.errs) > 0 {
		sortErrors(d.errs)
		return nil, d.errs
	}
	return doc, nil
}

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
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...), Pos: Pos{n.Line, n.Column}})
}

var textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.doc.positions[path] = Pos{n.Line, n.Column}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if v.Kind() == reflect.Pointer {
		v.Set(reflect.New(v.Type().Elem()))
		d.decode(n, v.Elem(), path)
		return
	}
	// A struct that also reads from text (spec.Peer) takes either form.
	if reflect.PointerTo(v.Type()).Implements(textUnmarshaler) && (n.Kind != yaml.MappingNode || v.Kind() != reflect.Struct) {
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a single value, got %s", kindName(n))
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.fail(n, path, "%v", err)
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
		v.Set(reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content)))
		for i, item := range n.Content {
			d.decode(item, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "want a mapping, got %s", kindName(n))
			return
		}
		v.Set(reflect.MakeMap(v.Type()))
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			elem := reflect.New(v.Type().Elem()).Elem()
			d.decode(val, elem, joinPath(path, k.Value))
			v.SetMapIndex(reflect.ValueOf(k.Value), elem)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a %s, got %s", v.Kind(), kindName(n))
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.fail(n, path, "want a %s, got %q", typeName(v.Type()), n.Value)
		}
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping of fields, got %s", kindName(n))
		return
	}
	fields := map[string]int{}
	var names []string
	for i := 0; i < v.NumField(); i++ {
		tag := strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			fields[tag] = i
			names = append(names, tag)
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		fp := joinPath(path, k.Value)
		idx, ok := fields[k.Value]
		if !ok {
			d.fail(k, fp, "unknown field%s (known: %s)", suggest(k.Value, names), strings.Join(names, ", "))
			continue
		}
		if seen[k.Value] {
			d.fail(k, fp, "field given twice")
			continue
		}
		seen[k.Value] = true
		d.decode(val, v.Field(idx), fp)
	}
}

func joinPath(path, key string) string {
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
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean (true or false)"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "whole number"
	case reflect.Float64:
		return "number"
	default:
		return t.Kind().String()
	}
}

// suggest names the known field closest to a misspelt one.
func suggest(got string, known []string) string {
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
