package spec

import (
	"reflect"
	"regexp"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestPlainScalars checks that the decoder's own reading of common scalars
// is yaml.v3's.
func TestPlainScalars(t *testing.T) {
	var into struct {
		S string
		B bool
		I int
		U uint16
		P uint64
	}
	fields := map[string]reflect.Value{}
	rv := reflect.ValueOf(&into).Elem()
	for i := 0; i < rv.NumField(); i++ {
		fields[rv.Type().Field(i).Name] = rv.Field(i)
	}
	for _, value := range []string{"abc", `"abc"`, "'1'", "1", "0", "-1", "007", "0x1f", "0o17", "1_000", "+5", "65535", "65536",
		"99999999999999999", "999999999999999999999", "true", "false", "True", "yes", "on", "~", "null", "1.5", "1e3", ".inf", `""`, "10.0.0.1/24", "2001:db8::1"} {
		var root yaml.Node
		if err := yaml.Unmarshal([]byte("v: "+value), &root); err != nil {
			t.Fatal(err)
		}
		n := root.Content[0].Content[1]
		for name, field := range fields {
			want := reflect.New(field.Type()).Elem()
			werr := n.Decode(want.Addr().Interface())
			got := reflect.New(field.Type()).Elem()
			if !setPlainScalar(n, got) {
				continue
			}
			if werr != nil {
				t.Errorf("%s into %s: read %v, yaml.v3 fails: %v", value, name, got, werr)
			} else if got.Interface() != want.Interface() {
				t.Errorf("%s into %s: read %v, yaml.v3 reads %v", value, name, got, want)
			}
		}
	}
}

// TestNameMatches checks the hand-written name patterns against their
// regular expressions.
func TestNameMatches(t *testing.T) {
	chars := []byte{'a', 'z', 'A', 'Z', '0', '9', '-', '_', '.', ' ', '/', 0xc3}
	var names []string
	var grow func(prefix string, depth int)
	grow = func(prefix string, depth int) {
		names = append(names, prefix)
		if depth == 0 {
			return
		}
		for _, c := range chars {
			grow(prefix+string([]byte{c}), depth-1)
		}
	}
	grow("", 3)
	names = append(names, "vm1\n", "a-b-c", "eth0.100", "n9999")
	for _, s := range names {
		for _, re := range []*regexp.Regexp{objectName, ifaceName} {
			if got, want := nameMatches(re, s), re.MatchString(s); got != want {
				t.Errorf("%q against %s: %v, want %v", s, re, got, want)
			}
		}
	}
}
