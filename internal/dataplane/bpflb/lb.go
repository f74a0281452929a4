package bpflb

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/vnet-project/vnet/internal/plan"
)

// none is an empty slot (NONE in lb.c).
const none = ^uint32(0)

// Sizes of the maps that keep state, as lb.c declares them: how many
// connections of one client a port translates at once (ct, rev; beyond, the
// least recently used is forgotten, and a TCP connection that comes back
// after is dropped by its backend), how many clients keep an affinity
// (aff), how many backend addresses and ports are counted (conns).
const (
	MaxConnections = 2048
	MaxAffinities  = 512
	MaxCounted     = 1024
)

// stateMaps are the maps that a change of a port's load balancers hands
// from the old programs to the new ones.
var stateMaps = []string{lbMapCt, lbMapRev, lbMapAff, lbMapConns}

// Programs are a port's two programs and their maps.
type Programs struct {
	FromVM, ToVM *ebpf.Program
	maps         map[string]*ebpf.Map
	groups       []group // how Compile laid the backends out (nil when opened by ID)
}

// Close releases the programs and maps; the tc filters keep their own
// references.
func (p *Programs) Close() {
	if p == nil {
		return
	}
	for _, prog := range []*ebpf.Program{p.FromVM, p.ToVM} {
		if prog != nil {
			prog.Close()
		}
	}
	for _, m := range p.maps {
		m.Close()
	}
}

// group is one load balancer's backends of one family: a range of the
// backends array and of the slots array.
type group struct {
	lb, family      int
	firstBackend, n int
	firstSlot, m    int
	ids             []string
}

// compiled is a port's load balancers as the maps hold them.
type compiled struct {
	services map[lbSvcKey]lbSvc
	vips     map[lbVipKey]lbVip
	backends []lbBackend
	slots    []uint32
	groups   []group
}

// compile lays pb out in the maps' form; health (each backend's Down) is
// in the backends' up flags and the slots.
func compile(pb plan.PortBalancers) (compiled, error) {
	c := compiled{services: map[lbSvcKey]lbSvc{}, vips: map[lbVipKey]lbVip{}}
	for i, b := range pb {
		var name [32]int8
		for k := 0; k < len(b.Name) && k < len(name); k++ {
			name[k] = int8(b.Name[k])
		}
		vipMAC, err := mac(b.MAC)
		if err != nil {
			return c, err
		}
		for _, vip := range b.VIPs {
			family := familyOf(vip)
			g := group{lb: i, family: family, firstBackend: len(c.backends), firstSlot: len(c.slots)}
			for _, be := range b.Backends {
				a := be.IP
				if family == 6 {
					a = be.IP6
				}
				if !a.IsValid() {
					continue
				}
				hw, err := mac(be.MAC)
				if err != nil {
					return c, err
				}
				x := lbBackend{Addr: addr16(a), Mac: hw, Family: uint8(family), Lb: uint32(i), LbName: name}
				if !be.Down {
					x.Up = 1
				}
				c.backends = append(c.backends, x)
				g.ids = append(g.ids, plan.BackendID(be))
				g.n++
			}
			g.m = plan.SlotCount(g.n)
			c.slots = append(c.slots, fillSlots(g, c.backends)...)
			c.groups = append(c.groups, g)
			c.vips[lbVipKey{Addr: addr16(vip), Family: uint8(family)}] = lbVip{Mac: vipMAC}
			for _, l := range b.Listeners {
				k := lbSvcKey{Addr: addr16(vip), Port: be16(l.Port), Proto: protoNumber(l.Proto), Family: uint8(family)}
				s := lbSvc{Lb: uint32(i), FirstSlot: uint32(g.firstSlot), Nslots: uint32(g.m), Group: uint32(len(c.groups) - 1),
					BackendPort: be16(l.BackendPort)}
				if b.Source {
					s.Source, s.AffinityNs = 1, uint64(b.Affinity.Nanoseconds())
				}
				c.services[k] = s
			}
		}
	}
	return c, nil
}

// fillSlots is a group's slot table from its backends' up flags.
func fillSlots(g group, backends []lbBackend) []uint32 {
	up := make([]bool, g.n)
	for i := range up {
		up[i] = backends[g.firstBackend+i].Up != 0
	}
	out := make([]uint32, g.m)
	for i, b := range plan.Slots(g.ids, up, g.m) {
		out[i] = none
		if b >= 0 {
			out[i] = uint32(g.firstBackend + b)
		}
	}
	return out
}

func familyOf(a netip.Addr) int {
	if a.Is4() {
		return 4
	}
	return 6
}

func addr16(a netip.Addr) [16]byte {
	var out [16]byte
	if a.Is4() {
		b := a.As4()
		copy(out[:], b[:])
		return out
	}
	return a.As16()
}

func addrOf(b [16]byte, family uint8) netip.Addr {
	if family == 4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b)
}

// be16 is a port in network order, as the programs compare it with the
// packet's.
func be16(port int) uint16 { return uint16(port)>>8 | uint16(port)<<8 }

func protoNumber(p string) uint8 {
	if p == "udp" {
		return 17
	}
	return 6
}

func mac(s string) ([6]byte, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return [6]byte{}, fmt.Errorf("load balancer: bad MAC %q", s)
	}
	return [6]byte(hw), nil
}

// Load loads a port's programs for pb, with maps of their size and holding
// its configuration and health. The maps that keep connections, affinities
// and counts are from, when not nil (the programs the port runs now), so
// that a change keeps every connection on its backend.
func Load(pb plan.PortBalancers, from *Programs) (*Programs, error) {
	c, err := compile(pb)
	if err != nil {
		return nil, err
	}
	spec, err := loadLb()
	if err != nil {
		return nil, err
	}
	size := func(name string, n int) { spec.Maps[name].MaxEntries = uint32(max(n, 1)) }
	size(lbMapServices, len(c.services))
	size(lbMapVips, len(c.vips))
	size(lbMapBackends, len(c.backends))
	size(lbMapSlots, len(c.slots))
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{}}
	if from != nil {
		for _, name := range stateMaps {
			if m, ok := from.maps[name]; ok {
				opts.MapReplacements[name] = m
			}
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, *opts)
	if err != nil {
		return nil, fmt.Errorf("load the load balancers' programs: %w", err)
	}
	p := &Programs{FromVM: coll.Programs[lbProgLbFromVm], ToVM: coll.Programs[lbProgLbToVm], maps: coll.Maps, groups: c.groups}
	if err := p.fill(c); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// fill writes the configuration into new maps.
func (p *Programs) fill(c compiled) error {
	for k, v := range c.services {
		if err := p.maps[lbMapServices].Put(k, v); err != nil {
			return fmt.Errorf("load balancer services: %w", err)
		}
	}
	for k, v := range c.vips {
		if err := p.maps[lbMapVips].Put(k, v); err != nil {
			return fmt.Errorf("load balancer VIPs: %w", err)
		}
	}
	return p.putHealth(c.backends, c.slots)
}

// putHealth writes the backends, then the slots that may name them.
func (p *Programs) putHealth(backends []lbBackend, slots []uint32) error {
	for i, b := range backends {
		if err := p.maps[lbMapBackends].Put(uint32(i), b); err != nil {
			return fmt.Errorf("load balancer backends: %w", err)
		}
	}
	for i, s := range slots {
		if err := p.maps[lbMapSlots].Put(uint32(i), s); err != nil {
			return fmt.Errorf("load balancer slots: %w", err)
		}
	}
	return nil
}

// SetHealth brings the backends' up flags and the slot tables of programs
// loaded for pb's text to pb's health. Connections already made keep their
// backends; new ones go to backends that are up.
func (p *Programs) SetHealth(pb plan.PortBalancers) error {
	c, err := compile(pb)
	if err != nil {
		return err
	}
	// Down first, then the slots: no slot is left on a backend that went
	// down once the slots are written, and a backend that came up is
	// marked up before a slot names it.
	for i, b := range c.backends {
		var old lbBackend
		if err := p.maps[lbMapBackends].Lookup(uint32(i), &old); err != nil {
			return fmt.Errorf("load balancer backends: %w", err)
		}
		if old.Addr != b.Addr || old.Family != b.Family {
			return fmt.Errorf("load balancer backends: backend %d is %s, not %s: the programs are not those of this text", i, addrOf(old.Addr, old.Family), addrOf(b.Addr, b.Family))
		}
	}
	return p.putHealth(c.backends, c.slots)
}

// Open finds a port's programs and their maps from the program the port's
// ingress filter runs (its ID) and the one its egress filter runs (0: not
// known).
func Open(fromID, toID ebpf.ProgramID) (*Programs, error) {
	from, err := ebpf.NewProgramFromID(fromID)
	if err != nil {
		return nil, fmt.Errorf("open the load balancers' program %d: %w", fromID, err)
	}
	p := &Programs{FromVM: from, maps: map[string]*ebpf.Map{}}
	if toID != 0 {
		if p.ToVM, err = ebpf.NewProgramFromID(toID); err != nil {
			p.Close()
			return nil, fmt.Errorf("open the load balancers' program %d: %w", toID, err)
		}
	}
	info, err := from.Info()
	if err != nil {
		p.Close()
		return nil, err
	}
	ids, _ := info.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("open the load balancers' map %d: %w", id, err)
		}
		mi, err := m.Info()
		if err != nil || p.maps[mi.Name] != nil {
			m.Close()
			continue
		}
		p.maps[mi.Name] = m
	}
	for _, name := range []string{lbMapBackends, lbMapSlots, lbMapConns, lbMapCt} {
		if p.maps[name] == nil {
			p.Close()
			return nil, fmt.Errorf("program %d is no load balancer's: it has no map %s", fromID, name)
		}
	}
	return p, nil
}

// Down reads back which backends are down, as plan.PortBalancers.DownText
// has it.
func (p *Programs) Down() (string, error) {
	var k uint32
	var down []string
	var b lbBackend
	it := p.maps[lbMapBackends].Iterate()
	for it.Next(&k, &b) {
		if b.Family != 0 && b.Up == 0 {
			down = append(down, cString(b.LbName[:])+"/"+addrOf(b.Addr, b.Family).String())
		}
	}
	if err := it.Err(); err != nil {
		return "", err
	}
	slices.Sort(down)
	return strings.Join(down, ","), nil
}

// Conn is a backend's address and port, a protocol and the VIP that sent
// connections there.
type Conn struct {
	Addr  netip.Addr
	Port  int
	Proto string
	VIP   netip.Addr
}

// Conns reads how many connections the port sent to each backend since its
// programs were first loaded.
func (p *Programs) Conns() (map[Conn]uint64, error) {
	out := map[Conn]uint64{}
	var k lbConnKey
	var n uint64
	it := p.maps[lbMapConns].Iterate()
	for it.Next(&k, &n) {
		out[Conn{Addr: addrOf(k.Addr, k.Family), Port: int(be16(int(k.Port))), Proto: protoName(k.Proto), VIP: addrOf(k.Vip, k.Family)}] += n
	}
	return out, it.Err()
}

// Active counts the connections the port translates now, by backend: TCP
// connections that neither the client closed (a FIN or a reset) nor the
// backend reset, UDP flows that sent a
// datagram within the last idle nanoseconds of now (ktime).
func (p *Programs) Active(now, idle uint64) (map[Conn]uint64, error) {
	out := map[Conn]uint64{}
	var k lbCtKey
	var v lbCtVal
	it := p.maps[lbMapCt].Iterate()
	for it.Next(&k, &v) {
		proto := protoName(k.Proto)
		if v.Closed != 0 || proto == "udp" && now-v.Seen > idle {
			continue
		}
		out[Conn{Addr: addrOf(v.Addr, k.Family), Port: int(be16(int(v.Port))), Proto: proto, VIP: addrOf(k.Vip, k.Family)}]++
	}
	if err := it.Err(); err != nil && !errors.Is(err, ebpf.ErrIterationAborted) {
		return nil, err
	}
	return out, nil
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// Checksum is the Internet checksum (RFC 1071) of the concatenation of
// data, folded and complemented: what an IP, TCP, UDP or ICMP header
// carries, and 0 over data that carries its own.
func Checksum(data ...[]byte) uint16 {
	var sum uint32
	for _, d := range data {
		for i := 0; i+1 < len(d); i += 2 {
			sum += uint32(d[i])<<8 | uint32(d[i+1])
		}
		if len(d)%2 == 1 {
			sum += uint32(d[len(d)-1]) << 8
		}
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// protoName names an IP protocol the programs translate.
func protoName(proto uint8) string {
	if proto == 17 {
		return "udp"
	}
	return "tcp"
}
