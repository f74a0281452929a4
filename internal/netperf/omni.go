package netperf

import (
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/vnet-project/vnet/internal/cpustat"
	"github.com/vnet-project/vnet/internal/netperf/wire"
)

// How the engine's tests map to OMNI on the wire: netperf 2.7 runs its
// classic tests as OMNI tests, told apart by protocol, direction and the
// connection-test flag.

// padTime is how long past a timed test's length netserver waits for the
// end of a test only netperf's side can see (netlib.h's PAD_TIME).
const padTime = 4 * time.Second

// omniShape is a test's protocol and the netserver's direction.
func omniShape(test string) (proto, sockType, dir, flags uint32) {
	switch test {
	case TCPStream:
		return wire.ProtoTCP, wire.SockStream, wire.Recv, 0
	case TCPMaerts:
		return wire.ProtoTCP, wire.SockStream, wire.Xmit, 0
	case TCPRR:
		return wire.ProtoTCP, wire.SockStream, wire.Xmit | wire.Recv, 0
	case TCPCRR:
		return wire.ProtoTCP, wire.SockStream, wire.Xmit | wire.Recv, wire.FlagConnectTest
	case UDPStream:
		return wire.ProtoUDP, wire.SockDgram, wire.Recv, 0
	case UDPRR:
		return wire.ProtoUDP, wire.SockDgram, wire.Xmit | wire.Recv, 0
	case UDPMaerts:
		return wire.ProtoUDP, wire.SockDgram, wire.Xmit, 0
	}
	return 0, 0, 0, 0
}

// testOf is the test an OMNI request asks for.
func testOf(o *wire.OmniRequest) (string, error) {
	rr := o.Direction == wire.Xmit|wire.Recv
	switch {
	case o.Protocol == wire.ProtoTCP && o.Flags&wire.FlagConnectTest != 0 && rr:
		return TCPCRR, nil
	case o.Protocol == wire.ProtoTCP && o.Flags&wire.FlagConnectTest != 0:
		return "", fmt.Errorf("a connection test that does not both send and receive (TCP_CC) is not served")
	case o.Protocol == wire.ProtoTCP && rr:
		return TCPRR, nil
	case o.Protocol == wire.ProtoTCP && o.Direction == wire.Recv:
		return TCPStream, nil
	case o.Protocol == wire.ProtoTCP:
		return TCPMaerts, nil
	case rr:
		return UDPRR, nil
	case o.Direction == wire.Recv:
		return UDPStream, nil
	}
	return UDPMaerts, nil
}

// requestFromOmni is the engine's request for a DO_OMNI message: its
// sizes, buffers and options, with netperf's "default" values (0 or -1)
// as the engine's 0.
func requestFromOmni(o *wire.OmniRequest, ext wire.Ext, hasExt bool, affinity int32) (*Request, error) {
	test, err := testOf(o)
	if err != nil {
		return nil, err
	}
	pos := func(v int32) int { return int(max(v, 0)) }
	r := &Request{Test: test, SndBuf: pos(o.SendBufSize), RcvBuf: pos(o.RecvBufSize), DataPort: int(o.DataPort),
		RecordCPU: o.Flags&wire.FlagMeasureCPU != 0, NoDelay: o.Flags&wire.FlagNoDelay != 0, TOS: -1,
		CongControl: o.CongControl, BindIP: o.NetserverIP, PeerIP: o.NetperfIP, PeerPort: int(o.NetperfPort), Prio: -1,
		KeepAlive: o.Flags&wire.FlagKeepAlive != 0, Connected: o.Flags&wire.FlagUseConnected != 0, FastOpen: o.Flags&wire.FlagFastOpen != 0,
		SendWidth: int(min(o.SendWidth, maxWidth+1)), RecvWidth: int(min(o.RecvWidth, maxWidth+1)), Burst: int(min(o.IntervalBurst, maxBurst+1))}
	if o.IntervalBurst > 0 {
		r.Interval = time.Duration(min(o.IntervalUsecs, 3600e6)) * time.Microsecond
		if r.Interval == 0 {
			r.Interval = time.Millisecond
		}
	}
	if o.SocketPrio >= 0 {
		r.Prio = int(o.SocketPrio)
	}
	// Alignment and offset as netperf bounds them; beyond, the defaults.
	if o.SendAlignment <= maxAlign && o.SendOffset <= maxOffset && o.RecvAlignment <= maxAlign && o.RecvOffset <= maxOffset {
		r.bufs = bufLayout{sendAlign: int(o.SendAlignment), sendOffset: int(o.SendOffset), recvAlign: int(o.RecvAlignment), recvOffset: int(o.RecvOffset)}
	}
	switch o.Family {
	case wire.FamilyInet:
		r.Family = "4"
	case wire.FamilyInet6:
		r.Family = "6"
	}
	switch {
	case hasExt && ext.Duration > 0:
		r.Duration = ext.Duration
	case o.TestLength > 0:
		r.Duration = time.Duration(o.TestLength) * time.Second
	case o.TestLength < 0:
		r.Count = -int64(o.TestLength)
	default:
		return nil, fmt.Errorf("a test without an end (-l 0) is not served")
	}
	if o.SocketTOS >= 0 {
		r.TOS = int(o.SocketTOS)
	}
	if affinity >= 0 {
		cpu := int(affinity)
		r.BindCPU = &cpu
	}
	switch test {
	case TCPRR, TCPCRR, UDPRR:
		r.ReqSize, r.RespSize = pos(o.RequestSize), pos(o.ResponseSize)
	case TCPStream, UDPStream:
		r.RecvSize = pos(o.RecvSize)
	case TCPMaerts, UDPMaerts:
		r.SendSize = pos(o.SendSize)
	}
	if test == UDPStream && r.RecvSize == 0 {
		r.RecvSize = maxUDP
	}
	if test == UDPMaerts && r.SendSize == 0 {
		r.SendSize = DefaultUDPSize
	}
	return r, nil
}

// omniRequest is the DO_OMNI request for a test against tg, with the
// extension that tells a vnet netserver what this end offers.
func (c *Config) omniRequest(family string, local netip.AddrPort, explicitData netip.Addr) *wire.Message {
	proto, st, dir, flags := omniShape(c.Test)
	orDefault := func(v int) int32 {
		if v > 0 {
			return int32(v)
		}
		return -1
	}
	o := &wire.OmniRequest{SendBufSize: orDefault(c.RemoteSndBuf), RecvBufSize: orDefault(c.RemoteRcvBuf), SendSize: -1, RecvSize: -1,
		RequestSize: -1, ResponseSize: -1, SendAlignment: 8, RecvAlignment: 8, Protocol: proto, SocketType: st, Direction: dir,
		Flags: flags | wire.FlagWantCong, DataPort: uint32(c.RemoteDataPort), SocketPrio: -1, SocketTOS: -1, CongControl: c.RemoteCong,
		NetperfPort: uint32(local.Port()), NetperfIP: local.Addr(), NetserverIP: explicitData}
	o.Family = wire.FamilyInet
	if family == "6" {
		o.Family = wire.FamilyInet6
	}
	if c.RemoteTOS >= 0 {
		o.SocketTOS = int32(c.RemoteTOS)
	}
	if c.RemoteCPU || c.LocalCPU {
		o.Flags |= wire.FlagMeasureCPU
	}
	if c.RemoteNoDelay {
		o.Flags |= wire.FlagNoDelay
	}
	if c.KeepAlive {
		o.Flags |= wire.FlagKeepAlive
	}
	if c.RemoteConnected {
		o.Flags |= wire.FlagUseConnected
	}
	if c.FastOpen {
		o.Flags |= wire.FlagFastOpen
	}
	// The rings' widths, which netperf's netserver takes for its own:
	// -W's, or a request/response test's one buffer each way.
	o.SendWidth, o.RecvWidth = uint32(c.SendWidth), uint32(c.RecvWidth)
	if c.IsRR() {
		o.SendWidth, o.RecvWidth = uint32(max(c.SendWidth, 1)), uint32(max(c.RecvWidth, 1))
	}
	if c.RemoteBurst > 0 {
		o.IntervalBurst, o.IntervalUsecs = uint32(c.RemoteBurst), uint32(c.RemoteInterval.Microseconds())
	}
	o.SocketPrio = int32(c.RemotePrio)
	o.FillFile = c.RemoteFill
	o.SendAlignment, o.SendOffset = uint32(c.RemoteSendAlign), uint32(c.RemoteSendOffset)
	o.RecvAlignment, o.RecvOffset = uint32(c.RemoteRecvAlign), uint32(c.RemoteRecvOffset)
	switch c.Test {
	case TCPRR, TCPCRR, UDPRR:
		o.RequestSize, o.ResponseSize = int32(c.ReqSize), int32(c.RespSize)
	case TCPStream, UDPStream:
		o.RecvSize = orDefault(c.RemoteRecvSize)
	case TCPMaerts, UDPMaerts:
		o.SendSize = orDefault(c.RemoteSendSize)
	}
	if d := c.Duration(); d > 0 {
		o.TestLength = int32(math.Ceil(d.Seconds()))
	} else {
		o.TestLength = -int32(min(c.Count(), math.MaxInt32))
	}
	affinity := int32(wire.NoAffinity)
	if c.RemoteBind != nil {
		affinity = int32(*c.RemoteBind)
	}
	m := o.Encode(affinity)
	wire.PutExt(m, wire.Ext{Flags: wire.ExtResults | wire.ExtDone | wire.ExtErrors, Duration: c.Duration()})
	return m
}

// omniResults is what the netserver measured, in netperf's structure.
func omniResults(req *Request, res *SideResults, t tally, retrans int32, cong string) *wire.OmniResults {
	r := &wire.OmniResults{RecvCalls: uint32(t.Messages), SendCalls: uint32(t.Messages), RecvBufSize: int32(res.RcvBuf), SendBufSize: int32(res.SndBuf),
		FailedSends: uint32(t.Lost), TransReceived: uint32(t.Transactions), Elapsed: float32(res.Elapsed), CPUUtil: -1, ServiceDemand: -1,
		CPUMethod: wire.CPUMethodProcStat, NumCPUs: uint32(hostInfo().CPUs), PeakCPUID: -1, TransportRetrans: retrans, CongControl: cong}
	switch req.Test {
	case TCPStream, UDPStream:
		r.BytesReceived, r.SendCalls = uint64(t.Bytes), 0
	case TCPMaerts, UDPMaerts:
		r.BytesSent, r.RecvCalls = uint64(t.Bytes), 0
	default:
		r.BytesReceived = uint64(t.Transactions) * uint64(req.ReqSize)
		r.BytesSent = uint64(t.Transactions) * uint64(req.RespSize)
		r.RecvCalls, r.SendCalls = uint32(t.Transactions), uint32(t.Transactions)
	}
	if u := res.CPU; u != nil {
		r.CPUUtil, r.NumCPUs = float32(u.Util), uint32(u.NumCPU)
		r.CPUUser, r.CPUSystem, r.CPUIOWait, r.CPUIRQ, r.CPUSoftIRQ = float32(u.User), float32(u.System), float32(u.IOWait), float32(u.IRQ), float32(u.SoftIRQ)
		for i, p := range u.PerCPU {
			if float32(p) > r.PeakCPUUtil || r.PeakCPUID < 0 {
				r.PeakCPUUtil, r.PeakCPUID = float32(p), int32(i)
			}
		}
	}
	return r
}

// sideFromOmni is what a netserver that speaks only netperf's protocol
// told of its side.
func sideFromOmni(test string, o *wire.OmniResults, measured bool) SideResults {
	s := SideResults{Messages: int64(o.RecvCalls), Transactions: int64(o.TransReceived), Elapsed: float64(o.Elapsed),
		SndBuf: int(o.SendBufSize), RcvBuf: int(o.RecvBufSize), Bytes: int64(o.BytesReceived)}
	switch test {
	case TCPMaerts, UDPMaerts:
		s.Bytes, s.Messages = int64(o.BytesSent), int64(o.SendCalls)
	case TCPRR, TCPCRR, UDPRR:
		s.Bytes = int64(o.BytesReceived + o.BytesSent)
	}
	if measured && o.CPUUtil >= 0 && o.NumCPUs > 0 && o.NumCPUs < 1<<16 {
		u := float64(o.CPUUtil)
		s.CPU = &cpustat.Usage{NumCPU: int(o.NumCPUs), Util: u, Cores: u / 100 * float64(o.NumCPUs), Elapsed: float64(o.Elapsed),
			User: float64(o.CPUUser), System: float64(o.CPUSystem), IOWait: float64(o.CPUIOWait), IRQ: float64(o.CPUIRQ), SoftIRQ: float64(o.CPUSoftIRQ)}
	}
	s.Retrans = int64(o.TransportRetrans)
	s.CongControl = o.CongControl
	return s
}
