package dataplane

import (
	"errors"
	"fmt"
)

// ErrNotSupported is wrapped by every error about a kernel feature that is
// missing on this machine.
var ErrNotSupported = errors.New("not supported by this kernel")

// ErrNotRoot is returned when vnet lacks the privileges to change the network.
var ErrNotRoot = errors.New("vnet needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to change the network; run it with sudo")

// FeatureError names a missing kernel feature and how to get it.
type FeatureError struct {
	Feature string // e.g. "HTB qdisc"
	Hint    string // e.g. "modprobe sch_htb (CONFIG_NET_SCH_HTB)"
	Err     error
}

func (e *FeatureError) Error() string {
	s := fmt.Sprintf("%s: %v", e.Feature, ErrNotSupported)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *FeatureError) Unwrap() []error { return []error{ErrNotSupported, e.Err} }
