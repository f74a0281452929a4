// Package quote renders text a user wrote (a spec's value or key, a name
// on a command line) for an error message. A message goes to a terminal,
// a log or a web page: a control character in it could move the cursor,
// recolour or erase what is shown, and a megabyte-long value would bury
// the rest. So every message that echoes such text passes it through this
// package: quoted and escaped as Go quotes a string (Q, or %q of Text),
// or escaped without quotes where it is part of a larger name, such as a
// field path (Escape, or %s of Text), and clipped to ClipBytes.
package quote

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ClipBytes is how much of a value a message shows.
const ClipBytes = 64

// Q quotes s as strconv.Quote does, clipped to ClipBytes: control
// characters, format characters (such as bidirectional overrides) and
// invalid UTF-8 are escaped.
func Q(s string) string { return strconv.Quote(Clip(s, ClipBytes)) }

// Escape is s with what Q would escape escaped, but without quotes and
// without escaping quotes or backslashes: text that is printable as it is
// comes back unchanged. It does not clip.
func Escape(s string) string {
	if printable(s) {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\x`...)
			out = append(out, "0123456789abcdef"[s[i]>>4], "0123456789abcdef"[s[i]&0xf])
		case strconv.IsPrint(r):
			out = append(out, s[i:i+size]...)
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\u202e'
			out = append(out, q[1:len(q)-1]...)
		}
		i += size
	}
	return string(out)
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c >= 0x7f {
			return isPrintUTF8(s[i:])
		}
	}
	return true
}

// isPrintUTF8 is the slow check, for text beyond ASCII.
func isPrintUTF8(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !strconv.IsPrint(r) {
			return false
		}
		i += size
	}
	return true
}

// Clip shortens s to at most limit bytes of its own, cut at a character's
// start, saying how long it was.
func Clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:cut], len(s))
}

// Text is user text as an argument of a format: %q prints Q of it, any
// other verb Escape of it clipped. A message made of Text arguments is
// safe to print whichever verbs its format uses.
type Text string

// Format implements fmt.Formatter.
func (t Text) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprint(f, Q(string(t)))
		return
	}
	fmt.Fprint(f, Escape(Clip(string(t), ClipBytes)))
}

// Err is an error's message as an argument of a format: escaped, not
// clipped, since a message may be long and is not user text as a whole.
type Err struct{ Err error }

// Format implements fmt.Formatter.
func (e Err) Format(f fmt.State, verb rune) {
	if e.Err == nil {
		fmt.Fprint(f, "<nil>")
		return
	}
	if verb == 'q' {
		fmt.Fprint(f, strconv.Quote(e.Err.Error()))
		return
	}
	fmt.Fprint(f, Escape(e.Err.Error()))
}

// Args makes the arguments of a format safe: each string becomes Text and
// each error Err. Other values are the program's own (numbers, addresses
// it parsed) and are left as they are.
func Args(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			a = Text(v)
		case error:
			a = Err{v}
		}
		out[i] = a
	}
	return out
}
