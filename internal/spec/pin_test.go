package spec

import (
	"reflect"
	"strings"
	"testing"
)

// blockNetSpec writes its networks in block style, some in flow style,
// with comments, characters of more than one byte, a zero-indented list,
// a network that has its VNI and one whose VNI is null.
const blockNetSpec = `# ünïcode before anything
name: dc
hosts:
  - {name: hv1, underlay: 10.0.0.11}   # hv1 ✓
  - {name: hv2, underlay: 10.0.0.12}
networks:
- name: a-web   # the web tier
  subnet: 10.1.0.0/24
  gateway: 10.1.0.1
  router: ta
-
  name: a-db
  subnet: 10.2.0.0/24
  gateway: 10.2.0.1
  router: ta
- {name: b-web, subnet: 10.1.0.0/24,
   gateway: 10.1.0.1, router: tb}
- {  name: c, vni: 77, subnet: 10.3.0.0/24}
- {name: d, vni: ~, subnet: 10.4.0.0/24}
- mtu: 1400
  name: e
  subnet: 10.5.0.0/24
vms:
  - {name: a1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24, mac: "02:00:00:00:00:11"}]}
  - name: b1
    host: hv2
    nics:
      - {network: b-web, ip: 10.1.0.11/24, mac: "02:00:00:00:00:11"}
      - {network: e, ip: 10.5.0.11/24}
`

// TestPinInText checks that the edit of the source text gives what the
// edit of the YAML tree gives, and a document that loading its source
// gives: the same spec, positions and nulls.
func TestPinInText(t *testing.T) {
	cases := []struct {
		name   string
		src    string
		inText bool // else the tree's edit does it
	}{
		{"flow items", netSpec, true},
		{"block items", blockNetSpec, true},
		{"generated", string(GeneratedNetworks(300)), true},
		{"all pinned", strings.Replace(netSpec, "{name: a-db,", "{name: a-db, vni: 5,", 1), true},
		{"flow list", flowList(netSpec), false},
		{"alias", strings.Replace(netSpec, "- {name: a-db", "- &db {name: a-db", 1) + "x: *db\n", false},
		{"quoted key", strings.Replace(blockNetSpec, "- name: a-web", `- "name": a-web`, 1), false},
		{"crlf", strings.ReplaceAll(netSpec, "\n", "\r\n"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := Load("t.yaml", []byte(tc.src))
			if err != nil {
				if tc.name == "alias" && strings.Contains(err.Error(), "unknown field") {
					doc, err = Load("t.yaml", []byte(strings.TrimSuffix(tc.src, "x: *db\n")))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			vnis := AllocateVNIs(doc.Spec, nil)
			tree, err := pinInTree(doc, vnis)
			if err != nil {
				t.Fatal(err)
			}
			text, ok := pinInText(doc, vnis)
			if ok != tc.inText {
				t.Fatalf("edited in the text: %v, want %v", ok, tc.inText)
			}
			if !ok {
				return
			}
			if !reflect.DeepEqual(text.Spec, tree.Spec) {
				t.Errorf("spec differs from the tree's edit:\n got %+v\nwant %+v", text.Spec.Networks, tree.Spec.Networks)
			}
			loaded, err := Load("t.yaml", text.Source)
			if err != nil {
				t.Fatalf("%v\n%s", err, text.Source)
			}
			if !reflect.DeepEqual(text.Spec, loaded.Spec) {
				t.Errorf("spec differs from its source's")
			}
			positions, nulls := text.where()
			if !reflect.DeepEqual(nulls, loaded.nulls) {
				t.Errorf("nulls %v, its source's %v", nulls, loaded.nulls)
			}
			for path, pos := range loaded.positions {
				if got, ok := positions[path]; !ok || got != pos {
					t.Errorf("%s at %v, in its source at %v", path, got, pos)
				}
			}
			if len(positions) != len(loaded.positions) {
				t.Errorf("%d positions, its source has %d", len(positions), len(loaded.positions))
			}
			if text == doc {
				return
			}
			if got, want := text.located.anchors, anchorsIn(loaded.positions, len(loaded.Spec.Networks)); !reflect.DeepEqual(got, want) {
				t.Errorf("anchors %+v, its source's %+v", got, want)
			}
			again, err := PinVNIs(doc, text.Spec)
			if err != nil || string(again.Source) != string(text.Source) {
				t.Errorf("pinning the same source again gives other text (%v)", err)
			}
		})
	}
}

// flowList writes a spec's list of networks, one item a line, as one
// flow list.
func flowList(src string) string {
	head, rest, _ := strings.Cut(src, "networks:\n")
	items, tail, _ := strings.Cut(rest, "vms:\n")
	list := strings.Split(strings.TrimSuffix(items, "\n"), "\n")
	for i := range list {
		list[i] = strings.TrimPrefix(list[i], "  - ")
	}
	return head + "networks: [" + strings.Join(list, ", ") + "]\nvms:\n" + tail
}

// FuzzPinInText edits arbitrary valid specs in their text: the result must
// be what loading its source gives.
//
//	go test -run='^$' -fuzz=FuzzPinInText -fuzztime=60s ./internal/spec
func FuzzPinInText(f *testing.F) {
	for _, src := range []string{netSpec, blockNetSpec, string(GeneratedNetworks(3)), flowList(netSpec)} {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		doc, err := Load("t.yaml", []byte(src))
		if err != nil {
			return
		}
		vnis := AllocateVNIs(doc.Spec, nil)
		text, ok := pinInText(doc, vnis)
		if !ok {
			return
		}
		// The same document made of its encoding, without its positions,
		// pins to the same text.
		if encoded, ok := fromEncoding("t.yaml", doc.Source, EncodeValidated(doc)); !ok {
			t.Fatal("the encoding does not read back")
		} else if again, ok := pinInText(encoded, vnis); !ok || string(again.Source) != string(text.Source) || !reflect.DeepEqual(again.Spec, text.Spec) {
			t.Fatalf("pinned from its encoding (%v):\n%s\nfrom its YAML:\n%s", ok, again.Source, text.Source)
		}
		loaded, err := Load("t.yaml", text.Source)
		if err != nil {
			t.Fatalf("the edit does not load: %v\n%s", err, text.Source)
		}
		if text == doc {
			return
		}
		positions, nulls := text.where()
		if !reflect.DeepEqual(text.Spec, loaded.Spec) || !reflect.DeepEqual(positions, loaded.positions) || !reflect.DeepEqual(nulls, loaded.nulls) ||
			!reflect.DeepEqual(text.located.anchors, anchorsIn(loaded.positions, len(loaded.Spec.Networks))) {
			t.Fatalf("the edit differs from its source's document:\n%s", text.Source)
		}
	})
}

// TestPinFromCache pins documents made without decoding their YAML (from
// a Cache, in memory and in its files, and from a stored encoding), and
// documents pinned before: each must give the source, spec and positions
// that pinning the freshly loaded document gives.
func TestPinFromCache(t *testing.T) {
	for _, src := range []string{netSpec, blockNetSpec, string(GeneratedNetworks(50)), flowList(netSpec)} {
		fresh, err := Load("t.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		want, err := PinVNIs(fresh, nil)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := Load("t.yaml", want.Source) // with all its positions
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		c := NewCache(dir)
		if _, err := c.Load("t.yaml", []byte(src)); err != nil {
			t.Fatal(err)
		}
		fromMemory, _ := c.Load("t.yaml", []byte(src))
		fromFile, _ := NewCache(dir).Load("t.yaml", []byte(src))
		encoded, err := DecodeValidated("t.yaml", []byte(src), EncodeValidated(fresh))
		if err != nil {
			t.Fatal(err)
		}
		// A cached document whose positions were asked for already.
		located, _ := c.Load("t.yaml", []byte(src))
		located.PosOf("networks")
		for what, doc := range map[string]*Document{"memory": fromMemory, "file": fromFile, "encoded": encoded, "located": located} {
			if doc.located == nil {
				t.Fatalf("%s: the document was decoded", what)
			}
			got, err := PinVNIs(doc, nil)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			sameDocument(t, what, got, ref)
		}
		// The pinned document, kept and read back, pins to itself.
		c.Add(want)
		kept, ok := c.lookup("t.yaml", want.Source)
		if !ok {
			t.Fatal("the pinned document was not kept")
		}
		again, err := PinVNIs(kept, want.Spec)
		if err != nil || string(again.Source) != string(want.Source) {
			t.Errorf("pinning the kept pinned document changed it (%v)", err)
		}
	}
}
