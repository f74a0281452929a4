package netperf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/vnet-project/vnet/internal/cpustat"
)

// The extension's messages. Once both ends have marked their OMNI
// messages (wire.Ext), the client says "done" when its data loop ends and
// the netserver follows its OMNI results with its side's measurements in
// full, or a refusal with its reason: each a 4-byte big-endian length and
// a JSON object of at most MaxControlMessage bytes, so that a peer can
// refuse an oversized message before reading it.

// MaxControlMessage bounds an extension message.
const MaxControlMessage = 64 << 10

// Message types.
const (
	MsgDone    = "done"    // client -> server: the data phase is over
	MsgResults = "results" // server -> client: the server's measurements
	MsgError   = "error"   // server -> client: why the test cannot go on
)

// ErrTooLarge is returned for an extension message over the size limit.
var ErrTooLarge = errors.New("control message too large")

// ErrMalformed is wrapped by every error about a message's content.
var ErrMalformed = errors.New("malformed control message")

// Message is one extension message; which field is set depends on Type.
type Message struct {
	Type    string       `json:"type"`
	Results *SideResults `json:"results,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// Request is what the netserver is asked to do, from a DO_OMNI request.
type Request struct {
	Test      string
	Duration  time.Duration // or:
	Count     int64         // bytes (streams) or transactions (RR)
	SendSize  int           // the server's send size (MAERTS)
	RecvSize  int           // the server's receive size
	ReqSize   int
	RespSize  int
	SndBuf    int // the server's socket buffers (-S), 0 = system default
	RcvBuf    int
	DataPort  int // 0 = any
	Family    string
	RecordCPU bool
	BindCPU   *int // -T's rcpu: the CPU of the server's data loop

	NoDelay     bool   // TCP_NODELAY on the data socket
	TOS         int    // IP_TOS / IPV6_TCLASS, -1 to leave it
	CongControl string // TCP_CONGESTION, "" to leave it
	BindIP      netip.Addr
	// The client's data address, where a UDP test's datagrams go before
	// any came from it.
	PeerIP   netip.Addr
	PeerPort int

	Prio      int  // SO_PRIORITY, -1 to leave it
	KeepAlive bool // SO_KEEPALIVE
	Connected bool // UDP: connect the socket to the client once it has heard from it
	FastOpen  bool // the listener takes data in the SYN
	// The buffer rings' widths (0: netperf's default) and the pacing:
	// Burst operations every Interval.
	SendWidth, RecvWidth int
	Interval             time.Duration
	Burst                int
	bufs                 bufLayout
}

// SideResults is what one end measured.
type SideResults struct {
	Bytes        int64          `json:"bytes"`
	Messages     int64          `json:"messages"`
	Transactions int64          `json:"transactions,omitempty"`
	Elapsed      float64        `json:"elapsed_s"`
	CPU          *cpustat.Usage `json:"cpu,omitempty"`
	Iface        *IfaceDelta    `json:"interface,omitempty"`
	SndBuf       int            `json:"sndbuf"`
	RcvBuf       int            `json:"rcvbuf"`
	Host         HostInfo       `json:"host"`
	// TCP's retransmissions on the data connection (-1: not known) and
	// its congestion control.
	Retrans     int64  `json:"transport_retrans"`
	CongControl string `json:"cong_control,omitempty"`
}

// WriteMsg sends one message.
func WriteMsg(w io.Writer, m *Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(body) > MaxControlMessage {
		return ErrTooLarge
	}
	buf := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	_, err = w.Write(buf)
	return err
}

// ReadMsg reads one message and checks its shape. It never reads more than
// MaxControlMessage bytes of body, whatever the peer claims.
func ReadMsg(r io.Reader) (*Message, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxControlMessage {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, n, MaxControlMessage)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("%w: truncated: %v", ErrMalformed, err)
	}
	return DecodeMsg(body)
}

// DecodeMsg parses a message body strictly: unknown fields, a missing
// payload or an unknown type are errors.
func DecodeMsg(body []byte) (*Message, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var m Message
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	switch m.Type {
	case MsgResults:
		if m.Results == nil {
			return nil, fmt.Errorf("%w: %s without its payload", ErrMalformed, m.Type)
		}
	case MsgDone, MsgError:
	default:
		return nil, fmt.Errorf("%w: unknown type %q", ErrMalformed, m.Type)
	}
	return &m, nil
}

// Validate checks a request from an untrusted client.
func (r *Request) Validate() error {
	switch {
	case !contains(Tests, r.Test) && r.Test != UDPMaerts:
		return fmt.Errorf("unknown test %q", r.Test)
	case r.Duration < 0 || r.Duration > 24*time.Hour:
		return fmt.Errorf("duration %v out of range", r.Duration)
	case r.Count < 0:
		return fmt.Errorf("negative count")
	case r.Duration == 0 && r.Count == 0:
		return fmt.Errorf("neither a duration nor a count")
	case r.DataPort < 0 || r.DataPort > 65535:
		return fmt.Errorf("data port %d out of range", r.DataPort)
	case r.Family != "" && r.Family != "4" && r.Family != "6":
		return fmt.Errorf("family %q", r.Family)
	case r.BindCPU != nil && (*r.BindCPU < 0 || *r.BindCPU > MaxCPU):
		return fmt.Errorf("CPU %d out of range 0..%d", *r.BindCPU, MaxCPU)
	case r.Prio < -1 || r.Prio > 255:
		return fmt.Errorf("socket priority %d out of range 0..255", r.Prio)
	case r.TOS < -1 || r.TOS > 255:
		return fmt.Errorf("TOS %d out of range 0..255", r.TOS)
	case r.PeerPort < 0 || r.PeerPort > 65535:
		return fmt.Errorf("port %d out of range", r.PeerPort)
	case r.SendWidth < 0 || r.SendWidth > maxWidth || r.RecvWidth < 0 || r.RecvWidth > maxWidth:
		return fmt.Errorf("buffer ring widths %d,%d out of range 0..%d", r.SendWidth, r.RecvWidth, maxWidth)
	case r.Burst < 0 || r.Burst > maxBurst || r.Interval < 0 || r.Interval > time.Hour:
		return fmt.Errorf("pacing of %d every %v out of range", r.Burst, r.Interval)
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"send size", r.SendSize}, {"receive size", r.RecvSize}, {"request size", r.ReqSize}, {"response size", r.RespSize}} {
		if v.n < 0 || v.n > MaxMessage {
			return fmt.Errorf("%s %d out of range 0..%d", v.name, v.n, MaxMessage)
		}
	}
	for _, v := range []int{r.SndBuf, r.RcvBuf} {
		if v < 0 || v > 1<<30 {
			return fmt.Errorf("socket buffer %d out of range", v)
		}
	}
	if (r.Test == TCPRR || r.Test == TCPCRR || r.Test == UDPRR) && (r.ReqSize < 1 || r.RespSize < 1) {
		return fmt.Errorf("RR sizes must be at least 1")
	}
	if b := bufferBytes(r); b > 4*maxRingBytes {
		return fmt.Errorf("buffer rings of %s (over %s)", mib(b), mib(4*maxRingBytes))
	}
	if isUDP(r.Test) && (r.ReqSize > maxUDP || r.RespSize > maxUDP || r.RecvSize > maxUDP || r.SendSize > maxUDP) {
		return fmt.Errorf("UDP messages carry at most 65507 bytes")
	}
	return nil
}
