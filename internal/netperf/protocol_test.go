package netperf

import (
	"fmt"
	"net"
	"time"

	"github.com/vnet-project/vnet/internal/netperf/wire"
)

// Helpers that speak the control protocol by hand, as vnet netperf does
// (with the extension's mark) unless plain is set.

// omniMessage is the DO_OMNI request for req.
func omniMessage(req *Request, plain bool) *wire.Message {
	proto, st, dir, flags := omniShape(req.Test)
	o := &wire.OmniRequest{SendBufSize: int32(req.SndBuf), RecvBufSize: int32(req.RcvBuf), SendSize: int32(req.SendSize), RecvSize: int32(req.RecvSize),
		RequestSize: int32(req.ReqSize), ResponseSize: int32(req.RespSize), Protocol: proto, SocketType: st, Direction: dir, Flags: flags,
		DataPort: uint32(req.DataPort), Family: wire.FamilyInet, SocketTOS: -1, TestLength: int32(req.Duration.Seconds() + 0.999),
		NetperfIP: req.PeerIP, NetperfPort: uint32(req.PeerPort)}
	if req.Count > 0 {
		o.TestLength = -int32(req.Count)
	}
	m := o.Encode(wire.NoAffinity)
	if !plain {
		wire.PutExt(m, wire.Ext{Flags: wire.ExtResults | wire.ExtDone | wire.ExtErrors, Duration: req.Duration})
	}
	return m
}

// ask sends a request and returns the server's response, or its refusal
// as "error: reason".
func ask(c net.Conn, req *Request) (*wire.OmniResponse, error) {
	if err := wire.Write(c, omniMessage(req, false)); err != nil {
		return nil, err
	}
	m, err := wire.Read(c)
	if err != nil {
		return nil, err
	}
	if m.Aux != 0 {
		return nil, fmt.Errorf("error: %s", reason(c, m))
	}
	return wire.DecodeOmniResponse(m)
}

// reason is the text of a refusal m: the extension's words, or the errno.
func reason(c net.Conn, m *wire.Message) string {
	c.SetReadDeadline(time.Now().Add(time.Second))
	if em, err := ReadMsg(c); err == nil && em.Type == MsgError {
		return em.Error
	}
	return fmt.Sprintf("errno %d", m.Aux)
}

// finish says done and reads the results, both forms.
func finish(c net.Conn) (*wire.OmniResults, *SideResults, error) {
	if err := WriteMsg(c, &Message{Type: MsgDone}); err != nil {
		return nil, nil, err
	}
	m, err := wire.Read(c)
	if err != nil {
		return nil, nil, err
	}
	if m.Aux != 0 {
		return nil, nil, fmt.Errorf("error: %s", reason(c, m))
	}
	o, err := wire.DecodeOmniResults(m)
	if err != nil {
		return nil, nil, err
	}
	em, err := ReadMsg(c)
	if err != nil {
		return nil, nil, err
	}
	if em.Type != MsgResults {
		return nil, nil, fmt.Errorf("%s: %s", em.Type, em.Error)
	}
	return o, em.Results, nil
}

// cutReason reads what the server said to a connection it cut.
func cutReason(c net.Conn) string {
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	m, err := wire.Read(c)
	if err != nil {
		return "closed: " + err.Error()
	}
	return reason(c, m)
}
