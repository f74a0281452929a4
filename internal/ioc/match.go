package ioc

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vnet-project/vnet/internal/quote"
)

// Key is one u32 match: the 32-bit word at Off bytes from the network
// header, masked, equals Val. Negative offsets reach into the Ethernet
// header (source MAC at -8).
type Key struct {
	Off  int32
	Mask uint32
	Val  uint32
}

// Rule matches IPv4 traffic of a port group more finely (a port group's
// classify). Zero fields match anything; DSCP < 0 means any.
type Rule struct {
	Proto        string // tcp, udp, icmp
	SPort, DPort int
	DSCP         int
	Src, Dst     string // prefixes
}

// SrcMACKeys match frames from one MAC: how a port's traffic is told apart
// on the uplink, where the port it came from is no longer known.
func SrcMACKeys(mac string) ([]Key, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return nil, fmt.Errorf("MAC %s", quote.Q(mac))
	}
	w1 := uint32(hw[0])<<24 | uint32(hw[1])<<16 | uint32(hw[2])<<8 | uint32(hw[3])
	w2 := uint32(hw[4])<<24 | uint32(hw[5])<<16
	return []Key{{Off: -8, Mask: 0xffffffff, Val: w1}, {Off: -4, Mask: 0xffff0000, Val: w2}}, nil
}

var protoNumbers = map[string]uint32{"icmp": 1, "tcp": 6, "udp": 17}

// RuleKeys match a rule. Ports assume an IPv4 header without options
// (20 bytes), as tc's own u32 shorthand does.
func RuleKeys(r Rule) ([]Key, error) {
	var keys []Key
	if r.Proto != "" {
		n, ok := protoNumbers[r.Proto]
		if !ok {
			return nil, fmt.Errorf("protocol %s: want tcp, udp or icmp", quote.Q(r.Proto))
		}
		keys = append(keys, Key{Off: 8, Mask: 0x00ff0000, Val: n << 16})
	}
	if r.DSCP >= 0 {
		if r.DSCP > 63 {
			return nil, fmt.Errorf("dscp %d: want 0..63", r.DSCP)
		}
		keys = append(keys, Key{Off: 0, Mask: 0x00fc0000, Val: uint32(r.DSCP) << 18})
	}
	for _, p := range []struct {
		prefix string
		off    int32
	}{{r.Src, 12}, {r.Dst, 16}} {
		if p.prefix == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(p.prefix)
		if err != nil || !pfx.Addr().Is4() {
			return nil, fmt.Errorf("prefix %s: want an IPv4 prefix, e.g. 10.0.0.0/8", quote.Q(p.prefix))
		}
		a := pfx.Masked().Addr().As4()
		mask := uint32(0)
		if pfx.Bits() > 0 {
			mask = ^uint32(0) << (32 - pfx.Bits())
		}
		keys = append(keys, Key{Off: p.off, Mask: mask, Val: uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])})
	}
	if r.SPort != 0 || r.DPort != 0 {
		if r.Proto != "tcp" && r.Proto != "udp" {
			return nil, fmt.Errorf("ports need proto tcp or udp")
		}
		var mask, val uint32
		for _, p := range []struct {
			port  int
			shift uint
		}{{r.SPort, 16}, {r.DPort, 0}} {
			if p.port == 0 {
				continue
			}
			if p.port < 1 || p.port > 65535 {
				return nil, fmt.Errorf("port %d: want 1..65535", p.port)
			}
			mask |= 0xffff << p.shift
			val |= uint32(p.port) << p.shift
		}
		keys = append(keys, Key{Off: 20, Mask: mask, Val: val})
	}
	return keys, nil
}

// EncodeKeys writes keys canonically, so desired and observed filters
// compare as strings.
func EncodeKeys(keys []Key) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d/%08x/%08x", k.Off, k.Mask, k.Val&k.Mask)
	}
	return strings.Join(parts, " ")
}

// DecodeKeys is the inverse of EncodeKeys.
func DecodeKeys(s string) ([]Key, error) {
	var out []Key
	for _, f := range strings.Fields(s) {
		p := strings.Split(f, "/")
		if len(p) != 3 {
			return nil, fmt.Errorf("key %q", f)
		}
		off, err1 := strconv.ParseInt(p[0], 10, 32)
		mask, err2 := strconv.ParseUint(p[1], 16, 32)
		val, err3 := strconv.ParseUint(p[2], 16, 32)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("key %q", f)
		}
		out = append(out, Key{Off: int32(off), Mask: uint32(mask), Val: uint32(val)})
	}
	return out, nil
}
