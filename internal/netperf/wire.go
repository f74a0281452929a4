package netperf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vnet-project/vnet/internal/cpustat"
)

// The control protocol: each message is a 4-byte big-endian length and a
// JSON object of at most MaxControlMessage bytes. JSON keeps it readable in
// a capture and easy to extend; the length prefix lets a peer refuse an
// oversized message before reading it.

// ProtocolVersion changes when a message changes incompatibly.
const ProtocolVersion = 1

// MaxControlMessage bounds a control message.
const MaxControlMessage = 64 << 10

// Message types.
const (
	MsgRequest = "request" // client -> server: run this test
	MsgReady   = "ready"   // server -> client: the data socket is open
	MsgDone    = "done"    // client -> server: the data phase is over
	MsgResults = "results" // server -> client: the server's measurements
	MsgError   = "error"   // either way: the test cannot go on
)

// ErrTooLarge is returned for a control message over the size limit.
var ErrTooLarge = errors.New("control message too large")

// ErrMalformed is wrapped by every error about a message's content.
var ErrMalformed = errors.New("malformed control message")

// Message is one control message; which field is set depends on Type.
type Message struct {
	Type    string       `json:"type"`
	Version int          `json:"version,omitempty"`
	Request *Request     `json:"request,omitempty"`
	Ready   *Ready       `json:"ready,omitempty"`
	Results *SideResults `json:"results,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// Request asks the server to take part in one test.
type Request struct {
	Test      string        `json:"test"`
	Duration  time.Duration `json:"duration_ns,omitempty"` // or:
	Count     int64         `json:"count,omitempty"`       // bytes (streams) or transactions (RR)
	SendSize  int           `json:"send_size"`             // the server's send size (MAERTS)
	RecvSize  int           `json:"recv_size"`             // the server's receive size
	ReqSize   int           `json:"req_size,omitempty"`
	RespSize  int           `json:"resp_size,omitempty"`
	SndBuf    int           `json:"sndbuf,omitempty"` // the server's socket buffers (-S), 0 = system default
	RcvBuf    int           `json:"rcvbuf,omitempty"`
	DataPort  int           `json:"data_port,omitempty"` // 0 = any
	Family    string        `json:"family,omitempty"`
	Interval  time.Duration `json:"interval_ns,omitempty"`
	RecordCPU bool          `json:"cpu"`
	BindCPU   *int          `json:"bind_cpu,omitempty"` // -T's rcpu: the CPU of the server's data loop
}

// Ready tells the client where the data socket is and what buffers it got.
type Ready struct {
	DataPort int `json:"data_port"`
	SndBuf   int `json:"sndbuf"` // as the kernel reports them (it doubles what is asked)
	RcvBuf   int `json:"rcvbuf"`
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
	var missing bool
	switch m.Type {
	case MsgRequest:
		missing = m.Request == nil
	case MsgReady:
		missing = m.Ready == nil
	case MsgResults:
		missing = m.Results == nil
	case MsgDone, MsgError:
	default:
		return nil, fmt.Errorf("%w: unknown type %q", ErrMalformed, m.Type)
	}
	if missing {
		return nil, fmt.Errorf("%w: %s without its payload", ErrMalformed, m.Type)
	}
	return &m, nil
}

// Validate checks a request from an untrusted client.
func (r *Request) Validate() error {
	switch {
	case !contains(Tests, r.Test):
		return fmt.Errorf("unknown test %q", r.Test)
	case r.Duration < 0 || r.Duration > 24*time.Hour:
		return fmt.Errorf("duration %v out of range", r.Duration)
	case r.Count < 0:
		return fmt.Errorf("negative count")
	case r.Duration == 0 && r.Count == 0:
		return fmt.Errorf("neither a duration nor a count")
	case r.Interval < 0:
		return fmt.Errorf("negative interval")
	case r.DataPort < 0 || r.DataPort > 65535:
		return fmt.Errorf("data port %d out of range", r.DataPort)
	case r.Family != "" && r.Family != "4" && r.Family != "6":
		return fmt.Errorf("family %q", r.Family)
	case r.BindCPU != nil && (*r.BindCPU < 0 || *r.BindCPU > MaxCPU):
		return fmt.Errorf("CPU %d out of range 0..%d", *r.BindCPU, MaxCPU)
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
	if (r.Test == UDPRR || r.Test == UDPStream) && (r.ReqSize > 65507 || r.RespSize > 65507 || r.RecvSize > 65507) {
		return fmt.Errorf("UDP messages carry at most 65507 bytes")
	}
	return nil
}
