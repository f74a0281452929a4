package rtnl

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

func TestParseAddrMsg(t *testing.T) {
	msg := func(family, prefix, index int, attrs ...*nl.RtAttr) []byte {
		m := nl.NewIfAddrmsg(family)
		m.Prefixlen, m.Index, m.Scope = uint8(prefix), uint32(index), unix.RT_SCOPE_UNIVERSE
		b := m.Serialize()
		for _, a := range attrs {
			b = append(b, a.Serialize()...)
		}
		return b
	}
	v4 := func(s string) []byte { return net.ParseIP(s).To4() }
	tests := []struct {
		name string
		m    []byte
		want string // "" for no address
		link int
	}{
		{"IPv4, address only", msg(unix.AF_INET, 24, 7, nl.NewRtAttr(unix.IFA_ADDRESS, v4("10.0.0.1"))), "10.0.0.1/24", 7},
		{"IPv4 with a peer: the local one", msg(unix.AF_INET, 32, 3,
			nl.NewRtAttr(unix.IFA_ADDRESS, v4("10.0.0.9")), nl.NewRtAttr(unix.IFA_LOCAL, v4("10.0.0.2"))), "10.0.0.2/32", 3},
		{"IPv6", msg(unix.AF_INET6, 64, 5, nl.NewRtAttr(unix.IFA_ADDRESS, net.ParseIP("fe80::1"))), "fe80::1/64", 5},
		{"no address", msg(unix.AF_INET, 24, 7), "", 0},
	}
	for _, tt := range tests {
		a, ok := parseAddrMsg(tt.m)
		switch {
		case tt.want == "" && ok:
			t.Errorf("%s: got %v, want none", tt.name, a.IPNet)
		case tt.want != "" && (!ok || a.IPNet.String() != tt.want || a.LinkIndex != tt.link):
			t.Errorf("%s: got %v on %d (%v), want %s on %d", tt.name, a.IPNet, a.LinkIndex, ok, tt.want, tt.link)
		}
	}
}
