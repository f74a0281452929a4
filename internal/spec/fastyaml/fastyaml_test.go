package fastyaml

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vnet-project/vnet/internal/spec/spectest"
)

// The simple parser makes of what it parses the tree yaml.v3's parser
// makes, and leaves to it what it does not.
func TestSimpleYAMLIsYAML(t *testing.T) {
	srcs := map[string]string{
		"generated networks": string(spectest.Networks(50)),
		"block items":        "name: a\nhosts:\n  - name: h1\n    nics: [{name: n0, speed: 1Gbit}]\n  - name: h2\nvms:\n- name: v1\n  host: h1\n  cpus: 0.5\n  nics:\n    - {portgroup: pg, ip: 10.0.0.1/24, mac: \"52:54:00:00:00:01\"}\n",
		"nested maps":        "name: b\nswitches:\n  - name: s\n    teaming:\n      active: [u1, u2]\n    portgroups: [{name: pg, vlan: 10}]\n",
		"quotes":             "name: 'c'\nhosts: [{name: \"h\"}]\n",
		"nulls":              "name: d\nvms: ~\nhosts: null\n",
		"ipv6 block":         "name: e\nnetworks:\n  - name: n\n    subnet6: fd00:2::/64\n",
		"empty flow":         "name: f\nhosts: []\nvms: {}\n",
		"blank lines":        "\nname: g\n\nhosts:\n\n  - {name: h}\n\n",
		// outside the simple shape: yaml.v3 parses these
		"comment":         "name: h # the name\n",
		"anchor":          "name: i\nhosts: &h [{name: h}]\n",
		"block scalar":    "name: |\n  j\n",
		"empty value":     "name: k\nhosts:\nvms: []\n",
		"multi-line flow": "name: l\nhosts: [{name: h},\n  {name: h2}]\n",
		"ipv6 in flow":    "name: m\nnetworks: [{name: n, subnet6: fd00:2::/64}]\n",
		"trailing comma":  "name: n\nhosts: [{name: h},]\n",
		"escapes":         "name: \"o\\n\"\n",
		"tab":             "name: p\nhosts:\n\t- {name: h}\n",
		"not a mapping":   "- a\n- b\n",
		"continuation":    "name: q\n  r\n",
		"document marker": "---\nname: s\n",
		"bad indentation": "name: t\nhosts:\n  - {name: h}\n   - {name: i}\n",
	}
	files, _ := filepath.Glob("../../examples/*/*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs[f] = string(b)
	}
	simple := 0
	for name, src := range srcs {
		var want yaml.Node
		wantErr := yaml.Unmarshal([]byte(src), &want)
		got, ok := Parse([]byte(src))
		if !ok {
			continue
		}
		simple++
		if wantErr != nil {
			t.Errorf("%s: parsed, where yaml.v3 says %v", name, wantErr)
			continue
		}
		if g, w := treeText(got), treeText(&want); g != w {
			t.Errorf("%s: tree\n%s\nwant\n%s", name, g, w)
		}
	}
	if simple < 8 {
		t.Errorf("only %d of the specs parsed simply", simple)
	}
	for _, name := range []string{"generated networks", "block items", "nested maps", "nulls", "ipv6 block"} {
		if _, ok := Parse([]byte(srcs[name])); !ok {
			t.Errorf("%s: not parsed simply", name)
		}
	}
}

// treeText is what a tree says to the decoder: kinds, tags, styles,
// values and positions.
func treeText(n *yaml.Node) string {
	var b strings.Builder
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		fmt.Fprintf(&b, "%s%d %s %s %d %q %d:%d\n", strings.Repeat(" ", depth), n.Kind, n.Tag, n.ShortTag(), n.Style, n.Value, n.Line, n.Column)
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return b.String()
}

// Whatever the simple parser takes, yaml.v3 parses to the same tree.
//
//	go test -run '^$' -fuzz FuzzSimpleYAML -fuzztime 1m ./internal/spec/fastyaml
func FuzzSimpleYAML(f *testing.F) {
	f.Add(string(spectest.Networks(3)))
	f.Add("name: a\nhosts:\n  - name: h1\n    nics: [{name: n0, speed: 1Gbit}]\nvms:\n- name: v1\n  nics:\n    - {ip: \"x\"}\n")
	f.Add("name: b\nhosts: [[a, 'b'], {c: d}]\n")
	f.Fuzz(func(t *testing.T, src string) {
		got, ok := Parse([]byte(src))
		if !ok {
			return
		}
		var want yaml.Node
		if err := yaml.Unmarshal([]byte(src), &want); err != nil {
			t.Fatalf("parsed %q, where yaml.v3 says %v", src, err)
		}
		if g, w := treeText(got), treeText(&want); g != w {
			t.Fatalf("%q: tree\n%s\nwant\n%s", src, g, w)
		}
	})
}

// TestDigitsTagIsYAMLs: the values digitsTag resolves, it resolves as
// yaml.v3 does; random values over the characters numbers, addresses,
// dates and times are made of, and some written out.
func TestDigitsTagIsYAMLs(t *testing.T) {
	values := []string{"0", "7", "1500", "10001", "0755", "09", "012", "1.5", "1.", "1e3", "1.5e3", "10.0.0.0/24",
		"192.0.2.1", "1.2.3", "2001-12-14", "2001-12-14 21:59:43.10", "1_000", "0x1f", "0o17", "0b101",
		"123456789012345678", "1234567890123456789", "99999999999999999999", "1:30", "1/2", "10.1.0.10/24", "1.2/3"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789././-:_xobeE+ "
	for range 20000 {
		b := []byte{byte('0' + rng.IntN(10))}
		for range rng.IntN(12) {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		values = append(values, string(b))
	}
	resolved := 0
	for _, v := range values {
		tag, ok := digitsTag(v)
		if !ok {
			continue
		}
		resolved++
		if want := (&yaml.Node{Kind: yaml.ScalarNode, Value: v}).ShortTag(); tag != want {
			t.Errorf("%q: digitsTag %s, yaml.v3 %s", v, tag, want)
		}
	}
	if resolved < len(values)/4 {
		t.Errorf("digitsTag resolved %d of %d values", resolved, len(values))
	}
}
