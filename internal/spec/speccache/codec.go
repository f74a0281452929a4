package speccache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/vnet-project/vnet/internal/spec"
)

// A compact binary form of a Spec, for the cache of validated specs
// (cache.go): reading it back makes a Spec equal to the one written, in a
// small part of what decoding and validating its YAML costs. Unlike gob it
// keeps a pointer to a zero value (connected: false) apart from none, and
// a nil list or mapping apart from an empty one; unlike JSON it needs no
// field to read itself from text.
//
// Each value is written as its type says, with nothing of the type
// itself: a pointer as 0 (nil) or 1 and its value, a list or a mapping as
// 0 (nil) or its length plus one and its items (a mapping's in key order),
// a string as its length and bytes, numbers as varints (floats as their
// bits). Reading checks every length against what is left, so that a
// damaged form is an error, never a panic or a huge allocation.

var errCorrupt = errors.New("spec: damaged encoded spec")

// specLayout describes the Spec type tree, field by field, and the
// revision of the rules it validated under: an encoded spec is only read
// back by a program whose Spec has the same layout, and whose rules are
// those that validated it (a spec that older rules let through is loaded,
// and validated, as ever).
var specLayout = sync.OnceValue(func() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rules %d;", spec.RulesRevision)
	describeType(&b, reflect.TypeFor[spec.Spec](), map[reflect.Type]bool{})
	return b.String()
})

func describeType(b *strings.Builder, t reflect.Type, seen map[reflect.Type]bool) {
	fmt.Fprintf(b, "%s:%s", t.String(), t.Kind())
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice:
		b.WriteString("(")
		describeType(b, t.Elem(), seen)
		b.WriteString(")")
	case reflect.Map:
		b.WriteString("(")
		describeType(b, t.Key(), seen)
		b.WriteString(",")
		describeType(b, t.Elem(), seen)
		b.WriteString(")")
	case reflect.Struct:
		if seen[t] {
			return
		}
		seen[t] = true
		b.WriteString("{")
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			b.WriteString(f.Name + " ")
			describeType(b, f.Type, seen)
			b.WriteString(";")
		}
		b.WriteString("}")
	}
}

type encodeFunc func(buf []byte, v reflect.Value) []byte
type decodeFunc func(r *specReader, v reflect.Value) error

type typeCodec struct {
	enc encodeFunc
	dec decodeFunc
}

// specCodec is the codec of Spec, built once.
var specCodec = sync.OnceValue(func() *typeCodec {
	return codecBuilder{}.of(reflect.TypeFor[spec.Spec]())
})

// codecBuilder holds the codecs built so far, by type. A type that
// contains itself gets its codec under construction, filled in before use.
type codecBuilder map[reflect.Type]*typeCodec

func (b codecBuilder) of(t reflect.Type) *typeCodec {
	if c, ok := b[t]; ok {
		return c
	}
	c := &typeCodec{}
	b[t] = c
	c.enc, c.dec = b.build(t)
	return c
}

func (b codecBuilder) build(t reflect.Type) (encodeFunc, decodeFunc) {
	switch t.Kind() {
	case reflect.String:
		return func(buf []byte, v reflect.Value) []byte {
				buf = binary.AppendUvarint(buf, uint64(v.Len()))
				return append(buf, v.String()...)
			}, func(r *specReader, v reflect.Value) error {
				s, err := r.string()
				v.SetString(s)
				return err
			}
	case reflect.Bool:
		return func(buf []byte, v reflect.Value) []byte {
				if v.Bool() {
					return append(buf, 1)
				}
				return append(buf, 0)
			}, func(r *specReader, v reflect.Value) error {
				b, err := r.uvarint()
				if b > 1 {
					return errCorrupt
				}
				v.SetBool(b == 1)
				return err
			}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(buf []byte, v reflect.Value) []byte {
				return binary.AppendVarint(buf, v.Int())
			}, func(r *specReader, v reflect.Value) error {
				i, err := r.varint()
				if v.OverflowInt(i) {
					return errCorrupt
				}
				v.SetInt(i)
				return err
			}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return func(buf []byte, v reflect.Value) []byte {
				return binary.AppendUvarint(buf, v.Uint())
			}, func(r *specReader, v reflect.Value) error {
				u, err := r.uvarint()
				if v.OverflowUint(u) {
					return errCorrupt
				}
				v.SetUint(u)
				return err
			}
	case reflect.Float32, reflect.Float64:
		return func(buf []byte, v reflect.Value) []byte {
				return binary.AppendUvarint(buf, math.Float64bits(v.Float()))
			}, func(r *specReader, v reflect.Value) error {
				u, err := r.uvarint()
				v.SetFloat(math.Float64frombits(u))
				return err
			}
	case reflect.Pointer:
		elem := b.of(t.Elem())
		return func(buf []byte, v reflect.Value) []byte {
				if v.IsNil() {
					return append(buf, 0)
				}
				return elem.enc(append(buf, 1), v.Elem())
			}, func(r *specReader, v reflect.Value) error {
				set, err := r.uvarint()
				if err != nil || set > 1 {
					return errCorrupt
				}
				if set == 0 {
					return nil
				}
				v.Set(reflect.New(t.Elem()))
				return elem.dec(r, v.Elem())
			}
	case reflect.Slice:
		elem := b.of(t.Elem())
		return func(buf []byte, v reflect.Value) []byte {
				if v.IsNil() {
					return append(buf, 0)
				}
				buf = binary.AppendUvarint(buf, uint64(v.Len())+1)
				for i := 0; i < v.Len(); i++ {
					buf = elem.enc(buf, v.Index(i))
				}
				return buf
			}, func(r *specReader, v reflect.Value) error {
				n, isNil, err := r.length()
				if err != nil || isNil {
					return err
				}
				v.Set(reflect.MakeSlice(t, n, n))
				for i := 0; i < n; i++ {
					if err := elem.dec(r, v.Index(i)); err != nil {
						return err
					}
				}
				return nil
			}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			panic(fmt.Sprintf("spec: no encoding for %s", t))
		}
		key, elem := b.of(t.Key()), b.of(t.Elem())
		return func(buf []byte, v reflect.Value) []byte {
				if v.IsNil() {
					return append(buf, 0)
				}
				buf = binary.AppendUvarint(buf, uint64(v.Len())+1)
				keys := v.MapKeys()
				slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
				for _, k := range keys {
					buf = elem.enc(key.enc(buf, k), v.MapIndex(k))
				}
				return buf
			}, func(r *specReader, v reflect.Value) error {
				n, isNil, err := r.length()
				if err != nil || isNil {
					return err
				}
				v.Set(reflect.MakeMapWithSize(t, n))
				for i := 0; i < n; i++ {
					k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
					if err := key.dec(r, k); err != nil {
						return err
					}
					if err := elem.dec(r, e); err != nil {
						return err
					}
					v.SetMapIndex(k, e)
				}
				return nil
			}
	case reflect.Struct:
		fields := make([]*typeCodec, t.NumField())
		for i := range fields {
			if !t.Field(i).IsExported() {
				panic(fmt.Sprintf("spec: no encoding for the unexported field %s.%s", t, t.Field(i).Name))
			}
			fields[i] = b.of(t.Field(i).Type)
		}
		return func(buf []byte, v reflect.Value) []byte {
				for i, f := range fields {
					buf = f.enc(buf, v.Field(i))
				}
				return buf
			}, func(r *specReader, v reflect.Value) error {
				for i, f := range fields {
					if err := f.dec(r, v.Field(i)); err != nil {
						return err
					}
				}
				return nil
			}
	}
	panic(fmt.Sprintf("spec: no encoding for %s", t))
}

// specReader reads an encoded spec. Its strings share one copy of the
// input instead of one allocation each.
type specReader struct {
	data string
	off  int
}

func (r *specReader) uvarint() (uint64, error) {
	var u uint64
	for shift := 0; shift < 64; shift += 7 {
		if r.off >= len(r.data) {
			return 0, errCorrupt
		}
		c := r.data[r.off]
		r.off++
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return u, nil
		}
	}
	return 0, errCorrupt
}

func (r *specReader) varint() (int64, error) {
	u, err := r.uvarint()
	i := int64(u >> 1)
	if u&1 != 0 {
		i = ^i
	}
	return i, err
}

// length reads a list's or a mapping's length, which cannot exceed the
// bytes left: every item takes at least one.
func (r *specReader) length() (n int, isNil bool, err error) {
	u, err := r.uvarint()
	if err != nil {
		return 0, false, err
	}
	if u == 0 {
		return 0, true, nil
	}
	if u-1 > uint64(len(r.data)-r.off) {
		return 0, false, errCorrupt
	}
	return int(u - 1), false, nil
}

func (r *specReader) string() (string, error) {
	u, err := r.uvarint()
	if err != nil || u > uint64(len(r.data)-r.off) {
		return "", errCorrupt
	}
	s := r.data[r.off : r.off+int(u)]
	r.off += int(u)
	return s, nil
}

// encodeSpec appends the encoded form of s to buf.
func encodeSpec(buf []byte, s *spec.Spec) []byte {
	return specCodec().enc(buf, reflect.ValueOf(s).Elem())
}

// decodeSpec reads a spec written by encodeSpec, which must be all of data.
func decodeSpec(data []byte) (*spec.Spec, error) {
	s := &spec.Spec{}
	r := &specReader{data: string(data)}
	if err := specCodec().dec(r, reflect.ValueOf(s).Elem()); err != nil {
		return nil, err
	}
	if r.off != len(r.data) {
		return nil, errCorrupt
	}
	return s, nil
}

// encodeCached is the form a Cache and EncodeValidated keep of a document
// that validated: its encoded spec, then the anchors spec.PinVNIs reads
// (spec.Document.AppendAnchors).
func encodeCached(doc *spec.Document) []byte {
	// The encoding is some two thirds of the YAML's size: a buffer made
	// about that large is not copied over again and again as it grows.
	buf := encodeSpec(make([]byte, 0, len(doc.Source)*3/4+64), doc.Spec)
	return doc.AppendAnchors(buf)
}

// decodeCached makes the document of src from what encodeCached wrote of
// it, which must be all of data.
func decodeCached(file string, src []byte, data []byte) (*spec.Document, error) {
	s := &spec.Spec{}
	r := &specReader{data: string(data)}
	if err := specCodec().dec(r, reflect.ValueOf(s).Elem()); err != nil {
		return nil, err
	}
	return spec.FromValidated(file, src, s, data[r.off:])
}
