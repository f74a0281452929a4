package reconcile

import (
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// The last record's spec is the caller's (Engine.Applied) only when it
// holds the same bytes from the same file; otherwise it is decoded.
func TestSpecOfTakesTheAppliedSpecOfTheSameBytes(t *testing.T) {
	const src = "name: a\n"
	applied, err := spec.Load("a.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		applied *spec.Document
		rec     store.Record
		taken   bool
	}{
		{"the same bytes and file", applied, store.Record{Name: "a", SpecFile: "a.yaml", Spec: []byte(src)}, true},
		{"other bytes", applied, store.Record{Name: "a", SpecFile: "a.yaml", Spec: []byte(src + "# changed\n")}, false},
		{"another file", applied, store.Record{Name: "a", SpecFile: "b.yaml", Spec: []byte(src)}, false},
		{"none given", nil, store.Record{Name: "a", SpecFile: "a.yaml", Spec: []byte(src)}, false},
	}
	for _, tt := range tests {
		e := &Engine{Applied: tt.applied}
		got := e.specOf(&tt.rec)
		if got == nil {
			t.Fatalf("%s: no spec", tt.name)
		}
		if taken := got == applied.Spec; taken != tt.taken {
			t.Errorf("%s: took the applied spec %v, want %v", tt.name, taken, tt.taken)
		}
		if got.Name != "a" {
			t.Errorf("%s: spec of %q", tt.name, got.Name)
		}
	}
}
