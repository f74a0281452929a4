package speccache

import (
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/fieldtest"
)

// TestDecodeValidatedEqualsLoad: a spec made from its encoding is the one
// Load makes of its YAML.
func TestDecodeValidatedEqualsLoad(t *testing.T) {
	for name, src := range validSources(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			want, err := spec.Load(name, src)
			if err != nil {
				t.Fatal(err)
			}
			encoded := EncodeValidated(want)
			if encoded == nil {
				t.Fatal("no encoding of a loaded spec")
			}
			got, err := DecodeValidated(name, src, encoded)
			if err != nil {
				t.Fatal(err)
			}
			sameDocument(t, "decoded", got, want)
		})
	}
}

// markedEncoding is the encoding of richSpec's bytes with a spec whose
// name differs from its YAML's: a document named "marked" was made from
// the encoding, one named "rich" from the YAML.
func markedEncoding(t *testing.T) []byte {
	t.Helper()
	doc, err := spec.Load("rich.yaml", []byte(richSpec))
	if err != nil {
		t.Fatal(err)
	}
	doc.Spec.Name = "marked"
	return EncodeValidated(doc)
}

func TestDecodeValidatedUsesTheEncoding(t *testing.T) {
	got, err := DecodeValidated("rich.yaml", []byte(richSpec), markedEncoding(t))
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Name != "marked" {
		t.Fatalf("name %q: the YAML was decoded, not the encoding", got.Spec.Name)
	}
	if got.File != "rich.yaml" || string(got.Source) != richSpec {
		t.Errorf("file %q, %d bytes of source", got.File, len(got.Source))
	}
}

// TestDecodeValidatedFallsBack: an encoding that is not of these bytes,
// of this layout, or whole is ignored, and the YAML loaded.
func TestDecodeValidatedFallsBack(t *testing.T) {
	src := []byte(richSpec)
	want, err := spec.Load("rich.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	good := markedEncoding(t)
	variants := map[string][]byte{
		"none":           nil,
		"empty":          {},
		"cut short":      good[:len(good)-7],
		"header only":    good[:len(cacheMagic)+64],
		"a byte more":    append(append([]byte(nil), good...), 0),
		"another layout": flipped(good, len(cacheMagic)),
		"of other bytes": markedEncodingOf(t, richSpec+"# another comment\n"),
	}
	for i := 0; i < len(good); i += 11 { // header, checksum and spec alike
		variants["byte "+strconv.Itoa(i)+" flipped"] = flipped(good, i)
	}
	for what, encoded := range variants {
		got, err := DecodeValidated("rich.yaml", src, encoded)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sameDocument(t, what, got, want)
	}
}

// TestDecodeValidatedReportsBadYAML: bad bytes with another spec's
// encoding fail as Load fails, with the field path.
func TestDecodeValidatedReportsBadYAML(t *testing.T) {
	bad := []byte(strings.Replace(richSpec, "host: esx2", "host: nowhere", 1))
	_, err := DecodeValidated("bad.yaml", bad, markedEncoding(t))
	_, want := spec.Load("bad.yaml", bad)
	if err == nil || !errors.Is(err, spec.ErrInvalid) || err.Error() != want.Error() {
		t.Fatalf("error %v, want %v", err, want)
	}
}

func TestNoEncodingOfAnInvalidSpec(t *testing.T) {
	doc, err := spec.Decode("bad.yaml", []byte(strings.Replace(richSpec, "host: esx2", "host: nowhere", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if e := EncodeValidated(doc); e != nil {
		t.Fatalf("%d bytes of encoding of a spec that did not validate", len(e))
	}
	if e := EncodeValidated(nil); e != nil {
		t.Fatal("an encoding of no document")
	}
}

func markedEncodingOf(t *testing.T, src string) []byte {
	t.Helper()
	doc, err := spec.Load("other.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	doc.Spec.Name = "marked"
	return EncodeValidated(doc)
}

func flipped(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}

// TestBinaryFormKeepsWhatWasWritten encodes and decodes specs that write
// each scalar field of the spec's types as its zero, as null and as
// nothing: the spec read back must be the one encoded, a pointer to a
// zero apart from none, an empty list apart from none.
func TestBinaryFormKeepsWhatWasWritten(t *testing.T) {
	tried := 0
	for _, f := range fieldtest.Scalars() {
		for _, written := range []string{f.Zero(), "~", ""} {
			src, _ := f.Source(written)
			for _, text := range []string{string(src), string(src) + "vms:\nhostports: []\n"} {
				doc, err := spec.Decode("t.yaml", []byte(text))
				if err != nil {
					continue // refused: nothing to keep
				}
				got, err := decodeSpec(encodeSpec(nil, doc.Spec))
				if err != nil || !reflect.DeepEqual(got, doc.Spec) {
					t.Errorf("%s\nread back as %+v (%v), want %+v", text, got, err, doc.Spec)
				}
				tried++
			}
		}
	}
	if tried < 100 {
		t.Errorf("only %d specs loaded to try", tried)
	}
}
