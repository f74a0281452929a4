package clustertest

import "github.com/vnet-project/vnet/internal/nstest"

// The frame counters and raw frames are nstest's, shared with the tests
// of networks on one machine.
type frameCounter = nstest.FrameCounter

var (
	countFrames = nstest.CountFrames
	sendFrames  = nstest.SendFrames
	ethFrame    = nstest.EthFrame
	ipv4UDP     = nstest.IPv4UDP
	vxlanHeader = nstest.VXLANHeader
	arpRequest  = nstest.ARPRequest
	linkStats   = nstest.LinkStats
)
