package specdiff

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/vnet-project/vnet/internal/spec"
)

// Field is one field of an object that differs: its YAML path within the
// object and its value before and after, as the spec would be written
// ("" when the field is not set).
type Field struct {
	Path string `json:"path" yaml:"path"`
	From string `json:"from,omitempty" yaml:"from,omitempty"`
	To   string `json:"to,omitempty" yaml:"to,omitempty"`
}

// structural names the fields of the spec's types that are not compared as
// fields of their object: what names the object, and the lists and maps of
// objects of their own (compared as those objects).
var structural = map[reflect.Type]map[string]bool{
	reflect.TypeFor[spec.Spec]():      {"Hosts": true, "Switches": true, "VMs": true, "HostPorts": true, "Networks": true},
	reflect.TypeFor[spec.Host]():      {"Name": true, "NICs": true},
	reflect.TypeFor[spec.NIC]():       {"Name": true},
	reflect.TypeFor[spec.Switch]():    {"Name": true, "Uplinks": true, "PortGroups": true},
	reflect.TypeFor[spec.IOC]():       {"Pools": true},
	reflect.TypeFor[spec.Uplink]():    {"Name": true},
	reflect.TypeFor[spec.PortGroup](): {"Name": true, "Classify": true},
	reflect.TypeFor[spec.ACL]():       {"Rules": true},
	reflect.TypeFor[spec.VM]():        {"Name": true, "NICs": true},
	reflect.TypeFor[spec.HostPort]():  {"Host": true, "Name": true},
	reflect.TypeFor[spec.Network]():   {"Name": true},
}

var peerType = reflect.TypeFor[spec.Peer]()

// fieldDiffs compares two values of one struct type and returns the
// fields that differ, in declaration order, map keys in sorted order.
// Either value may be invalid: the object is absent on that side. Its
// fields are then those that differ from the type's zero value (so that a
// plain boolean left false is not listed), with nothing on the absent
// side.
func fieldDiffs(a, b reflect.Value) []Field {
	var out []Field
	switch {
	case a.IsValid() && b.IsValid():
		walk("", a.Type(), a, b, &out)
	case b.IsValid():
		walk("", b.Type(), zeroOf(b), b, &out)
		for i := range out {
			out[i].From = ""
		}
	case a.IsValid():
		walk("", a.Type(), a, zeroOf(a), &out)
		for i := range out {
			out[i].To = ""
		}
	}
	return out
}

// zeroOf is the zero value of what v is or points to.
func zeroOf(v reflect.Value) reflect.Value {
	t := v.Type()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return reflect.New(t).Elem()
}

// walk compares a and b of type t at path; an invalid value is an absent
// one (a nil pointer, a missing map key or list element, a whole object).
func walk(path string, t reflect.Type, a, b reflect.Value, out *[]Field) {
	a, b = deref(a), deref(b)
	elem := t
	if elem.Kind() == reflect.Pointer {
		elem = elem.Elem()
	}
	if elem == peerType || isScalar(elem) {
		from, to := formatLeaf(t, a), formatLeaf(t, b)
		if from != to {
			*out = append(*out, Field{Path: path, From: from, To: to})
		}
		return
	}
	switch elem.Kind() {
	case reflect.Struct:
		skip := structural[elem]
		exported := 0
		for i := 0; i < elem.NumField(); i++ {
			f := elem.Field(i)
			if !f.IsExported() {
				continue
			}
			exported++
			if !skip[f.Name] {
				walk(join(path, keyOf(f)), f.Type, field(a, i), field(b, i), out)
			}
		}
		if exported == 0 { // a time.Time, say: its value is not in its fields
			panic(fmt.Sprintf("specdiff: %s at %q: a kind of field it cannot compare", elem, path))
		}
	case reflect.Slice:
		if elem.Elem().Kind() == reflect.String {
			from, to := formatList(a), formatList(b)
			if from != to {
				*out = append(*out, Field{Path: path, From: from, To: to})
			}
			return
		}
		// A list of structures no object stands for: compared by position.
		for i := 0; i < max(length(a), length(b)); i++ {
			walk(path+"["+strconv.Itoa(i)+"]", elem.Elem(), index(a, i), index(b, i), out)
		}
	case reflect.Map:
		for _, k := range mapKeys(a, b) {
			walk(join(path, k), elem.Elem(), mapIndex(a, k), mapIndex(b, k), out)
		}
	default:
		panic(fmt.Sprintf("specdiff: %s at %q: a kind of field it cannot compare", elem, path))
	}
}

// isScalar reports whether values of t print as one value: strings,
// numbers, booleans, and units' types.
func isScalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64:
		return true
	}
	return false
}

// formatLeaf prints a scalar or a peer as the spec would say it, "" when
// absent. A zero number or text counts as absent, since the spec takes a
// zero MTU, VNI, rate or port for "not given"; a pointer that is set
// prints its value even when that is zero (dscp: 0, gro: false), and so
// does a plain boolean.
func formatLeaf(t reflect.Type, v reflect.Value) string {
	if !v.IsValid() {
		return ""
	}
	set := t.Kind() == reflect.Pointer
	if v.Type() == peerType {
		p := v.Interface().(spec.Peer)
		return formatPeer(&p)
	}
	if v.Kind() == reflect.Bool {
		return strconv.FormatBool(v.Bool())
	}
	if v.IsZero() && !set {
		return ""
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String() // units.Rate, Size, Percent, Duration
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	}
	panic("specdiff: unreachable kind " + v.Kind().String())
}

// formatPeer prints an ACL rule's end as the spec writes it.
func formatPeer(p *spec.Peer) string {
	var parts []string
	if p.CIDR != "" {
		parts = append(parts, p.CIDR)
	}
	if p.PortGroup != "" {
		parts = append(parts, "portgroup "+p.PortGroup)
	}
	if p.Network != "" {
		parts = append(parts, "network "+p.Network)
	}
	if len(parts) == 0 {
		return "{}" // written, and matching anything
	}
	return strings.Join(parts, " ")
}

// formatList prints a list of names in YAML's flow form; an empty list
// that is written ([]) differs from one left out.
func formatList(v reflect.Value) string {
	if !v.IsValid() || v.IsNil() {
		return ""
	}
	items := make([]string, v.Len())
	for i := range items {
		items[i] = v.Index(i).String()
	}
	return "[" + strings.Join(items, ", ") + "]"
}

func deref(v reflect.Value) reflect.Value {
	for v.IsValid() && v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

func field(v reflect.Value, i int) reflect.Value {
	if !v.IsValid() {
		return v
	}
	return v.Field(i)
}

func length(v reflect.Value) int {
	if !v.IsValid() {
		return 0
	}
	return v.Len()
}

func index(v reflect.Value, i int) reflect.Value {
	if !v.IsValid() || i < 0 || i >= v.Len() {
		return reflect.Value{}
	}
	return v.Index(i)
}

func mapIndex(v reflect.Value, k string) reflect.Value {
	if !v.IsValid() {
		return v
	}
	return v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key()))
}

// mapKeys is the union of two maps' keys, sorted.
func mapKeys(a, b reflect.Value) []string {
	seen := map[string]bool{}
	for _, m := range []reflect.Value{a, b} {
		if m.IsValid() {
			for _, k := range m.MapKeys() {
				seen[k.String()] = true
			}
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// keyOf is a field's YAML key.
func keyOf(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" || name == "-" {
		return strings.ToLower(f.Name[:1]) + f.Name[1:]
	}
	return name
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
