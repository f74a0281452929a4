package bpfpolicy

import (
	"encoding/binary"
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

// MaxFlows is how many connections a port with an ACL remembers (the
// size of its flow table): beyond it the least recently used is
// forgotten, and its next packet is judged by the rules again.
const MaxFlows = 4096

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

// Compiled is a port policy as the programs read it: the constants and
// the ACL's rules, each spec rule expanded to one entry per IP family and
// pair of prefixes it matches.
type Compiled struct {
	Config   policyConfig
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
	copy(c.Config.Mac[:], mac)
	set := func(on bool, f uint8) {
		if on {
			c.Config.Flags |= f
		}
	}
	set(p.GuardMAC, flagGuardMAC)
	set(p.GuardIP, flagGuardIP)
	set(p.GuardRA, flagGuardRA)
	set(p.UnicastOnly, flagUnicast)
	set(p.Default != "", flagACL)
	set(p.Default == plan.ActionDeny, flagDeny)
	for _, a := range p.IPs {
		switch {
		case a.Is4() && c.Config.N4 < maxAddrs:
			c.Config.Ip4[c.Config.N4] = ne32(a.As4())
			c.Config.N4++
		case a.Is6() && c.Config.N6 < maxAddrs:
			c.Config.Ip6[c.Config.N6] = a.As16()
			c.Config.N6++
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
	for k := range c.Config.Part {
		in, proto := uint8(k/parts), partProtos[k%parts]
		c.Config.Part[k][0] = uint32(len(c.Rules))
		for _, entries := range expanded {
			for _, e := range entries {
				if e.In == in && (e.Proto == 0 || e.Proto == proto) {
					c.Rules = append(c.Rules, e)
				}
			}
		}
		c.Config.Part[k][1] = uint32(len(c.Rules)) - c.Config.Part[k][0]
	}
	c.Config.Nrules = uint32(len(c.Rules))
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

// Port is a port's two programs loaded, with their maps: FromVM for the
// switch port's ingress hook, ToVM for its egress hook.
type Port struct {
	FromVM, ToVM *ebpf.Program
	Counters     *ebpf.Map
	Flows        *ebpf.Map
}

// Close lets go of the programs and maps; those attached stay in the
// kernel with their filters.
func (p *Port) Close() {
	for _, c := range []interface{ Close() error }{p.FromVM, p.ToVM, p.Counters, p.Flows} {
		if c != nil {
			c.Close()
		}
	}
}

var (
	specOnce sync.Once
	specErr  error
	baseSpec *ebpf.CollectionSpec
)

// Load loads the programs of a policy. flows, when not nil, is the flow
// table of the programs the port runs now, which the new ones take over
// so that a changed policy does not cut established connections.
func Load(c Compiled, flows *ebpf.Map) (*Port, error) {
	specOnce.Do(func() { baseSpec, specErr = loadPolicy() })
	if specErr != nil {
		return nil, specErr
	}
	spec := baseSpec.Copy()
	if err := spec.Variables["cfg"].Set(c.Config); err != nil {
		return nil, err
	}
	spec.Maps["counters"].MaxEntries = uint32(c.Counters)
	spec.Maps["rules"].MaxEntries = uint32(max(1, len(c.Rules)))
	if c.Config.Flags&flagACL == 0 {
		// Without an ACL the tables are never used: the smallest there is
		// (an LRU table's entries are allocated when it is made).
		spec.Maps["flows"].MaxEntries, spec.Maps["frags"].MaxEntries = 1, 1
	}
	var opts ebpf.CollectionOptions
	if flows != nil && compatible(flows, spec.Maps["flows"]) {
		opts.MapReplacements = map[string]*ebpf.Map{"flows": flows}
	}
	var objs policyObjects
	if err := spec.LoadAndAssign(&objs, &opts); err != nil {
		return nil, fmt.Errorf("load port policy programs: %w", err)
	}
	if len(c.Rules) > 0 {
		keys := make([]uint32, len(c.Rules))
		for i := range keys {
			keys[i] = uint32(i)
		}
		// The rules are in place before any filter runs the programs.
		if _, err := objs.Rules.BatchUpdate(keys, c.Rules, nil); err != nil {
			objs.Close()
			return nil, fmt.Errorf("write port policy rules: %w", err)
		}
	}
	objs.Rules.Close()
	return &Port{FromVM: objs.PortFromVm, ToVM: objs.PortToVm, Counters: objs.Counters, Flows: objs.Flows}, nil
}

func compatible(m *ebpf.Map, s *ebpf.MapSpec) bool {
	return m.Type() == s.Type && m.KeySize() == s.KeySize && m.ValueSize() == s.ValueSize && m.MaxEntries() == s.MaxEntries
}

// MapOf opens the map of a loaded program by its name.
func MapOf(p *ebpf.Program, name string) (*ebpf.Map, error) {
	info, err := p.Info()
	if err != nil {
		return nil, err
	}
	ids, _ := info.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue
		}
		if mi, err := m.Info(); err == nil && mi.Name == name {
			return m, nil
		}
		m.Close()
	}
	return nil, fmt.Errorf("program %s has no map %q: %w", info.Name, name, ErrNoMap)
}

// ErrNoMap is a program without the map asked for.
var ErrNoMap = errors.New("no such map")

// Counters reads the counters of a port's programs, summed over the CPUs,
// by label: those of the checks its policy has (read from the program's
// constants) and of every ACL rule.
func Counters(p *ebpf.Program) (map[string]uint64, error) {
	m, err := MapOf(p, "counters")
	if err != nil {
		return nil, err
	}
	defer m.Close()
	flags, err := flagsOf(p)
	if err != nil {
		return nil, err
	}
	has := map[int]bool{
		0: flags&flagGuardMAC != 0,
		1: flags&flagGuardIP != 0, 2: flags&flagGuardIP != 0, 3: flags&flagGuardIP != 0, 4: flags&flagGuardIP != 0,
		5: flags&flagGuardRA != 0,
		6: flags&flagUnicast != 0,
		7: flags&flagDeny != 0,
	}
	out := map[string]uint64{}
	var per []uint64
	for i := uint32(0); i < m.MaxEntries(); i++ {
		if i < ruleBase && !has[int(i)] {
			continue
		}
		if err := m.Lookup(i, &per); err != nil {
			return nil, err
		}
		var sum uint64
		for _, v := range per {
			sum += v
		}
		out[Label(int(i))] = sum
	}
	return out, nil
}

// flagsOf reads the policy's flags from the program's constants.
func flagsOf(p *ebpf.Program) (uint8, error) {
	m, err := MapOf(p, ".rodata")
	if err != nil {
		return 0, err
	}
	defer m.Close()
	val := make([]byte, m.ValueSize())
	if err := m.Lookup(uint32(0), &val); err != nil {
		return 0, err
	}
	if len(val) < 7 {
		return 0, fmt.Errorf("port policy constants of %d bytes", len(val))
	}
	return val[6], nil // cfg.flags follows the 6-byte MAC
}
