package spec_test

import (
	"encoding"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/fieldtest"
)

// A written case is one way of writing a field's value, and what loading
// it must do: refuse it at the field's path and line, or load it as
// check says.
type writtenCase struct {
	written string
	refused bool
	check   func(v reflect.Value, present bool) error // for a value loaded
}

// absent checks a field left out: a nil pointer, or the zero value.
func absent(v reflect.Value, present bool) error {
	if present && !v.IsZero() {
		return fmt.Errorf("holds %v, want it left out", v)
	}
	return nil
}

// holds checks a field that holds want (a pointer, not nil).
func holds(want any) func(reflect.Value, bool) error {
	return func(v reflect.Value, present bool) error {
		if !present {
			return errors.New("left out, want it given")
		}
		if got := v.Interface(); !reflect.DeepEqual(got, reflect.ValueOf(want).Convert(v.Type()).Interface()) {
			return fmt.Errorf("holds %v, want %v", got, want)
		}
		return nil
	}
}

// writtenCases are the zeros, nulls, empty values, quoted scalars and
// wrongly typed ones tried on a field, with what each must do.
func writtenCases(f fieldtest.Field) []writtenCase {
	refused := func(w ...string) []writtenCase {
		out := make([]writtenCase, len(w))
		for i, s := range w {
			out[i] = writtenCase{written: s, refused: true}
		}
		return out
	}
	// Nothing at all after the key is no value; a list or mapping is
	// the place for neither.
	cases := refused("", "[]", "[1]")
	if !(f.Text && f.Type.Kind() == reflect.Struct) {
		cases = append(cases, refused("{}", "{a: 1}")...) // a peer takes a mapping too
	}
	// Null leaves a field out; an item or a mapping's value is there to
	// be a value.
	cases = append(cases, writtenCase{written: "~", refused: f.Entry, check: absent})
	// The zero: a value only where the field's type keeps it apart from
	// "left out", or says that it is its default as well.
	zero := writtenCase{written: f.Zero(), refused: !f.ZeroIsValue || f.Entry, check: holds(reflect.Zero(f.Type).Interface())}
	if f.Text && !zero.refused {
		zero.refused = reflect.New(f.Type).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(strings.Trim(f.Zero(), `"`))) != nil
	}
	cases = append(cases, zero)
	switch k := f.Type.Kind(); {
	case f.Text:
		cases = append(cases, refused("!!binary aGk=", "true")...)
	case k == reflect.Bool:
		cases = append(cases, refused(`'no'`, "no", "yes", "on", "off", `"true"`, "1", "y")...)
		cases = append(cases, writtenCase{written: "true", check: holds(true)}, writtenCase{written: "True", check: holds(true)})
	case k == reflect.Int:
		cases = append(cases, refused(`'1500'`, `"7"`, "1.5", "1.5e3", "01500", "-0_7", "true", ".inf", "1Gbit")...)
		cases = append(cases, writtenCase{written: "7", check: holds(7)}, writtenCase{written: "0x1f", check: holds(31)},
			writtenCase{written: "1_500", check: holds(1500)})
	case k == reflect.Float64:
		cases = append(cases, refused(`'1'`, ".nan", ".inf", "-.inf", "true", "01")...)
		cases = append(cases, writtenCase{written: "1.5", check: holds(1.5)}, writtenCase{written: "2", check: holds(2.0)})
	case k == reflect.String:
		cases = append(cases, refused("!!binary aGk=")...)
		// Text is taken as written, quoted or not, whatever YAML would
		// otherwise read it as.
		for _, w := range []struct{ written, want string }{{"'x'", "x"}, {`"0"`, "0"}, {"0", "0"}, {"017", "017"}, {"true", "true"},
			{"no", "no"}, {"1e3", "1e3"}, {"02:00:00:00:00:01", "02:00:00:00:00:01"}, {"'~'", "~"}} {
			cases = append(cases, writtenCase{written: w.written, check: holds(w.want)})
		}
	default:
		panic(fmt.Sprintf("no written cases for %s (%s): add them", f.Name, f.Type))
	}
	return cases
}

// TestWrittenValues writes every scalar field of the spec, found by
// walking its types, in each of its written cases: a zero, a null, an
// empty value, quoted scalars and wrongly typed ones. Each must be
// refused with the field's path and line, or load as the case says; and
// the fast parser and yaml.v3's must agree on it.
func TestWrittenValues(t *testing.T) {
	fields := fieldtest.Scalars()
	if len(fields) < 90 {
		t.Fatalf("found %d scalar fields in the spec's types; the walk lost some", len(fields))
	}
	fastParsed := 0
	for _, f := range fields {
		for _, c := range writtenCases(f) {
			src, line := f.Source(c.written)
			t.Run(f.Name+"="+c.written, func(t *testing.T) {
				doc, err := spec.Decode("t.yaml", src)
				var slow *spec.Document
				var slowErr error
				spec.WithoutFastYAML(func() { slow, slowErr = spec.Decode("t.yaml", src) })
				if fmt.Sprint(err) != fmt.Sprint(slowErr) || (err == nil && !reflect.DeepEqual(doc.Spec, slow.Spec)) {
					t.Fatalf("the parsers disagree on\n%s\nfast: %v %+v\nyaml.v3: %v %+v", src, err, docSpec(doc), slowErr, docSpec(slow))
				}
				if c.refused {
					checkRefused(t, src, err, f.Path(), line)
					return
				}
				if err != nil {
					t.Fatalf("refused\n%s\nwith %v", src, err)
				}
				v, present := f.Value(doc.Spec)
				if err := c.check(v, present); err != nil {
					t.Errorf("%s\n%s: %v", src, f.Path(), err)
				}
			})
			if _, ok := fieldtest.FastParses(src); ok {
				fastParsed++
			}
		}
	}
	if fastParsed < 500 {
		t.Errorf("the fast parser read %d of the cases; the comparison with yaml.v3 needs it to read most", fastParsed)
	}
}

func docSpec(d *spec.Document) *spec.Spec {
	if d == nil {
		return nil
	}
	return d.Spec
}

// checkRefused checks that err names the field's path and line first.
func checkRefused(t *testing.T, src []byte, err error, path string, line int) {
	t.Helper()
	var errs spec.Errors
	if !errors.As(err, &errs) || !errors.Is(err, spec.ErrInvalid) {
		t.Fatalf("accepted, or not an invalid spec\n%s\ngot %v", src, err)
	}
	if e := errs[0]; e.Path != path || e.Pos.Line != line {
		t.Errorf("%s\nrefused as %v; want the path %s and line %d", src, err, path, line)
	}
}

// TestRefusedValuesExamples are the examples of values that were once
// replaced by a default or read as something else, each refused at its
// line: each goes through validate and apply as a file of testdata/bad
// too.
func TestRefusedValuesExamples(t *testing.T) {
	base := "name: t\nhosts:\n  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}\nswitches:\n  - name: sw0\n    uplinks: [{name: up1, nics: {esx1: vmnic0}}]\n"
	for _, tc := range []struct{ name, add, want string }{
		{"pool limit 0", "    ioc: {enabled: true, pools: {vm: {limit: 0}}}\n", `switches[0].ioc.pools.vm.limit: 0 would be taken for the field left out`},
		{"pool limit 0bit", "    ioc: {enabled: true, pools: {vm: {limit: 0bit}}}\n", `switches[0].ioc.pools.vm.limit: 0bit would be taken for the field left out`},
		{"acl dport 0", "    portgroups: [{name: pg, acl: {rules: [{action: allow, direction: ingress, proto: tcp, dport: 0}]}}]\n",
			`switches[0].portgroups[0].acl.rules[0].dport: 0 would be taken for the field left out`},
		{"mtu 0", "    mtu: 0\n", `switches[0].mtu: 0 would be taken for the field left out`},
		{"quoted no", "    portgroups: [{name: pg}]\nvms:\n  - {name: vm1, host: esx1, nics: [{portgroup: pg, connected: 'no'}]}\n",
			`vms[0].nics[0].connected: want a boolean (true or false, unquoted), got "no"`},
		{"quoted mtu", "    mtu: '1500'\n", `switches[0].mtu: want a whole number, got "1500"`},
		{"empty mtu", "    mtu:\n", `switches[0].mtu: no value`},
		{"octal-looking mtu", "    mtu: 01500\n", `switches[0].mtu: 01500: with a leading zero`},
		{"second document", "---\nname: other\n", `a second YAML document starts here`},
		{"empty peer", "    portgroups: [{name: pg, acl: {rules: [{action: allow, direction: ingress, from: ''}]}}]\n",
			`switches[0].portgroups[0].acl.rules[0].from: a peer needs a prefix`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := base + tc.add
			line := strings.Count(src, "\n")
			if strings.HasPrefix(tc.add, "---") {
				line--
			}
			_, err := spec.Load("t.yaml", []byte(src))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), fmt.Sprintf("(line %d:", line)) {
				t.Errorf("got %v, want %q at line %d", err, tc.want, line)
			}
		})
	}
}

// TestMultipleDocuments: a spec is one YAML document; any second one is
// refused at the line it starts on, whichever parser reads the file.
func TestMultipleDocuments(t *testing.T) {
	const one = "name: a\nhosts: [{name: h1}]\nswitches: [{name: sw0, hosts: [h1]}]\n"
	for _, tc := range []struct {
		src  string
		line int // 0: loads
	}{
		{one, 0},
		{"---\n" + one, 0},
		{one + "...\n", 0},
		{one + "---\nname: b\n", 4},
		{one + "---\n", 4},
		{one + "--- ~\n", 4},
		{"---\n" + one + "---\n" + one, 5},
		{one + "...\n---\nname: b\n", 5},
		{one + "...\n# the end\n", 0},
		{one + "--- # another\nname: b\n", 4},
	} {
		for _, fast := range []bool{true, false} {
			var err error
			load := func() { _, err = spec.Load("t.yaml", []byte(tc.src)) }
			if fast {
				load()
			} else {
				spec.WithoutFastYAML(load)
			}
			switch {
			case tc.line == 0 && err != nil:
				t.Errorf("%q: %v", tc.src, err)
			case tc.line != 0 && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("a second YAML document starts here; a spec is one document (remove the \"---\" and what follows, or apply each document as a spec of its own) (line %d:", tc.line))):
				t.Errorf("%q: got %v, want a second document at line %d", tc.src, err, tc.line)
			}
		}
	}
}

// TestErrorsShowNoControlCharacters writes control characters, escape
// sequences and invalid UTF-8 into keys and values of a spec: no error
// may carry one to the terminal.
func TestErrorsShowNoControlCharacters(t *testing.T) {
	hostile := []string{"\x1b[2J\x1b[31m", "\r", "\a", "\u202e", "\x7f", "\u0085"}
	var sources []string
	for _, h := range hostile {
		q := strings.Trim(fmt.Sprintf("%q", h), `"`) // a YAML double-quoted scalar takes Go's escapes for these
		if h == "\u202e" || h == "\u0085" {
			q = map[string]string{"\u202e": `\u202e`, "\u0085": `\x85`}[h]
		}
		for _, tmpl := range []string{
			"name: \"a%sb\"\n",
			"name: t\nhosts: [{name: \"h%s\", nics: [{name: n, speed: 1Gbit}]}]\n",
			"name: t\n\"k%s\": 1\n",
			"name: t\nswitches: [{name: s, hosts: [h], ioc: {enabled: true, pools: {\"p%s\": {shares: x}}}}]\n",
			"name: t\nswitches: [{name: s, uplinks: [{name: u, nics: {\"h%s\": n}}]}]\n",
			"name: t\nhosts: [{name: h, nics: [{name: n, speed: \"1G%s\"}]}]\n",
			"name: t\nswitches: [{name: s, portgroups: [{name: p, acl: {rules: [{action: allow, direction: egress, to: \"10.0.0.0/8%s\"}]}}]}]\n",
			"name: t\nswitches: [{name: s, teaming: {policy: \"x%s\"}}]\n",
			"name: t\nvms: [{name: v, host: \"h%s\", nics: [{portgroup: p, mac: \"m%s\"}]}]\n",
			"name: t\nx: &a%s 1\ny: *b\n",
		} {
			sources = append(sources, strings.ReplaceAll(tmpl, "%s", q))
		}
		sources = append(sources, "name: t\nhosts: [{name: h}]\n"+h+"x: 1\n", "name: \""+q+"\n")
	}
	for _, src := range sources {
		_, err := spec.Load("t.yaml", []byte(src))
		if err == nil {
			t.Errorf("%q: accepted", src)
			continue
		}
		if bad := controlCharacters.FindString(err.Error()); bad != "" || !utf8Valid(err.Error()) {
			t.Errorf("%q: the error carries %q:\n%s", src, bad, err)
		}
	}
}

// controlCharacters are what a terminal acts on, or shows other than as
// written: C0 and C1 controls but the newline between an error's problems,
// DEL, bidirectional overrides, and the replacement of invalid UTF-8.
var controlCharacters = regexp.MustCompile("[\x00-\x09\x0b-\x1f\x7f\u0080-\u009f\u202a-\u202e\u2066-\u2069\ufffd]")

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\ufffd") == s }

// TestEveryFieldIsDocumented: docs/spec.md's table of what a field left
// out and a zero or empty value written out mean has a row for every
// scalar field of the spec's types, and none for a field that is gone.
func TestEveryFieldIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n## Left out, zero and empty\n")
	if !ok {
		t.Fatal(`docs/spec.md has no section "## Left out, zero and empty"`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	var rows []string // the fields each row's first cell names
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[1], -1) {
			rows = append(rows, m[1])
		}
	}
	var fields []string
	for _, f := range fieldtest.Scalars() {
		if !slices.Contains(fields, f.Name) {
			fields = append(fields, f.Name)
		}
	}
	for _, f := range fields {
		if !slices.Contains(rows, f) {
			t.Errorf("docs/spec.md, \"Left out, zero and empty\": no row for %s", f)
		}
	}
	for _, r := range rows {
		if !slices.Contains(fields, r) {
			t.Errorf("docs/spec.md, \"Left out, zero and empty\": a row for %s, which the spec's types do not have", r)
		}
	}
}
