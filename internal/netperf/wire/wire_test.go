package wire

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func load(t testing.TB, name string) *Message {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The requests netperf 2.7.1 sent (captured from its own binary), read as
// netserver reads them.
func TestDecodeNetperfsRequests(t *testing.T) {
	tests := []struct {
		file     string
		affinity int32
		check    func(*OmniRequest) bool
	}{
		{"tcp_stream.bin", NoAffinity, func(o *OmniRequest) bool { // -t TCP_STREAM -c -C -- -m 8K -s 64K -S 128K, -l 3
			return o.Protocol == ProtoTCP && o.SocketType == SockStream && o.Direction == Recv && o.Family == FamilyInet &&
				o.SendBufSize == 128<<10 && o.RecvBufSize == 128<<10 && o.RecvSize == -1 && o.TestLength == 3 &&
				o.Flags&FlagMeasureCPU != 0 && o.SocketTOS == -1 && o.CongControl == "" && !o.NetserverIP.IsValid()
		}},
		{"tcp_crr.bin", 1, func(o *OmniRequest) bool { // -t TCP_CRR -T 1 -- -r 32,1024
			return o.Direction == Xmit|Recv && o.Flags&FlagConnectTest != 0 && o.RequestSize == 32 && o.ResponseSize == 1024
		}},
		{"udp_rr6.bin", NoAffinity, func(o *OmniRequest) bool { // -6 -t UDP_RR -Y CS1,AF11 -- -K reno
			return o.Protocol == ProtoUDP && o.SocketType == SockDgram && o.Family == FamilyInet6 && o.SocketTOS == 0x28 &&
				o.CongControl == "reno" && o.RequestSize == 1 && o.ResponseSize == 1
		}},
		{"maerts_k.bin", NoAffinity, func(o *OmniRequest) bool { // -t TCP_MAERTS -- -D -H 127.0.0.1 -P 5000,6000
			return o.Direction == Xmit && o.Flags&FlagNoDelay != 0 && o.DataPort == 6000 &&
				o.NetserverIP == netip.MustParseAddr("127.0.0.1")
		}},
	}
	for _, tt := range tests {
		m := load(t, tt.file)
		o, err := DecodeOmniRequest(m)
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if m.Aux != tt.affinity || !tt.check(o) {
			t.Errorf("%s: affinity %d, %+v", tt.file, m.Aux, o)
		}
		if _, ok, _ := GetExt(m); ok {
			t.Errorf("%s: netperf's request read as marked", tt.file)
		}
		// Encoding what was decoded gives netperf's bytes back, but for
		// the words it leaves as they were and this does not keep.
		again := o.Encode(m.Aux)
		if !bytes.Equal(again.Data[:omniRequestCutoff*4], m.Data[:omniRequestCutoff*4]) {
			t.Errorf("%s: re-encoded words differ", tt.file)
		}
	}
}

func TestRoundTrips(t *testing.T) {
	req := &OmniRequest{SendBufSize: -1, RecvSize: 8192, Protocol: ProtoUDP, SocketType: SockDgram, Direction: Xmit | Recv, Family: FamilyInet6,
		TestLength: -1000, NetperfIP: netip.MustParseAddr("fd00::1"), NetperfPort: 5001, NetserverIP: netip.MustParseAddr("fd00::2"),
		SocketTOS: 0x20, CongControl: "cubic", CPURate: 100}
	m := req.Encode(3)
	PutExt(m, Ext{Flags: ExtDone, Duration: 1500 * time.Millisecond})
	var buf bytes.Buffer
	if err := Write(&buf, m); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != MessageSize {
		t.Fatalf("wrote %d bytes", buf.Len())
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	o, err := DecodeOmniRequest(got)
	if err != nil || *o != *req || got.Aux != 3 {
		t.Fatalf("%v\n%+v\n%+v", err, o, req)
	}
	if e, ok, err := GetExt(got); !ok || err != nil || e.Flags != ExtDone || e.Duration != 1500*time.Millisecond {
		t.Errorf("ext %+v %v %v", e, ok, err)
	}

	resp := &OmniResponse{RecvBufSize: 131072, SendBufSize: 16384, DataPort: 40000, Flags: FlagMeasureCPU, CPURate: 100, SocketTOS: -1, CPUModel: "x"}
	r, err := DecodeOmniResponse(resp.Encode(0))
	if err != nil || *r != *resp {
		t.Errorf("response %v %+v", err, r)
	}
	res := &OmniResults{BytesReceived: 5 << 32, RecvCalls: 9, BytesSent: 7, Elapsed: 1.25, CPUUtil: 12.5, NumCPUs: 2, PeakCPUID: 1,
		TransportRetrans: -1, CongControl: "bbr", IfName: "lo", CPUMethod: CPUMethodProcStat}
	rr, err := DecodeOmniResults(res.Encode())
	if err != nil || *rr != *res {
		t.Errorf("results %v %+v", err, rr)
	}
}

func TestIPv4AddressOnTheWire(t *testing.T) {
	m := (&OmniRequest{Protocol: ProtoTCP, SocketType: SockStream, Direction: Recv, Family: FamilyInet,
		NetserverIP: netip.MustParseAddr("10.1.2.3")}).Encode(NoAffinity)
	if got := m.Data[32*4 : 32*4+4]; !bytes.Equal(got, []byte{10, 1, 2, 3}) {
		t.Errorf("netserver_ip on the wire: % x", got)
	}
}

func TestRejects(t *testing.T) {
	base := func() *OmniRequest {
		return &OmniRequest{Protocol: ProtoTCP, SocketType: SockStream, Direction: Recv, Family: FamilyInet}
	}
	tests := []struct {
		name string
		edit func(*Message)
	}{
		{"protocol", func(m *Message) { words{&m.Data}.putU32(23, 132) }},
		{"socket type", func(m *Message) { words{&m.Data}.putU32(22, SockDgram) }},
		{"family", func(m *Message) { words{&m.Data}.putU32(21, 10) }},
		{"direction", func(m *Message) { words{&m.Data}.putU32(24, 0x10) }},
		{"no direction", func(m *Message) { words{&m.Data}.putU32(24, 0) }},
		{"port", func(m *Message) { words{&m.Data}.putU32(20, 70000) }},
		{"unterminated", func(m *Message) { copy(m.Data[reqCongOffset:], bytes.Repeat([]byte("a"), congLen)) }},
		{"control byte", func(m *Message) { m.Data[reqFillOffset] = 0x07 }},
		{"address without family", func(m *Message) { words{&m.Data}.putU32(21, 0); words{&m.Data}.putU32(28, 1) }},
		{"type", func(m *Message) { m.Type = DoOmni + 1 }},
	}
	for _, tt := range tests {
		m := base().Encode(NoAffinity)
		tt.edit(m)
		if _, err := DecodeOmniRequest(m); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	if _, err := Read(bytes.NewReader(make([]byte, MessageSize-1))); !errors.Is(err, ErrMalformed) {
		t.Errorf("short message: %v", err)
	}
	if _, err := Read(bytes.NewReader(nil)); err != io.EOF {
		t.Errorf("nothing: %v", err)
	}
	m := base().Encode(NoAffinity)
	PutExt(m, Ext{Duration: -time.Second})
	if _, _, err := GetExt(m); !errors.Is(err, ErrMalformed) {
		t.Errorf("negative duration: %v", err)
	}
	if _, err := DecodeOmniResponse((&OmniResponse{}).Encode(0)); !errors.Is(err, ErrMalformed) {
		t.Errorf("response without a data port: %v", err)
	}
}

// FuzzDecode: no message may crash a decoder; a request it accepts
// encodes to one it reads the same way.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"tcp_stream.bin", "tcp_crr.bin", "udp_rr6.bin", "maerts_k.bin"} {
		f.Add(load(f, name).Encode())
	}
	f.Add((&OmniResults{CongControl: "cubic"}).Encode().Encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		_, _, _ = GetExt(m)
		_, _ = DecodeOmniResponse(m)
		_, _ = DecodeOmniResults(m)
		o, err := DecodeOmniRequest(m)
		if err != nil {
			return
		}
		again, err := DecodeOmniRequest(o.Encode(m.Aux))
		if err != nil || !sameRequest(*again, *o) {
			t.Fatalf("re-encoded request reads %+v, %v; was %+v", again, err, o)
		}
	})
}

// sameRequest compares two requests with the CPU rate by its bits, as it
// travels: a peer may send a NaN, which is the same NaN once read again
// but never equal to itself.
func sameRequest(a, b OmniRequest) bool {
	if math.Float32bits(a.CPURate) != math.Float32bits(b.CPURate) {
		return false
	}
	a.CPURate, b.CPURate = 0, 0
	return a == b
}
