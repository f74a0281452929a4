package rtnl

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// dumpRetries bounds how often a dump the kernel interrupted is read
// again: the namespace changed while it was read (a new link's IPv6
// address finishing duplicate detection, for one), and what it returned
// may lack objects that exist.
const dumpRetries = 20

// RetryDump runs dump, again while the kernel says it interrupted it.
func RetryDump[T any](dump func() (T, error)) (T, error) {
	for i := 0; ; i++ {
		v, err := dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || i == dumpRetries {
			return v, err
		}
	}
}
