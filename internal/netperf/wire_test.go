package netperf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

func TestWireRoundTrip(t *testing.T) {
	in := &Message{Type: MsgResults, Results: &SideResults{Bytes: 10, Messages: 1, Elapsed: 1.5, Retrans: -1, CongControl: "cubic"}}
	var b bytes.Buffer
	if err := WriteMsg(&b, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadMsg(&b)
	if err != nil {
		t.Fatal(err)
	}
	if *out.Results != *in.Results {
		t.Errorf("got %+v", out.Results)
	}
}

func TestReadMsgRejects(t *testing.T) {
	frame := func(body string) []byte {
		b := make([]byte, 4+len(body))
		binary.BigEndian.PutUint32(b, uint32(len(body)))
		copy(b[4:], body)
		return b
	}
	huge := make([]byte, 4)
	binary.BigEndian.PutUint32(huge, 1<<31)
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"oversized", huge, ErrTooLarge},
		{"not json", frame("hello"), ErrMalformed},
		{"unknown type", frame(`{"type":"launch"}`), ErrMalformed},
		{"missing payload", frame(`{"type":"results"}`), ErrMalformed},
		{"request is not an extension message", frame(`{"type":"request"}`), ErrMalformed},
		{"unknown field", frame(`{"type":"done","x":1}`), ErrMalformed},
		{"trailing", frame(`{"type":"done"}{}`), ErrMalformed},
		{"truncated", frame(`{"type":"done"}`)[:8], ErrMalformed},
	}
	for _, tt := range tests {
		if _, err := ReadMsg(bytes.NewReader(tt.in)); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

func ptr(n int) *int { return &n }

func TestRequestValidate(t *testing.T) {
	ok := Request{Test: TCPStream, Duration: time.Second, TOS: -1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Request{
		{Test: "X", Duration: time.Second},
		{Test: TCPStream},
		{Test: TCPStream, Duration: 48 * time.Hour},
		{Test: TCPStream, Duration: time.Second, SendSize: MaxMessage + 1},
		{Test: TCPRR, Duration: time.Second},
		{Test: UDPRR, Duration: time.Second, ReqSize: 70000, RespSize: 1},
		{Test: TCPStream, Duration: time.Second, DataPort: 70000},
		{Test: TCPStream, Count: -1},
		{Test: TCPStream, Duration: time.Second, RcvBuf: -5},
		{Test: TCPStream, Duration: time.Second, BindCPU: ptr(-1)},
		{Test: TCPStream, Duration: time.Second, BindCPU: ptr(MaxCPU + 1)},
		{Test: TCPStream, Duration: time.Second, TOS: 256},
		{Test: UDPRR, Duration: time.Second, ReqSize: 1, RespSize: 1, PeerPort: 70000},
	}
	for _, r := range bad {
		if err := r.Validate(); err == nil {
			t.Errorf("accepted %+v", r)
		}
	}
}

// FuzzReadMsg: no input may crash the decoder or make it allocate beyond
// the limit; whatever it accepts must survive a round trip.
func FuzzReadMsg(f *testing.F) {
	for _, s := range []string{`{"type":"done"}`, `{"type":"results","results":{"bytes":1,"transport_retrans":-1}}`, `{"type":"error","error":"x"}`} {
		b := make([]byte, 4+len(s))
		binary.BigEndian.PutUint32(b, uint32(len(s)))
		copy(b[4:], s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadMsg(bytes.NewReader(data))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := WriteMsg(&b, m); err != nil {
			t.Fatalf("accepted message does not re-encode: %v", err)
		}
		if _, err := ReadMsg(&b); err != nil {
			t.Fatalf("re-encoded message rejected: %v", err)
		}
	})
}
