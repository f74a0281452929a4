package quote

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// hostile are texts a terminal would act on, or that are not text at all.
var hostile = []string{"\x1b[2J\x1b[31mred", "a\rb", "bell\a", "nul\x00", "del\x7f", "\u202eevil", "bad\xff\xfeutf8", "tab\there", "line\nbreak", "c1\u0085"}

func TestNothingUnprintableGetsThrough(t *testing.T) {
	for _, s := range hostile {
		for _, out := range []string{Q(s), Escape(s), fmt.Sprintf("%s %q %v", Text(s), Text(s), Text(s)),
			fmt.Sprintf("%v %q", Err{errors.New(s)}, Err{errors.New(s)})} {
			if bad := unprintable(out); bad != "" {
				t.Errorf("%q came out as %q, which holds %q", s, out, bad)
			}
		}
	}
}

func TestPrintableTextIsUnchanged(t *testing.T) {
	for _, s := range []string{"", "vms[0].nics[1].mtu", "café", "a\"b\\c", "日本"} {
		if got := Escape(s); got != s {
			t.Errorf("Escape(%q) = %q", s, got)
		}
		if got := fmt.Sprintf("%s", Text(s)); got != s {
			t.Errorf("%%s of Text(%q) = %q", s, got)
		}
		if got, want := fmt.Sprintf("%q", Text(s)), fmt.Sprintf("%q", s); got != want {
			t.Errorf("%%q of Text(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", 100)
	got := Q(long)
	if len(got) > ClipBytes+20 || !strings.Contains(got, "(200 bytes)") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("Q of 200 bytes = %s", got)
	}
	if got := fmt.Sprintf("%v", Err{errors.New(strings.Repeat("x", 200))}); len(got) != 200 {
		t.Errorf("an error's message was clipped to %d bytes", len(got))
	}
}

func TestArgs(t *testing.T) {
	got := fmt.Sprintf("%s %q %d %v", Args([]any{"a\x1b", "b\x1b", 3, errors.New("c\x1b")})...)
	if want := `a\x1b "b\x1b" 3 c\x1b`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// unprintable returns the first control character or invalid byte of s.
func unprintable(s string) string {
	for i, r := range s {
		if r < ' ' || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\uFFFD' || r == '\u202e' {
			return s[i : i+1]
		}
	}
	return ""
}
