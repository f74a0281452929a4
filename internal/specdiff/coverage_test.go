package specdiff

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// step is one move from a value to a part of it.
type step struct {
	kind  string // field, elem (of a slice, or through a pointer), value (of a map), key (a map's key itself)
	field int
	name  string
}

// leaf is a value of the spec that holds no other: its path of steps and
// its Go name for messages.
type leaf struct {
	steps []step
	name  string
}

// leaves lists every leaf reachable in a value of type t.
func leaves(t reflect.Type, steps []step, name string, out *[]leaf) {
	at := func(s step, n string) { leaves(elemType(t, s), append(append([]step(nil), steps...), s), n, out) }
	switch t.Kind() {
	case reflect.Pointer:
		at(step{kind: "elem"}, name)
	case reflect.Struct:
		before := len(*out)
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() {
				at(step{kind: "field", field: i}, name+"."+t.Field(i).Name)
			}
		}
		if len(*out) == before {
			// A struct of no exported fields (a time.Time) cannot be
			// populated here: its leaf is the struct, which populate and
			// perturb then refuse, failing the test.
			*out = append(*out, leaf{steps, name})
		}
	case reflect.Slice:
		at(step{kind: "elem"}, name+"[0]")
	case reflect.Map:
		*out = append(*out, leaf{append(append([]step(nil), steps...), step{kind: "key"}), name + "{key}"})
		at(step{kind: "value"}, name+"{value}")
	default:
		*out = append(*out, leaf{steps, name})
	}
}

func elemType(t reflect.Type, s step) reflect.Type {
	if s.kind == "field" {
		return t.Field(s.field).Type
	}
	return t.Elem()
}

// populate gives every field reachable from v a value of its own: one
// element in each list, one key in each map, every pointer set.
func populate(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		populate(v.Elem(), n)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				populate(v.Field(i), n)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		populate(v.Index(0), n)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		e := reflect.New(v.Type().Elem()).Elem()
		populate(e, n)
		v.SetMapIndex(reflect.ValueOf(fmt.Sprintf("k%d", *n)), e)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	default:
		panic("populate: " + v.Kind().String())
	}
}

// perturb changes the leaf at the end of steps.
func perturb(v reflect.Value, steps []step) {
	if len(steps) == 0 {
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 1000)
		case reflect.Uint64:
			v.SetUint(v.Uint() + 1000)
		case reflect.Float64:
			v.SetFloat(v.Float() + 1000)
		default:
			panic("perturb: " + v.Kind().String())
		}
		return
	}
	s, rest := steps[0], steps[1:]
	switch s.kind {
	case "field":
		perturb(v.Field(s.field), rest)
	case "elem":
		if v.Kind() == reflect.Pointer {
			perturb(v.Elem(), rest)
		} else {
			perturb(v.Index(0), rest)
		}
	case "value", "key":
		k := v.MapKeys()[0]
		e := reflect.New(v.Type().Elem()).Elem()
		e.Set(v.MapIndex(k))
		if s.kind == "value" {
			perturb(e, rest)
			v.SetMapIndex(k, e)
			return
		}
		v.SetMapIndex(k, reflect.Value{})
		v.SetMapIndex(reflect.ValueOf(k.String()+"x"), e)
	}
}

// Every field of the spec's types, and every key of its maps, is
// compared: changing any one of them alone makes a diff. A field added to
// the spec that Compare would ignore fails here.
func TestEveryFieldIsCompared(t *testing.T) {
	var all []leaf
	leaves(reflect.TypeFor[spec.Spec](), nil, "Spec", &all)
	if len(all) < 80 {
		t.Fatalf("found only %d leaves in spec.Spec", len(all))
	}
	fresh := func() *spec.Spec {
		var s spec.Spec
		n := 0
		populate(reflect.ValueOf(&s).Elem(), &n)
		return &s
	}
	if d := Compare(fresh(), fresh()); !d.Equal() {
		t.Fatalf("two equal specs differ:\n%s", d)
	}
	for _, l := range all {
		s := fresh()
		perturb(reflect.ValueOf(s).Elem(), l.steps)
		d := Compare(fresh(), s)
		if d.Equal() {
			t.Errorf("%s: a change of it alone makes no diff", l.name)
			continue
		}
		if back := Compare(s, fresh()); back.Equal() || len(back.Changes) != len(d.Changes) {
			t.Errorf("%s: %d changes one way, %d the other", l.name, len(d.Changes), len(back.Changes))
		}
	}
}

// The structural table names only fields that exist, so that a renamed
// field cannot leave a stale entry that hides its successor.
func TestStructuralFieldsExist(t *testing.T) {
	for typ, fields := range structural {
		for name := range fields {
			if _, ok := typ.FieldByName(name); !ok {
				t.Errorf("structural lists %s.%s, which does not exist", typ.Name(), name)
			}
		}
	}
}

func letters(s string) reflect.Value { return reflect.ValueOf(strings.Split(s, "")[:len(s)]) }

func pos(i int) string {
	if i < 0 {
		return "-"
	}
	return fmt.Sprint(i)
}
