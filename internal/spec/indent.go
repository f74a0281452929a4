package spec

import (
	"strings"
)

// The YAML parser reports an indentation mistake where it noticed it,
// which is often the start of the block the mistaken line belongs to, lines
// above it. misindented finds the line the mistake is on: the first line
// whose indentation opens no block and returns to none that is open. It
// reads only what block YAML's indentation says; lines inside block
// scalars and multi-line flow collections are skipped. 0: none found.
func misindented(src []byte) int {
	var open []int // the indentations of the blocks open at this line
	opens := false // the previous line opened a block below it
	scalar := -1   // inside a block scalar: the indentation it is under
	flow := 0      // brackets of a flow collection still open
	for n, line := range strings.Split(string(src), "\n") {
		text := strings.TrimRight(line, " \t\r")
		content := strings.TrimLeft(text, " ")
		indent := len(text) - len(content)
		if content == "" || content[0] == '#' {
			continue
		}
		if scalar >= 0 && indent > scalar {
			continue
		}
		scalar = -1
		if flow > 0 {
			flow += depth(content)
			continue
		}
		for len(open) > 0 && open[len(open)-1] > indent {
			open = open[:len(open)-1]
		}
		switch top := len(open) - 1; {
		case top >= 0 && open[top] == indent:
		case opens || top < 0:
			open = append(open, indent)
		default:
			return n + 1
		}
		// A list item's content is a block of its own, at the item's text.
		for strings.HasPrefix(content, "- ") {
			content = strings.TrimLeft(content[2:], " ")
			open = append(open, len(text)-len(content))
		}
		body := stripComment(content)
		opens = strings.HasSuffix(body, ":") || body == "-"
		if strings.HasSuffix(body, "|") || strings.HasSuffix(body, ">") || strings.HasSuffix(body, "|-") || strings.HasSuffix(body, ">-") {
			scalar = indent
		}
		flow = max(depth(body), 0)
	}
	return 0
}

// depth is how many more brackets a line opens than it closes, quotes
// aside.
func depth(s string) int {
	d := 0
	unquoted(s, func(_ int, r rune) bool {
		switch r {
		case '[', '{':
			d++
		case ']', '}':
			d--
		}
		return true
	})
	return d
}

// stripComment drops a trailing comment (" #" outside quotes).
func stripComment(s string) string {
	end := len(s)
	unquoted(s, func(i int, r rune) bool {
		if r == '#' && i > 0 && s[i-1] == ' ' {
			end = i
			return false
		}
		return true
	})
	return strings.TrimRight(s[:end], " ")
}

// unquoted calls f with each rune of s outside quotes and its index, until
// f returns false.
func unquoted(s string, f func(i int, r rune) bool) {
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case !f(i, r):
			return
		}
	}
}
