package netperf

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseProcTable(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       map[string]uint64
		err        string
	}{
		{name: "snmp", text: "Ip: Forwarding DefaultTTL InReceives\nIp: 1 64 310861\nTcp: RtoMin MaxConn InSegs\nTcp: 200 -1 17\n",
			// MaxConn is -1, not a counter
			want: map[string]uint64{"Ip:Forwarding": 1, "Ip:DefaultTTL": 64, "Ip:InReceives": 310861, "Tcp:RtoMin": 200, "Tcp:InSegs": 17}},
		{name: "netstat without the final newline", text: "IpExt: InNoRoutes InOctets\nIpExt: 0 107279348",
			want: map[string]uint64{"IpExt:InNoRoutes": 0, "IpExt:InOctets": 107279348}},
		{name: "a names line without its values", text: "Ip: Forwarding InReceives\nIp: 1 2\nIcmp: InMsgs\n", err: "pairs"},
		{name: "fewer values than names", text: "Ip: Forwarding InReceives\nIp: 1\n", err: "line 1"},
		{name: "values of another protocol", text: "Ip: Forwarding\nIcmp: 1\n", err: "line 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseProcTable(c.text)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestParseProcList(t *testing.T) {
	got, err := parseProcList("Ip6InReceives                   \t5\nIp6InOctets \t 640\n\nIcmp6OutErrors\n")
	want := map[string]uint64{"Ip6InReceives": 5, "Ip6InOctets": 640}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
}

func TestIfaceDeltaCountsTheStackApart(t *testing.T) {
	a := IfaceCounters{RxBytes: 1000, RxPackets: 10, Stack: &StackCounters{Packets: 5, Bytes: 400}}
	// 70 frames of 1514 bytes on the interface, coalesced into 10 IP packets of 10.5 KB.
	b := IfaceCounters{RxBytes: 1000 + 70*1514, RxPackets: 80, Stack: &StackCounters{Packets: 15, Bytes: 400 + 70*1500}}
	d := ifaceDelta("eth0", a, b, 2)
	if d.RxPPS != 35 || d.RxAvgPacket != 1514 {
		t.Errorf("interface: %.1f packets/s of %.1f bytes, want 35 of 1514", d.RxPPS, d.RxAvgPacket)
	}
	if d.StackRxPackets != 10 || d.StackRxPPS != 5 || d.StackRxAvgPacket != 10500 {
		t.Errorf("stack: %d packets, %.1f/s of %.1f bytes, want 10, 5/s of 10500", d.StackRxPackets, d.StackRxPPS, d.StackRxAvgPacket)
	}
	// Counters read at one end only give no stack figures, not a difference
	// from zero.
	b.Stack = nil
	if d := ifaceDelta("eth0", a, b, 2); d.StackRxPackets != 0 || d.StackRxPPS != 0 {
		t.Errorf("stack unreadable at the end: %d packets, %.1f/s", d.StackRxPackets, d.StackRxPPS)
	}
}
