package spec

import "strings"

// WantedError returns TEXT from a first line "# want: TEXT". Bad-spec test
// files carry their expected error this way so that unit tests and command
// tests share them.
func WantedError(src []byte) string {
	first, _, _ := strings.Cut(string(src), "\n")
	want, ok := strings.CutPrefix(first, "# want: ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(want)
}
