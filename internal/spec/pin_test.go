package spec

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec/spectest"
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
		{"generated", string(spectest.Networks(300)), true},
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
	for _, src := range []string{netSpec, blockNetSpec, string(spectest.Networks(3)), flowList(netSpec)} {
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
		// The same document made as a cache makes it, without its
		// positions, pins to the same text.
		if kept, err := FromValidated("t.yaml", doc.Source, doc.Spec, doc.AppendAnchors(nil)); err != nil {
			t.Fatalf("the anchors do not read back: %v", err)
		} else if again, ok := pinInText(kept, vnis); !ok || string(again.Source) != string(text.Source) || !reflect.DeepEqual(again.Spec, text.Spec) {
			t.Fatalf("pinned as kept (%v):\n%s\nfrom its YAML:\n%s", ok, again.Source, text.Source)
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

// TestPinWithoutDecoding pins documents made as a cache makes them
// (FromValidated, with the anchors AppendAnchors wrote): each pins to what
// the freshly loaded document pins to, without reading its YAML's
// positions.
func TestPinWithoutDecoding(t *testing.T) {
	for _, src := range []string{netSpec, blockNetSpec, string(spectest.Networks(50)), flowList(netSpec)} {
		fresh, err := Load("t.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		want, err := PinVNIs(fresh, nil)
		if err != nil {
			t.Fatal(err)
		}
		kept, err := FromValidated("t.yaml", fresh.Source, fresh.Spec, fresh.AppendAnchors(nil))
		if err != nil {
			t.Fatal(err)
		}
		got, err := PinVNIs(kept, nil)
		if err != nil {
			t.Fatal(err)
		}
		if kept.located.positions != nil {
			t.Errorf("pinning read the positions of a document made without them")
		}
		if string(got.Source) != string(want.Source) || !reflect.DeepEqual(got.Spec, want.Spec) {
			t.Errorf("pinned without decoding:\n%s\nfrom the loaded document:\n%s", got.Source, want.Source)
		}
	}
}

// TestDamagedAnchors gives FromValidated anchors that are not what
// AppendAnchors wrote of the spec: each is refused.
func TestDamagedAnchors(t *testing.T) {
	doc, err := Load("t.yaml", []byte(netSpec))
	if err != nil {
		t.Fatal(err)
	}
	good := doc.AppendAnchors(nil)
	for what, anchors := range map[string][]byte{
		"none":               nil,
		"cut":                good[:len(good)-1],
		"one more byte":      append(append([]byte{}, good...), 0),
		"another count":      append([]byte{byte(len(doc.Spec.Networks) + 2)}, good[1:]...),
		"unknown, then more": {0, 1},
	} {
		if _, err := FromValidated("t.yaml", doc.Source, doc.Spec, anchors); !errors.Is(err, ErrDamagedAnchors) {
			t.Errorf("%s: %v, want ErrDamagedAnchors", what, err)
		}
	}
	if kept, err := FromValidated("t.yaml", doc.Source, doc.Spec, []byte{0}); err != nil || kept.located.anchors != nil {
		t.Errorf("unknown anchors: %v", err)
	}
}
