package clustertest

import (
	"runtime"

	"github.com/vishvananda/netns"

	"github.com/vnet-project/vnet/internal/nstest"
)

// inNS runs fn on a thread inside the namespace and brings the thread
// back. A thread left there (as a goroutine that ends while locked leaves
// it) can be the test's main thread, which the runtime parks instead of
// ending; the process then counts as one inside the namespace, and an
// agent that removes the namespace kills whatever runs in it.
func inNS(ns string, fn func() error) error {
	target, err := netns.GetFromName(ns)
	if err != nil {
		return err
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return // the thread stays locked and ends with the goroutine
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- err
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// The UDP echo and ping are nstest's, shared with the tests of networks on
// one machine.
var (
	echo          = nstest.Echo
	udpPing       = nstest.UDPPing
	collectEchoes = nstest.CollectEchoes
)
