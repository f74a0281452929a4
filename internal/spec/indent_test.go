package spec

import (
	"strings"
	"testing"
)

func TestMisindented(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      int
	}{
		{"fine", "name: a\nhosts:\n  - name: h\n    nics: [{name: n0,\n      speed: 1Gbit}]\nvms:\n  - name: v\n    nics:\n      - portgroup: p\n        ip: 10.0.0.1/24\n", 0},
		{"a key under-indented in a list item", "vms:\n  - name: v\n    nics:\n      - portgroup: p\n       ip: 10.0.0.1/24\n", 5},
		{"a key over-indented", "vms:\n  - name: v\n    host: h\n     nics: []\n", 4},
		{"a block scalar may indent as it likes", "notes: |\n  one\n     two\n  three\nname: a\n", 0},
		{"comments and blank lines", "a:\n  # x\n\n  b: 1 # c:\n  c: 2\n", 0},
		{"a deeper block after a key", "a:\n    b:\n        c: 1\n    d: 2\n", 0},
		{"back to a level never opened", "a:\n    b: 1\n  c: 2\n", 3},
	} {
		if got := misindented([]byte(tt.src)); got != tt.want {
			t.Errorf("%s: line %d, want %d\n%s", tt.name, got, tt.want, tt.src)
		}
	}
}

// A YAML indentation mistake is reported at the line it is on, with the
// line the parser noticed it at.
func TestIndentationMistakeLine(t *testing.T) {
	src := "name: demo\nhosts:\n  - name: esx1\nvms:\n  - name: vm2\n    host: esx1\n    nics:\n      - portgroup: pg-a\n       ip: 10.0.0.2/24\n"
	_, err := Decode("bad.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "(line 9:") || !strings.Contains(err.Error(), "noticed at line 7") {
		t.Errorf("got %v, want line 9 and the parser's 7", err)
	}
}
