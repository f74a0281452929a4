package bpfpolicy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/vnet-project/vnet/internal/plan"
)

// The policy's flags, as policy.c reads them (cfg.flags).
const (
	flagGuardMAC = 1 << iota
	flagGuardIP
	flagGuardRA
	flagUnicast
	flagACL
	flagDeny
)

// maxAddrs is how many addresses of each family a port's IP guard holds
// (MAX_ADDRS in policy.c): a vNIC's one or two, the unspecified ones and
// its link-local address.
const maxAddrs = 8

// The counters' labels by index, as vnet status shows them (the
// nftables path's labels); an ACL's rules follow from index ruleBase on.
var checkLabels = []string{"forged-mac", "arp-spoof", "ip-spoof", "nd-spoof", "stacked-vlan", "ra-guard", "not-for-mac", "acl-default"}

const ruleBase = 8

// The protocols of the ACL's parts, PART_TCP to PART_OTHER in policy.c: a
// part for other protocols (0 here) holds only rules for any protocol.
var partProtos = [...]uint8{6, 17, 1, 58, 255}

const parts = len(partProtos)

// Label is the label of counter i.
func Label(i int) string {
	if i < ruleBase {
		return checkLabels[i]
	}
	return fmt.Sprintf("acl[%d]", i-ruleBase)
}

// Compiled is a port policy as the programs read it: the port's settings
// and its ACL's rules, each spec rule expanded to one entry per IP family
// and pair of prefixes it matches.
type Compiled struct {
	Port     policyPort
	Rules    []policyRule
	Counters int // counters the policy has: the checks' and one per spec rule
}

// Compile turns a port policy into what the programs read.
func Compile(p plan.PortPolicy) (Compiled, error) {
	var c Compiled
	mac, err := net.ParseMAC(p.MAC)
	if err != nil || len(mac) != 6 {
		return c, fmt.Errorf("port policy: bad mac %q", p.MAC)
	}
	copy(c.Port.Mac[:], mac)
	set := func(on bool, f uint8) {
		if on {
			c.Port.Flags |= f
		}
	}
	set(p.GuardMAC, flagGuardMAC)
	set(p.GuardIP, flagGuardIP)
	set(p.GuardRA, flagGuardRA)
	set(p.UnicastOnly, flagUnicast)
	set(p.Default != "", flagACL)
	set(p.Default == plan.ActionDeny, flagDeny)
	if p.Direct {
		c.Port.Direct = 1
	}
	for _, a := range p.IPs {
		switch {
		case a.Is4() && c.Port.N4 < maxAddrs:
			c.Port.Ip4[c.Port.N4] = ne32(a.As4())
			c.Port.N4++
		case a.Is6() && c.Port.N6 < maxAddrs:
			c.Port.Ip6[c.Port.N6] = a.As16()
			c.Port.N6++
		default:
			return c, fmt.Errorf("port policy: more than %d addresses of one family", maxAddrs)
		}
	}
	expanded := make([][]policyRule, len(p.Rules))
	for i, r := range p.Rules {
		expanded[i] = expand(r, uint32(ruleBase+i))
	}
	// The rules by direction and protocol, each part in the ACL's order
	// (see part in src/policy.c).
	for k := range c.Port.Part {
		in, proto := uint8(k/parts), partProtos[k%parts]
		c.Port.Part[k][0] = uint32(len(c.Rules))
		for _, entries := range expanded {
			for _, e := range entries {
				if e.In == in && (e.Proto == 0 || e.Proto == proto) {
					c.Rules = append(c.Rules, e)
				}
			}
		}
		c.Port.Part[k][1] = uint32(len(c.Rules)) - c.Port.Part[k][0]
	}
	c.Counters = ruleBase + len(p.Rules)
	return c, nil
}

// expand returns the entries of one ACL rule: one for any family when
// nothing fixes it, else one per family and pair of prefixes, none for a
// family where a peer (a port group without members) has no address.
func expand(r plan.PolicyRule, counter uint32) []policyRule {
	base := policyRule{Counter: counter, Sport: uint16(r.SPort), Dport: uint16(r.DPort)}
	if r.Allow {
		base.Allow = 1
	}
	if r.In {
		base.In = 1
	}
	base.Proto = map[string]uint8{"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58}[r.Proto]
	families := []uint8{4, 6}
	switch r.Proto {
	case "icmp":
		families = []uint8{4}
	case "icmpv6":
		families = []uint8{6}
	}
	if r.Proto != "icmp" && r.Proto != "icmpv6" && r.Src == nil && r.Dst == nil {
		return []policyRule{base}
	}
	var out []policyRule
	for _, fam := range families {
		for _, s := range prefixesOf(r.Src, fam) {
			for _, d := range prefixesOf(r.Dst, fam) {
				e := base
				e.Family = fam
				e.Src, e.Smask = netMask(s, fam)
				e.Dst, e.Dmask = netMask(d, fam)
				out = append(out, e)
			}
		}
	}
	return out
}

// prefixesOf returns a peer's prefixes of one family: one that matches
// everything for a peer that is any (nil).
func prefixesOf(ps []netip.Prefix, fam uint8) []netip.Prefix {
	if ps == nil {
		if fam == 4 {
			return []netip.Prefix{netip.PrefixFrom(netip.IPv4Unspecified(), 0)}
		}
		return []netip.Prefix{netip.PrefixFrom(netip.IPv6Unspecified(), 0)}
	}
	var out []netip.Prefix
	for _, p := range ps {
		if p.Addr().Is4() == (fam == 4) {
			out = append(out, p)
		}
	}
	return out
}

// netMask returns a prefix's network and mask as four words in network
// byte order, IPv4 in the first.
func netMask(p netip.Prefix, fam uint8) (addr, mask [4]uint32) {
	bits := 32
	if fam == 6 {
		bits = 128
	}
	m := net.CIDRMask(p.Bits(), bits)
	a := p.Masked().Addr().AsSlice()
	for w := 0; w < len(a)/4; w++ {
		addr[w] = ne32([4]byte(a[4*w : 4*w+4]))
		mask[w] = ne32([4]byte(m[4*w : 4*w+4]))
	}
	return addr, mask
}

// ne32 is four bytes in network order as the program compares them: a
// word loaded from the packet in the machine's byte order.
func ne32(b [4]byte) uint32 { return binary.NativeEndian.Uint32(b[:]) }

// LegacyCounters reads the counters of a port that still runs the
// programs of an earlier build of vnet, one pair per port with the policy
// in their constants, until an apply moves it to this build's.
func LegacyCounters(p *ebpf.Program) (map[string]uint64, error) {
	m, err := MapOf(p, "counters")
	if err != nil {
		return nil, err
	}
	defer m.Close()
	c, err := MapOf(p, ".rodata")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	val := make([]byte, c.ValueSize())
	if err := c.Lookup(uint32(0), &val); err != nil {
		return nil, err
	}
	if len(val) < 7 {
		return nil, fmt.Errorf("port policy constants of %d bytes", len(val))
	}
	// Its flags followed the 6-byte MAC; its counters were per CPU.
	return readCounters(int(m.MaxEntries()), val[6], func(i uint32) (uint64, error) {
		var per []uint64
		if err := m.Lookup(i, &per); err != nil {
			return 0, err
		}
		var sum uint64
		for _, v := range per {
			sum += v
		}
		return sum, nil
	})
}

// MapOf opens the map of a loaded program by its name.
func MapOf(p *ebpf.Program, name string) (*ebpf.Map, error) {
	maps, err := mapsOf(p)
	if err != nil {
		return nil, err
	}
	m, ok := maps[name]
	delete(maps, name)
	for _, o := range maps {
		o.Close()
	}
	if !ok {
		return nil, fmt.Errorf("port program has no map %q: %w", name, ErrNoMap)
	}
	return m, nil
}

// ErrNoMap is a program without the map asked for.
var ErrNoMap = errors.New("no such map")

var digest = sync.OnceValue(func() string {
	sum := sha256.Sum256(_PolicyBytes)
	return hex.EncodeToString(sum[:12])
})

// Digest names this build's programs: the digest of their object, which
// changes with them.
func Digest() string { return digest() }
