// Package fieldtest finds every value a spec can hold by walking the
// spec's types, and writes specs that give one of them a value as the
// tests say: what the tests of zeros, nulls, empty values and wrongly
// typed ones, of the parsers' agreement and of the binary form run over,
// so that a field added to the types is tried without more.
package fieldtest

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/fastyaml"
)

// A Field is one value a spec can hold, found by walking spec.Spec's
// type: a field of a struct, an item of a list or a mapping's value. A
// field that is added to the types is found without more.
type Field struct {
	Name  string // as docs/spec.md names it: switches[].ioc.pools.*.limit
	segs  []seg
	Type  reflect.Type // the value's type, pointers taken away
	Ptr   bool         // the field is a pointer: nil when left out
	Entry bool         // an item of a list or a mapping's value, not a field
	// ZeroIsValue: its zero may be written out (spec.ZeroIsValue).
	ZeroIsValue bool
	// Text: it reads itself from a scalar (a rate, a size, a peer).
	Text bool
}

// seg is a step of a field's path: a key, any key of a mapping (written
// k1), or an item (index 0).
type seg struct {
	key    string
	anyKey bool
	item   bool
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// Scalars returns every field of a spec that holds a single value, a
// number, a boolean, a string or one of the types that read themselves
// from text: the values whose zero, null, empty and wrongly typed forms
// the tests try.
func Scalars() []Field {
	var out []Field
	walk(reflect.TypeFor[spec.Spec](), nil, Field{}, &out)
	return out
}

// walk adds the scalars of a value of type t at segs; at holds what its
// parent says of it (Entry, ZeroIsValue).
func walk(t reflect.Type, segs []seg, at Field, out *[]Field) {
	if len(segs) > 16 {
		panic("fieldtest: spec types nest deeper than expected: a type that holds itself?")
	}
	for t.Kind() == reflect.Pointer {
		t, at.Ptr, at.ZeroIsValue = t.Elem(), true, true
	}
	at.Name, at.segs, at.Type = genericName(segs), segs, t
	at.Text = reflect.PointerTo(t).Implements(textUnmarshaler)
	step := func(s seg) []seg { return append(append([]seg{}, segs...), s) }
	switch t.Kind() {
	case reflect.Struct:
		if at.Text {
			*out = append(*out, at) // a peer's scalar form
		}
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				walk(sf.Type, step(seg{key: name}), Field{ZeroIsValue: spec.ZeroIsValue(sf)}, out)
			}
		}
	case reflect.Slice:
		walk(t.Elem(), step(seg{item: true}), Field{Entry: true}, out)
	case reflect.Map:
		walk(t.Elem(), step(seg{key: "k1", anyKey: true}), Field{Entry: true}, out)
	default:
		*out = append(*out, at)
	}
}

// genericName is a path as docs/spec.md writes it: [] for any item, * for
// any key of a mapping.
func genericName(segs []seg) string {
	var b strings.Builder
	for i, s := range segs {
		switch {
		case s.item:
			b.WriteString("[]")
			continue
		case i > 0:
			b.WriteString(".")
		}
		if s.anyKey {
			b.WriteString("*")
		} else {
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// Path is the field's path as errors name it, every item the first and
// every mapping's key k1.
func (f Field) Path() string {
	var b strings.Builder
	for i, s := range f.segs {
		switch {
		case s.item:
			b.WriteString("[0]")
		default:
			if i > 0 {
				b.WriteString(".")
			}
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// Source is a spec that writes the field, and nothing else it need not,
// as value (a YAML scalar or flow collection as written; "" writes
// nothing after the key or dash), in block style. It returns the line the
// value stands on.
func (f Field) Source(value string) (src []byte, line int) {
	var b strings.Builder
	if len(f.segs) == 0 || f.segs[0].key != "name" {
		b.WriteString("name: t\n")
	}
	render(&b, f.segs, value, 0, "")
	text := b.String()
	return []byte(text), strings.Count(text, "\n")
}

// render writes segs from column indent; lead, when not empty, replaces
// the indentation of the first line (a list item's dash).
func render(b *strings.Builder, segs []seg, value string, indent int, lead string) {
	pad := strings.Repeat(" ", indent)
	if lead != "" {
		pad = lead
	}
	s := segs[0]
	if s.item {
		if len(segs) == 1 {
			b.WriteString(strings.TrimRight(pad+"- "+value, " ") + "\n")
			return
		}
		render(b, segs[1:], value, indent+2, pad+"- ")
		return
	}
	if len(segs) == 1 {
		b.WriteString(strings.TrimRight(pad+s.key+": "+value, " ") + "\n")
		return
	}
	b.WriteString(pad + s.key + ":\n")
	render(b, segs[1:], value, indent+2, "")
}

// Zero is the field's zero value as a spec writes it: 0, false, "", or
// for a type that reads itself from text, what its zero prints as.
func (f Field) Zero() string {
	if m, ok := reflect.New(f.Type).Elem().Interface().(encoding.TextMarshaler); ok {
		text, err := m.MarshalText()
		if err != nil {
			panic(fmt.Sprintf("fieldtest: %s's zero does not print: %v", f.Type, err))
		}
		return string(text)
	}
	switch f.Type.Kind() {
	case reflect.Bool:
		return "false"
	case reflect.String, reflect.Struct:
		return `""`
	}
	return "0"
}

// Value is the field in s as Source wrote it: the first item of each list,
// the value of key k1 of each mapping. It is false where a pointer on
// the way, or the field itself, is nil, or a list or mapping lacks the
// item.
func (f Field) Value(s *spec.Spec) (reflect.Value, bool) {
	v := reflect.ValueOf(s).Elem()
	for _, sg := range f.segs {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return v, false
			}
			v = v.Elem()
		}
		switch {
		case sg.item:
			if v.Len() == 0 {
				return v, false
			}
			v = v.Index(0)
		case sg.anyKey:
			if v = v.MapIndex(reflect.ValueOf(sg.key)); !v.IsValid() {
				return v, false
			}
		default:
			v = fieldByTag(v, sg.key)
		}
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	return v, true
}

func fieldByTag(v reflect.Value, name string) reflect.Value {
	for i := 0; i < v.NumField(); i++ {
		if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); tag == name {
			return v.Field(i)
		}
	}
	panic("fieldtest: no field " + name + " in " + v.Type().String())
}

// FastParses reports whether package fastyaml reads src (rather than
// leaving it to yaml.v3), for tests that compare the two.
func FastParses(src []byte) (any, bool) { return fastyaml.Parse(src) }
