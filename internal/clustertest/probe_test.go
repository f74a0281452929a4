package clustertest

import (
	"github.com/vnet-project/vnet/internal/dataplane/nsthread"
	"github.com/vnet-project/vnet/internal/nstest"
)

// inNS runs fn on a thread inside the namespace and brings the thread
// back (nsthread says why it must).
func inNS(ns string, fn func() error) error { return nsthread.InNamed(ns, fn) }

// The UDP echo and ping are nstest's, shared with the tests of networks on
// one machine.
var (
	echo          = nstest.Echo
	udpPing       = nstest.UDPPing
	collectEchoes = nstest.CollectEchoes
)
