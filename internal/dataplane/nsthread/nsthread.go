// Package nsthread runs code in a network namespace. A namespace belongs to
// an OS thread, not to a goroutine, so code that enters one (setns) or makes
// one (unshare) must keep its goroutine on one locked thread and bring the
// thread back before anything else may run on it. Every such entry of vnet,
// the product's and the tests', goes through Run or In.
package nsthread

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Run runs fn on a locked OS thread of its own and brings the thread back
// to its namespace afterwards. fn may switch the thread's namespace (setns,
// or unshare to make a new one). A thread that cannot be brought back stays
// locked, and the runtime ends it with its goroutine instead of running
// other goroutines in the wrong namespace.
func Run(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("return to the original netns: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// In runs fn as Run does, on a thread that has entered target; name names
// the namespace in errors.
// Equivalent to: ip netns exec NAME ...
func In(name string, target netns.NsHandle, fn func() error) error {
	return Run(func() error {
		if err := netns.Set(target); err != nil {
			return fmt.Errorf("enter netns %s: %w", name, err)
		}
		return fn()
	})
}

// InNamed runs fn in the namespace named in /run/netns, as ip-netns(8)
// names them.
func InNamed(name string, fn func() error) error {
	target, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", name, err)
	}
	defer target.Close()
	return In(name, target, fn)
}

// New makes a namespace without a name, on a thread that comes back: the
// namespace lives as long as the handle returned (or anything else that
// holds it), and so dies with the process however it ends.
// Equivalent to: unshare --net, holding the namespace's file open
func New() (netns.NsHandle, error) {
	var h netns.NsHandle
	err := Run(func() (err error) {
		h, err = netns.New() // moves this thread into it
		return err
	})
	return h, err
}
