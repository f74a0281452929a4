package wire

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// OmniRequest asks a netserver to take part in one OMNI test
// (nettest_bsd.h's omni_request_struct). Sizes of -1 or 0 ask for the
// netserver's defaults. Direction is the netserver's: Recv for a test
// where netperf sends.
type OmniRequest struct {
	SendBufSize   int32 // -S: the netserver's SO_SNDBUF
	SendSize      int32 // -m (what the netserver sends in TCP_MAERTS)
	SendAlignment uint32
	SendOffset    uint32
	SendWidth     uint32
	RequestSize   int32 // -r
	RecvBufSize   int32 // -S: its SO_RCVBUF
	RecvSize      int32 // -M
	RecvAlignment uint32
	RecvOffset    uint32
	RecvWidth     uint32
	ResponseSize  int32
	Flags         uint32
	CPURate       float32
	TestLength    int32 // > 0 seconds; < 0 bytes or transactions; 0 until stopped
	// Copy avoidance and buffer dirtying, which netperf passes on and a
	// netserver may ignore.
	SoRcvAvoid, SoSndAvoid          uint32
	SendDirty, RecvDirty, RecvClean int32
	DataPort                        uint32
	Family                          uint32 // FamilyInet, FamilyInet6 or FamilyUnspec
	SocketType                      uint32
	Protocol                        uint32
	Direction                       uint32
	NetperfPort                     uint32
	IntervalBurst                   uint32
	IntervalUsecs                   uint32
	NetperfIP                       netip.Addr // netperf's data address, for a netserver that sends datagrams first
	NetserverIP                     netip.Addr // the data address the netserver should bind, when netperf names one
	SocketPrio                      int32
	SocketTOS                       int32 // -1: leave it
	CongControl                     string
	FillFile                        string
}

// Word indexes and byte offsets of omni_request_struct.
const (
	omniRequestCutoff = 38
	reqCongOffset     = omniRequestCutoff * 4
	reqFillOffset     = reqCongOffset + 16
	congLen           = 16
	fillLen           = 32
)

// Encode makes the DO_OMNI message; affinity is the CPU netperf asks the
// netserver to run on, or NoAffinity.
func (r *OmniRequest) Encode(affinity int32) *Message {
	m := &Message{Type: DoOmni, Aux: affinity}
	w := words{&m.Data}
	for i, v := range []uint32{uint32(r.SendBufSize), uint32(r.SendSize), r.SendAlignment, r.SendOffset, r.SendWidth, uint32(r.RequestSize),
		uint32(r.RecvBufSize), uint32(r.RecvSize), r.RecvAlignment, r.RecvOffset, r.RecvWidth, uint32(r.ResponseSize), r.Flags} {
		w.putU32(i, v)
	}
	w.putF32(13, r.CPURate)
	w.putI32(14, r.TestLength)
	w.putU32(15, r.SoRcvAvoid)
	w.putU32(16, r.SoSndAvoid)
	w.putI32(17, r.SendDirty)
	w.putI32(18, r.RecvDirty)
	w.putI32(19, r.RecvClean)
	w.putU32(20, r.DataPort)
	w.putU32(21, r.Family)
	w.putU32(22, r.SocketType)
	w.putU32(23, r.Protocol)
	w.putU32(24, r.Direction)
	w.putU32(25, r.NetperfPort)
	w.putU32(26, r.IntervalBurst)
	w.putU32(27, r.IntervalUsecs)
	putAddr(w, 28, r.NetperfIP)
	putAddr(w, 32, r.NetserverIP)
	w.putI32(36, r.SocketPrio)
	w.putI32(37, r.SocketTOS)
	putCString(m.Data[reqCongOffset:reqCongOffset+congLen], r.CongControl)
	putCString(m.Data[reqFillOffset:reqFillOffset+fillLen], r.FillFile)
	return m
}

// DecodeOmniRequest reads a DO_OMNI message and checks what a netserver
// could not act on: the protocol, socket type, family and direction, and
// the strings. Sizes are the engine's to bound.
func DecodeOmniRequest(m *Message) (*OmniRequest, error) {
	if m.Type != DoOmni {
		return nil, fmt.Errorf("%w: type %d is not an OMNI request", ErrMalformed, m.Type)
	}
	w := words{&m.Data}
	r := &OmniRequest{
		SendBufSize: w.i32(0), SendSize: w.i32(1), SendAlignment: w.u32(2), SendOffset: w.u32(3), SendWidth: w.u32(4), RequestSize: w.i32(5),
		RecvBufSize: w.i32(6), RecvSize: w.i32(7), RecvAlignment: w.u32(8), RecvOffset: w.u32(9), RecvWidth: w.u32(10), ResponseSize: w.i32(11),
		Flags: w.u32(12), CPURate: w.f32(13), TestLength: w.i32(14), SoRcvAvoid: w.u32(15), SoSndAvoid: w.u32(16),
		SendDirty: w.i32(17), RecvDirty: w.i32(18), RecvClean: w.i32(19), DataPort: w.u32(20), Family: w.u32(21), SocketType: w.u32(22),
		Protocol: w.u32(23), Direction: w.u32(24), NetperfPort: w.u32(25), IntervalBurst: w.u32(26), IntervalUsecs: w.u32(27),
		SocketPrio: w.i32(36), SocketTOS: w.i32(37),
	}
	var err error
	switch r.Family {
	case FamilyUnspec, FamilyInet, FamilyInet6:
	default:
		return nil, fmt.Errorf("%w: address family %d", ErrMalformed, r.Family)
	}
	if r.NetperfIP, err = addr(w, 28, r.Family); err != nil {
		return nil, err
	}
	if r.NetserverIP, err = addr(w, 32, r.Family); err != nil {
		return nil, err
	}
	switch {
	case r.Protocol != ProtoTCP && r.Protocol != ProtoUDP:
		return nil, fmt.Errorf("%w: protocol %d (netserver serves TCP and UDP)", ErrMalformed, r.Protocol)
	case r.Protocol == ProtoTCP && r.SocketType != SockStream, r.Protocol == ProtoUDP && r.SocketType != SockDgram:
		return nil, fmt.Errorf("%w: socket type %d for protocol %d", ErrMalformed, r.SocketType, r.Protocol)
	case r.Direction&^(Xmit|Recv) != 0 || r.Direction == 0:
		return nil, fmt.Errorf("%w: direction %#x", ErrMalformed, r.Direction)
	case r.DataPort > 65535 || r.NetperfPort > 65535:
		return nil, fmt.Errorf("%w: port out of range", ErrMalformed)
	}
	if r.CongControl, err = cString(m.Data[reqCongOffset:reqCongOffset+congLen], "congestion control"); err != nil {
		return nil, err
	}
	if r.FillFile, err = cString(m.Data[reqFillOffset:reqFillOffset+fillLen], "fill file"); err != nil {
		return nil, err
	}
	return r, nil
}

// putAddr writes an address into four words as netperf does: an IPv4
// address as one big-endian word, an IPv6 address as the four words a
// little-endian host reads from its bytes (netperf converts them as if
// they were integers, so on the wire each group of four bytes is
// reversed).
func putAddr(w words, at int, a netip.Addr) {
	for i := 0; i < 4; i++ {
		w.putU32(at+i, 0)
	}
	switch {
	case !a.IsValid():
	case a.Is4() || a.Is4In6():
		b := a.Unmap().As4()
		w.putU32(at, binary.BigEndian.Uint32(b[:]))
	default:
		b := a.As16()
		for i := 0; i < 4; i++ {
			w.putU32(at+i, binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
}

// addr reads an address written by putAddr; zeros are no address (an
// IPv4 address is the first word; the others are not looked at).
func addr(w words, at int, family uint32) (netip.Addr, error) {
	zero := true
	for i := 0; i < 4; i++ {
		zero = zero && w.u32(at+i) == 0
	}
	switch {
	case zero, family == FamilyInet && w.u32(at) == 0:
		return netip.Addr{}, nil
	case family == FamilyInet:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], w.u32(at))
		return netip.AddrFrom4(b), nil
	case family == FamilyInet6:
		var b [16]byte
		for i := 0; i < 4; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], w.u32(at+i))
		}
		return netip.AddrFrom16(b), nil
	}
	return netip.Addr{}, fmt.Errorf("%w: an address without its family", ErrMalformed)
}

// OmniResponse is the netserver's answer to DO_OMNI: where its data
// socket is and what it granted (omni_response_struct).
type OmniResponse struct {
	RecvBufSize   int32
	RecvSize      int32
	RecvWidth     int32
	SendBufSize   int32
	SendSize      int32
	SendWidth     int32
	Flags         uint32
	CPURate       float32
	TestLength    uint32
	DataPort      uint32
	IntervalBurst uint32
	IntervalUsecs uint32
	CPUFrequency  uint32 // MHz
	SecurityInfo  uint32
	SocketPrio    int32
	SocketTOS     int32
	SystemModel   string
	CPUModel      string
	Security      string
}

const (
	omniResponseCutoff = 18
	respModelOffset    = omniResponseCutoff * 4
	respCPUOffset      = respModelOffset + 33
	respSecOffset      = respCPUOffset + 80
)

// Encode makes the OMNI_RESPONSE message; errno 0 is success.
func (r *OmniResponse) Encode(errno int32) *Message {
	m := &Message{Type: OmniResponseType, Aux: errno}
	w := words{&m.Data}
	for i, v := range []uint32{uint32(r.RecvBufSize), uint32(r.RecvSize), uint32(r.RecvWidth), uint32(r.SendBufSize), uint32(r.SendSize),
		uint32(r.SendWidth), r.Flags} {
		w.putU32(i, v)
	}
	w.putF32(7, r.CPURate)
	for i, v := range []uint32{r.TestLength, 0, 0, r.DataPort, r.IntervalBurst, r.IntervalUsecs, r.CPUFrequency, r.SecurityInfo,
		uint32(r.SocketPrio), uint32(r.SocketTOS)} {
		w.putU32(8+i, v)
	}
	putCString(m.Data[respModelOffset:respCPUOffset], r.SystemModel)
	putCString(m.Data[respCPUOffset:respSecOffset], r.CPUModel)
	putCString(m.Data[respSecOffset:respSecOffset+16], r.Security)
	return m
}

// DecodeOmniResponse reads an OMNI_RESPONSE. A response with an errno
// has no content worth reading; the caller checks Aux first.
func DecodeOmniResponse(m *Message) (*OmniResponse, error) {
	if m.Type != OmniResponseType {
		return nil, fmt.Errorf("%w: type %d where an OMNI response was due", ErrMalformed, m.Type)
	}
	w := words{&m.Data}
	r := &OmniResponse{RecvBufSize: w.i32(0), RecvSize: w.i32(1), RecvWidth: w.i32(2), SendBufSize: w.i32(3), SendSize: w.i32(4),
		SendWidth: w.i32(5), Flags: w.u32(6), CPURate: w.f32(7), TestLength: w.u32(8), DataPort: w.u32(11), IntervalBurst: w.u32(12),
		IntervalUsecs: w.u32(13), CPUFrequency: w.u32(14), SecurityInfo: w.u32(15), SocketPrio: w.i32(16), SocketTOS: w.i32(17),
		SystemModel: lossyString(m.Data[respModelOffset:respCPUOffset]), CPUModel: lossyString(m.Data[respCPUOffset:respSecOffset]),
		Security: lossyString(m.Data[respSecOffset : respSecOffset+16])}
	if r.DataPort == 0 || r.DataPort > 65535 {
		return nil, fmt.Errorf("%w: data port %d", ErrMalformed, r.DataPort)
	}
	return r, nil
}

// OmniResults is what the netserver measured (omni_results_struct).
type OmniResults struct {
	BytesReceived    uint64
	RecvCalls        uint32
	RecvBufSize      int32 // at the end of the test
	BytesSent        uint64
	SendCalls        uint32
	SendBufSize      int32
	FailedSends      uint32
	TransReceived    uint32
	Elapsed          float32 // seconds
	CPUUtil          float32 // % of all CPUs; -1 when not measured
	CPUUser          float32
	CPUSystem        float32
	CPUIOWait        float32
	CPUIRQ           float32
	CPUSoftIRQ       float32
	ServiceDemand    float32
	CPUMethod        uint32
	NumCPUs          uint32
	PeakCPUID        int32
	PeakCPUUtil      float32
	TransportRetrans int32
	IfName           string
	Driver           string
	CongControl      string
}

const (
	omniResultsCutoff = 27
	resIfnameOffset   = omniResultsCutoff * 4
	resDriverOffset   = resIfnameOffset + 16
	resCongOffset     = resDriverOffset + 32*4 + 16
	omniResultsEnd    = resCongOffset + congLen
)

// Encode makes the OMNI_RESULTS message.
func (r *OmniResults) Encode() *Message {
	m := &Message{Type: OmniResultsType}
	w := words{&m.Data}
	w.putU32(0, uint32(r.BytesReceived>>32))
	w.putU32(1, uint32(r.BytesReceived))
	w.putU32(2, r.RecvCalls)
	w.putI32(3, r.RecvBufSize)
	w.putU32(4, uint32(r.BytesSent>>32))
	w.putU32(5, uint32(r.BytesSent))
	w.putU32(6, r.SendCalls)
	w.putI32(7, r.SendBufSize)
	w.putU32(8, r.FailedSends)
	w.putU32(9, r.TransReceived)
	for i, v := range []float32{r.Elapsed, r.CPUUtil, r.CPUUser, r.CPUSystem, r.CPUIOWait, r.CPUIRQ, r.CPUSoftIRQ, r.ServiceDemand} {
		w.putF32(10+i, v)
	}
	w.putU32(18, r.CPUMethod)
	w.putU32(19, r.NumCPUs)
	w.putI32(20, r.PeakCPUID)
	w.putF32(21, r.PeakCPUUtil)
	w.putI32(26, r.TransportRetrans)
	putCString(m.Data[resIfnameOffset:resDriverOffset], r.IfName)
	putCString(m.Data[resDriverOffset:resDriverOffset+32], r.Driver)
	putCString(m.Data[resCongOffset:omniResultsEnd], r.CongControl)
	return m
}

// DecodeOmniResults reads an OMNI_RESULTS message.
func DecodeOmniResults(m *Message) (*OmniResults, error) {
	// netserver 2.7 sends its results with the type of its response, which
	// it has already converted once: 98 in the host's order. netperf does
	// not look, and neither does this.
	w := words{&m.Data}
	r := &OmniResults{
		BytesReceived: uint64(w.u32(0))<<32 | uint64(w.u32(1)), RecvCalls: w.u32(2), RecvBufSize: w.i32(3),
		BytesSent: uint64(w.u32(4))<<32 | uint64(w.u32(5)), SendCalls: w.u32(6), SendBufSize: w.i32(7),
		FailedSends: w.u32(8), TransReceived: w.u32(9), Elapsed: w.f32(10), CPUUtil: w.f32(11), CPUUser: w.f32(12),
		CPUSystem: w.f32(13), CPUIOWait: w.f32(14), CPUIRQ: w.f32(15), CPUSoftIRQ: w.f32(16), ServiceDemand: w.f32(17),
		CPUMethod: w.u32(18), NumCPUs: w.u32(19), PeakCPUID: w.i32(20), PeakCPUUtil: w.f32(21), TransportRetrans: w.i32(26),
		IfName: lossyString(m.Data[resIfnameOffset:resDriverOffset]), Driver: lossyString(m.Data[resDriverOffset : resDriverOffset+32]),
		CongControl: lossyString(m.Data[resCongOffset:omniResultsEnd]),
	}
	return r, nil
}

// CPURateResponse answers CPU_CALIBRATE: the rate (for /proc/stat, the
// clock's ticks per second) and the number of CPUs.
func CPURateResponse(rate float32, cpus int32) *Message {
	m := &Message{Type: CPUCalibrate}
	w := words{&m.Data}
	w.putF32(0, rate)
	w.putI32(1, cpus)
	return m
}

// SysinfoResponseMessage answers DO_SYSINFO as netperf 2.7's netserver does:
// the fields it once carried are deprecated.
func SysinfoResponseMessage() *Message {
	m := &Message{Type: SysinfoResponse}
	copy(m.Data[:], ",Deprecated,Deprecated,Deprecated,Deprecated")
	return m
}

// ErrorResponse is a response of the given type carrying only an errno.
func ErrorResponse(typ, errno int32) *Message { return &Message{Type: typ, Aux: errno} }
