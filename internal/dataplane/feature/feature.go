// Package feature names what this machine's kernel lacks. Every part of
// the dataplane reports a missing kernel feature as an *Error, which wraps
// ErrNotSupported, so that callers tell "not on this kernel" from a failure
// with errors.Is whichever part found it.
package feature

import (
	"errors"
	"fmt"
)

// ErrNotSupported is wrapped by every error about a kernel feature that is
// missing on this machine.
var ErrNotSupported = errors.New("not supported by this kernel")

// Error names a missing kernel feature and how to get it.
type Error struct {
	Feature string // e.g. "HTB qdisc"
	Hint    string // e.g. "modprobe sch_htb (CONFIG_NET_SCH_HTB)"
	Err     error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %v", e.Feature, ErrNotSupported)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() []error { return []error{ErrNotSupported, e.Err} }
