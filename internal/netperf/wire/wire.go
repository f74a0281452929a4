// Package wire is netperf's control protocol as netperf 2.7 and its
// netserver speak it: fixed-size binary messages, the OMNI test's request,
// response and results, and the extension vnet's two ends negotiate on top.
//
// Every control message is 656 bytes: a request type (or response type),
// a second word (the request's CPU affinity, the response's errno), and
// 162 words of test-specific data. The first words of the test data are
// 32-bit big-endian integers or IEEE-754 floats; netperf converts only up
// to a cutoff that each structure defines, and the character arrays that
// follow travel as they are. The package knows nothing of sockets: it
// encodes and decodes, and refuses what is out of range.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Sizes of a control message.
const (
	DataWords   = 162
	DataSize    = DataWords * 4
	MessageSize = 8 + DataSize
)

// Message types (netlib.h). netperf 2.7 runs its classic tests as OMNI
// tests on the wire, so DoOmni is the one test request a netserver serves.
const (
	DebugOn           = 1
	DebugOff          = 2
	DebugOK           = 3
	CPUCalibrate      = 5
	Passphrase        = 6
	DoOmni            = 97
	OmniResponseType  = 98
	OmniResultsType   = 99
	DoSysinfo         = 600
	SysinfoResponse   = 601
	UnknownTestErrno  = 998 // the netserver's errno for a request type it does not serve
	NoAffinity        = -1  // the request's affinity word when netperf binds nothing (-T)
	CPUMethodProcStat = 8   // how the CPU utilization was measured: /proc/stat
)

// Directions, from the point of view of the end that receives the request.
const (
	Xmit = 0x2
	Recv = 0x4
)

// Address families and socket types as netperf numbers them on the wire.
const (
	FamilyUnspec = 0
	FamilyInet   = 4
	FamilyInet6  = 6

	SockStream = 1
	SockDgram  = 2

	ProtoTCP = 6
	ProtoUDP = 17
)

// OMNI request flags.
const (
	FlagNoDelay      = 0x00000001
	FlagConnectTest  = 0x00000004
	FlagMeasureCPU   = 0x00000008
	FlagWantCong     = 0x00000020 // also netperf's "routing allowed", which it sets by default
	FlagFastOpen     = 0x00000800 // the data listener takes data in the SYN (TCP fast open)
	FlagUseConnected = 0x00004000
	FlagKeepAlive    = 0x80000000
)

// ErrMalformed is wrapped by every error about a message's content.
var ErrMalformed = errors.New("malformed control message")

// Message is one control message.
type Message struct {
	Type int32
	// Aux is the request's CPU for the netserver's test (NoAffinity for
	// none) or the response's errno (0 for success).
	Aux  int32
	Data [DataSize]byte
}

// Read reads one message. Messages have a fixed size, so a peer cannot
// make this read more than MessageSize bytes.
func Read(r io.Reader) (*Message, error) {
	var b [MessageSize]byte
	n, err := io.ReadFull(r, b[:])
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case err != nil:
		return nil, fmt.Errorf("%w: %d of %d bytes: %v", ErrMalformed, n, MessageSize, err)
	}
	return Decode(b[:])
}

// Decode reads a message from exactly MessageSize bytes.
func Decode(b []byte) (*Message, error) {
	if len(b) != MessageSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrMalformed, len(b), MessageSize)
	}
	m := &Message{Type: int32(binary.BigEndian.Uint32(b)), Aux: int32(binary.BigEndian.Uint32(b[4:]))}
	copy(m.Data[:], b[8:])
	return m, nil
}

// Encode is the message as it goes on the wire.
func (m *Message) Encode() []byte {
	b := make([]byte, MessageSize)
	binary.BigEndian.PutUint32(b, uint32(m.Type))
	binary.BigEndian.PutUint32(b[4:], uint32(m.Aux))
	copy(b[8:], m.Data[:])
	return b
}

// Write sends one message in one write.
func Write(w io.Writer, m *Message) error {
	_, err := w.Write(m.Encode())
	return err
}

// words reads and writes the converted words of the test data.
type words struct{ d *[DataSize]byte }

func (w words) u32(i int) uint32        { return binary.BigEndian.Uint32(w.d[4*i:]) }
func (w words) i32(i int) int32         { return int32(w.u32(i)) }
func (w words) f32(i int) float32       { return math.Float32frombits(w.u32(i)) }
func (w words) putU32(i int, v uint32)  { binary.BigEndian.PutUint32(w.d[4*i:], v) }
func (w words) putI32(i int, v int32)   { w.putU32(i, uint32(v)) }
func (w words) putF32(i int, v float32) { w.putU32(i, math.Float32bits(v)) }

// cString reads a NUL-terminated string from a fixed array; a string that
// fills its array without a NUL, or holds bytes that are not printable
// ASCII, is malformed.
func cString(b []byte, field string) (string, error) {
	for i, c := range b {
		if c == 0 {
			return string(b[:i]), nil
		}
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("%w: %s: byte %#x", ErrMalformed, field, c)
		}
	}
	return "", fmt.Errorf("%w: %s: no terminating NUL in %d bytes", ErrMalformed, field, len(b))
}

// putCString writes s into a fixed array, cut to leave room for the NUL.
func putCString(b []byte, s string) {
	n := copy(b[:len(b)-1], s)
	for i := n; i < len(b); i++ {
		b[i] = 0
	}
}

// lossyString reads a fixed array up to its NUL, keeping printable ASCII
// only: for what a peer reports (names of interfaces, models), where a bad
// byte is not worth failing a test over.
func lossyString(b []byte) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		if c >= 0x20 && c <= 0x7e {
			out = append(out, c)
		}
	}
	return string(out)
}
