package nft

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"

	"github.com/vnet-project/vnet/internal/plan"
)

// A port policy compiles to rules in up to three chains of the host's
// bridge table, named after the port:
//
//	PORT-guard    (from prerouting, iifname PORT): what the VM may send at all
//	PORT-egress   (from forward, iifname PORT):    the ACL's egress rules
//	PORT-ingress  (from forward, oifname PORT):    unicast filtering, the ACL's ingress rules
//
// A rule that lets traffic through returns to the base chain, so that the
// other port's chain (the sender's egress, the receiver's ingress) decides
// too; a rule that refuses drops. Every dropping rule and every ACL rule
// counts, its label (forged-mac, acl[3], ...) in its comment.
const (
	guardChain   = "guard"
	egressChain  = "egress"
	ingressChain = "ingress"
)

var portChains = []string{guardChain, egressChain, ingressChain}

func portChain(port, kind string) string { return port + "-" + kind }

// The counters' labels, as vnet status shows them.
const (
	labelForgedMAC = "forged-mac"
	labelARPSpoof  = "arp-spoof"
	labelIPSpoof   = "ip-spoof"
	labelNDSpoof   = "nd-spoof"
	labelStacked   = "stacked-vlan"
	labelRAGuard   = "ra-guard"
	labelUnicast   = "not-for-mac" // unicast for another MAC: promiscuous mode rejected
	labelDefault   = "acl-default"
)

func aclLabel(i int) string { return fmt.Sprintf("acl[%d]", i) }

// establishedMark is the bit of the packet mark the inet table sets on
// packets of connections conntrack knows (established or related), for
// the bridge table's ACLs to let them through.
const establishedMark uint32 = 0x10000000

// nftRule is one rule before it meets a netlink batch: its matches, then a
// counter when it has a label, then its verdict.
type nftRule struct {
	label   string
	matches []nftMatch
	verdict expr.VerdictKind
}

// nftMatch loads a value into register 1 and compares it, or looks it up
// in an anonymous set.
type nftMatch struct {
	exprs  []expr.Any
	set    [][]byte // when not nil: the elements looked up
	key    nftables.SetDatatype
	invert bool
}

// compilePolicy turns a port policy into its chains' rules, by chain kind.
func compilePolicy(p plan.PortPolicy) (map[string][]nftRule, error) {
	mac, err := net.ParseMAC(p.MAC)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("port policy: bad mac %q", p.MAC)
	}
	out := map[string][]nftRule{}
	add := func(chain string, r nftRule) { out[chain] = append(out[chain], r) }
	if p.GuardMAC {
		add(guardChain, nftRule{label: labelForgedMAC, verdict: expr.VerdictDrop,
			matches: []nftMatch{cmp(payload(expr.PayloadBaseLLHeader, 6, 6), expr.CmpOpNeq, mac)}})
	}
	if p.GuardIP {
		var v4, v6 [][]byte
		for _, a := range p.IPs {
			if a.Is4() {
				v4 = append(v4, a.AsSlice())
			} else {
				v6 = append(v6, a.AsSlice())
			}
		}
		// The kernel takes a frame's outer 802.1Q tag off before the
		// bridge sees it, so the guards below read the packet inside it;
		// a second tag would hide that packet from them.
		for _, tag := range []uint16{eth8021Q, eth8021AD} {
			add(guardChain, nftRule{label: labelStacked, verdict: expr.VerdictDrop, matches: []nftMatch{isProto(tag)}})
		}
		arp := isProto(ethARP)
		add(guardChain, nftRule{label: labelARPSpoof, verdict: expr.VerdictDrop,
			matches: []nftMatch{arp, cmp(payload(expr.PayloadBaseNetworkHeader, 8, 6), expr.CmpOpNeq, mac)}})
		add(guardChain, nftRule{label: labelARPSpoof, verdict: expr.VerdictDrop,
			matches: []nftMatch{arp, notIn(payload(expr.PayloadBaseNetworkHeader, 14, 4), nftables.TypeIPAddr, v4)}})
		add(guardChain, nftRule{label: labelIPSpoof, verdict: expr.VerdictDrop,
			matches: []nftMatch{isProto(ethIP), notIn(payload(expr.PayloadBaseNetworkHeader, 12, 4), nftables.TypeIPAddr, v4)}})
		add(guardChain, nftRule{label: labelIPSpoof, verdict: expr.VerdictDrop,
			matches: []nftMatch{isProto(ethIPv6), notIn(payload(expr.PayloadBaseNetworkHeader, 8, 16), nftables.TypeIP6Addr, v6)}})
		// A neighbour advertisement claims its target address.
		add(guardChain, nftRule{label: labelNDSpoof, verdict: expr.VerdictDrop,
			matches: []nftMatch{isProto(ethIPv6), l4proto(58), icmpType(expr.CmpOpEq, ndNA),
				notIn(payload(expr.PayloadBaseTransportHeader, 8, 16), nftables.TypeIP6Addr, v6)}})
		for _, r := range ndOptionRules(mac) {
			add(guardChain, r)
		}
	}
	if p.GuardRA {
		for _, typ := range []byte{ndRA, ndRedirect} {
			add(guardChain, nftRule{label: labelRAGuard, verdict: expr.VerdictDrop,
				matches: []nftMatch{isProto(ethIPv6), l4proto(58), icmpType(expr.CmpOpEq, typ)}})
		}
	}
	if p.UnicastOnly {
		group := nftMatch{exprs: []expr.Any{payload(expr.PayloadBaseLLHeader, 0, 1),
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{1}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0}}}}
		add(ingressChain, nftRule{label: labelUnicast, verdict: expr.VerdictDrop,
			matches: []nftMatch{group, cmp(payload(expr.PayloadBaseLLHeader, 0, 6), expr.CmpOpNeq, mac)}})
	}
	if p.Default == "" {
		return out, nil
	}
	for _, chain := range []string{egressChain, ingressChain} {
		out[chain] = append(out[chain], aclPreamble()...)
	}
	for i, r := range p.Rules {
		chain := egressChain
		if r.In {
			chain = ingressChain
		}
		for _, m := range aclMatches(r) {
			verdict := expr.VerdictReturn
			if !r.Allow {
				verdict = expr.VerdictDrop
			}
			add(chain, nftRule{label: aclLabel(i), matches: m, verdict: verdict})
		}
	}
	if p.Default == plan.ActionDeny {
		for _, chain := range []string{egressChain, ingressChain} {
			add(chain, nftRule{label: labelDefault, verdict: expr.VerdictDrop})
		}
	}
	return out, nil
}

// The neighbour discovery messages (ICMPv6 types).
const (
	ndRS       = 133
	ndRA       = 134
	ndNS       = 135
	ndNA       = 136
	ndRedirect = 137
)

// ndOptionRules drop neighbour discovery messages that claim another MAC
// in a link-layer address option, or whose options the rules cannot read
// at a fixed offset. A guest's solicitations and advertisements carry one
// option (its link-layer address, or a nonce for duplicate address
// detection), so one option is all a VM may send; extension headers would
// move the options, and no neighbour discovery message needs them.
func ndOptionRules(mac net.HardwareAddr) []nftRule {
	v6, icmp := isProto(ethIPv6), l4proto(58)
	out := []nftRule{{label: labelNDSpoof, verdict: expr.VerdictDrop, matches: []nftMatch{v6, icmp,
		cmp(payload(expr.PayloadBaseNetworkHeader, 6, 1), expr.CmpOpNeq, []byte{58}),
		icmpType(expr.CmpOpGte, ndRS), icmpType(expr.CmpOpLte, ndRedirect)}}}
	// The options follow a fixed part whose length depends on the type.
	for _, m := range []struct{ typ, opts byte }{{ndRS, 8}, {ndNS, 24}, {ndNA, 24}} {
		oneOption := be16(uint16(m.opts) + 8) // the IPv6 payload length with one 8-byte option
		out = append(out, nftRule{label: labelNDSpoof, verdict: expr.VerdictDrop, matches: []nftMatch{v6, icmp, icmpType(expr.CmpOpEq, m.typ),
			cmp(payload(expr.PayloadBaseNetworkHeader, 4, 2), expr.CmpOpGt, oneOption)}})
		for _, opt := range []byte{1, 2} { // source and target link-layer address
			out = append(out, nftRule{label: labelNDSpoof, verdict: expr.VerdictDrop, matches: []nftMatch{v6, icmp, icmpType(expr.CmpOpEq, m.typ),
				cmp(payload(expr.PayloadBaseNetworkHeader, 4, 2), expr.CmpOpEq, oneOption),
				cmp(payload(expr.PayloadBaseTransportHeader, uint32(m.opts), 1), expr.CmpOpEq, []byte{opt}),
				cmp(payload(expr.PayloadBaseTransportHeader, uint32(m.opts)+2, 6), expr.CmpOpNeq, mac)}})
		}
	}
	return out
}

func icmpType(op expr.CmpOp, typ byte) nftMatch {
	return cmp(payload(expr.PayloadBaseTransportHeader, 0, 1), op, []byte{typ})
}

// aclPreamble lets through, before any ACL rule, what an ACL does not
// judge: packets of connections already allowed (stateful ACLs), non-IP
// frames (ARP), and IPv6 neighbour and multicast listener discovery
// (ICMPv6 130 to 137 and 143), without which IPv6 does not work.
func aclPreamble() []nftRule {
	return []nftRule{
		{verdict: expr.VerdictReturn, matches: []nftMatch{{exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(establishedMark), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)}}}}},
		{verdict: expr.VerdictReturn, matches: []nftMatch{
			cmp(&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: 1}, expr.CmpOpNeq, be16(ethIP)),
			cmp(&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: 1}, expr.CmpOpNeq, be16(ethIPv6))}},
		{verdict: expr.VerdictReturn, matches: []nftMatch{isProto(ethIPv6), l4proto(58),
			cmp(payload(expr.PayloadBaseTransportHeader, 0, 1), expr.CmpOpGte, []byte{130}),
			cmp(payload(expr.PayloadBaseTransportHeader, 0, 1), expr.CmpOpLte, []byte{137})}},
		{verdict: expr.VerdictReturn, matches: []nftMatch{isProto(ethIPv6), l4proto(58),
			cmp(payload(expr.PayloadBaseTransportHeader, 0, 1), expr.CmpOpEq, []byte{143})}},
	}
}

// aclMatches returns one match list per nftables rule an ACL rule needs:
// one per IP family its peers have, one for any family when nothing fixes
// it, none when a peer is a port group without members.
func aclMatches(r plan.PolicyRule) [][]nftMatch {
	families := []int{4, 6}
	switch r.Proto {
	case "icmp":
		families = []int{4}
	case "icmpv6":
		families = []int{6}
	}
	anyFamily := r.Proto != "icmp" && r.Proto != "icmpv6" && r.Src == nil && r.Dst == nil
	var out [][]nftMatch
	for _, fam := range families {
		src, dst := ofFamily(r.Src, fam), ofFamily(r.Dst, fam)
		if (r.Src != nil && len(src) == 0) || (r.Dst != nil && len(dst) == 0) {
			continue
		}
		var ms []nftMatch
		if !anyFamily {
			ms = append(ms, isProto(map[int]uint16{4: ethIP, 6: ethIPv6}[fam]))
		}
		if r.Proto != "" {
			ms = append(ms, l4proto(map[string]byte{"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58}[r.Proto]))
		}
		if r.SPort != 0 {
			ms = append(ms, cmp(payload(expr.PayloadBaseTransportHeader, 0, 2), expr.CmpOpEq, be16(uint16(r.SPort))))
		}
		if r.DPort != 0 {
			ms = append(ms, cmp(payload(expr.PayloadBaseTransportHeader, 2, 2), expr.CmpOpEq, be16(uint16(r.DPort))))
		}
		srcOff, dstOff := uint32(12), uint32(16)
		if fam == 6 {
			srcOff, dstOff = 8, 24
		}
		sm, sok := prefixMatch(src, srcOff)
		dm, dok := prefixMatch(dst, dstOff)
		if !sok || !dok {
			// Several prefixes that are not single addresses: a rule each.
			for _, s := range orAny(src) {
				for _, d := range orAny(dst) {
					one := append([]nftMatch(nil), ms...)
					m1, _ := prefixMatch(s, srcOff)
					m2, _ := prefixMatch(d, dstOff)
					out = append(out, append(append(one, m1...), m2...))
				}
			}
			continue
		}
		out = append(out, append(append(ms, sm...), dm...))
		if anyFamily {
			break
		}
	}
	return out
}

func ofFamily(ps []netip.Prefix, fam int) []netip.Prefix {
	if ps == nil {
		return nil
	}
	out := []netip.Prefix{}
	for _, p := range ps {
		if p.Addr().Is4() == (fam == 4) {
			out = append(out, p)
		}
	}
	return out
}

func orAny(ps []netip.Prefix) [][]netip.Prefix {
	if len(ps) == 0 {
		return [][]netip.Prefix{nil}
	}
	out := make([][]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = []netip.Prefix{p}
	}
	return out
}

// prefixMatch matches an address field against prefixes: nothing for none
// or a /0, a masked compare for one prefix, a set lookup for several single
// addresses. It reports false for several prefixes that are not all single
// addresses.
func prefixMatch(ps []netip.Prefix, off uint32) ([]nftMatch, bool) {
	if len(ps) == 0 {
		return nil, true
	}
	size := uint32(ps[0].Addr().BitLen() / 8)
	if len(ps) == 1 {
		p := ps[0]
		switch {
		case p.Bits() == 0:
			return nil, true
		case p.IsSingleIP():
			return []nftMatch{cmp(payload(expr.PayloadBaseNetworkHeader, off, size), expr.CmpOpEq, p.Addr().AsSlice())}, true
		}
		mask := net.CIDRMask(p.Bits(), int(size*8))
		return []nftMatch{{exprs: []expr.Any{payload(expr.PayloadBaseNetworkHeader, off, size),
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: size, Mask: mask, Xor: make([]byte, size)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()}}}}, true
	}
	elems := make([][]byte, len(ps))
	for i, p := range ps {
		if !p.IsSingleIP() {
			return nil, false
		}
		elems[i] = p.Addr().AsSlice()
	}
	key := nftables.TypeIPAddr
	if size == 16 {
		key = nftables.TypeIP6Addr
	}
	return []nftMatch{{exprs: []expr.Any{payload(expr.PayloadBaseNetworkHeader, off, size)}, set: elems, key: key}}, true
}

// Ethernet types, as skb->protocol (meta protocol) holds them.
const (
	ethIP   = 0x0800
	ethARP  = 0x0806
	ethIPv6 = 0x86dd
	// VLAN tags: what meta protocol says of a frame still tagged after the
	// kernel took its outer tag off.
	eth8021Q  = 0x8100
	eth8021AD = 0x88a8
)

func payload(base expr.PayloadBase, off, n uint32) *expr.Payload {
	return &expr.Payload{DestRegister: 1, Base: base, Offset: off, Len: n}
}

func cmp(load expr.Any, op expr.CmpOp, data []byte) nftMatch {
	return nftMatch{exprs: []expr.Any{load, &expr.Cmp{Op: op, Register: 1, Data: data}}}
}

func notIn(load expr.Any, key nftables.SetDatatype, elems [][]byte) nftMatch {
	return nftMatch{exprs: []expr.Any{load}, set: elems, key: key, invert: true}
}

func isProto(ethertype uint16) nftMatch {
	return cmp(&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: 1}, expr.CmpOpEq, be16(ethertype))
}

func l4proto(p byte) nftMatch {
	return cmp(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, expr.CmpOpEq, []byte{p})
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// ifname is an interface name as nftables compares it: NUL-padded to IFNAMSIZ.
func ifname(name string) []byte {
	b := make([]byte, 16)
	copy(b, name)
	return b
}
