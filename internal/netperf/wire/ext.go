package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
)

// The extension: vnet netperf marks its DO_OMNI request, and vnet's
// netserver its response, with a magic, a version and what each end
// offers, in bytes of the test data that netperf's structures leave
// unused (a real netserver never reads them, and a real netperf client
// never gets a marked response, since it never marks its request). Once
// both ends have marked, the test carries more than netperf's protocol
// (see the Ext flags), in length-prefixed JSON messages on the control
// connection.

// extOffset is where the extension sits in the test data: past the end
// of the largest OMNI structure (the results, 284 bytes) and of anything
// else netperf writes there.
const extOffset = 600

var extMagic = [8]byte{'v', 'n', 'e', 't', 'p', 'e', 'r', 'f'}

// ExtVersion is the extension's version; an end ignores a mark of another.
const ExtVersion = 1

// Ext flags: what an end offers. The netserver answers with those of the
// client's it takes up.
const (
	// ExtResults: after OMNI_RESULTS the netserver sends its side's
	// measurements in full (per-CPU use, the receiving interface's
	// counters, its host).
	ExtResults = 1 << iota
	// ExtDone: the client says "done" on the control connection when its
	// data loop ends, so the netserver's passive loops (UDP, TCP_CRR)
	// need not wait for their timers.
	ExtDone
	// ExtErrors: a refused request's response is followed by the reason,
	// in words.
	ExtErrors
)

// Ext is one end's mark.
type Ext struct {
	Flags uint32
	// Duration is the test's length to the nanosecond where netperf's
	// request carries whole seconds.
	Duration time.Duration
}

// PutExt marks a message.
func PutExt(m *Message, e Ext) {
	b := m.Data[extOffset:]
	copy(b, extMagic[:])
	binary.BigEndian.PutUint32(b[8:], ExtVersion)
	binary.BigEndian.PutUint32(b[12:], e.Flags)
	binary.BigEndian.PutUint64(b[16:], uint64(e.Duration))
}

// GetExt reads a message's mark, if it has one of this version.
func GetExt(m *Message) (Ext, bool, error) {
	b := m.Data[extOffset:]
	if !bytes.Equal(b[:8], extMagic[:]) || binary.BigEndian.Uint32(b[8:]) != ExtVersion {
		return Ext{}, false, nil
	}
	e := Ext{Flags: binary.BigEndian.Uint32(b[12:]), Duration: time.Duration(binary.BigEndian.Uint64(b[16:]))}
	if e.Duration < 0 || e.Duration > 24*time.Hour {
		return Ext{}, false, fmt.Errorf("%w: extension: duration %v out of range", ErrMalformed, e.Duration)
	}
	return e, true, nil
}
