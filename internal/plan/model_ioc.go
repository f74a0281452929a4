package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/vnet-project/vnet/internal/ioc"
	"github.com/vnet-project/vnet/internal/spec"
)

// Filter priorities on an uplink: lower runs first. A port group's rules
// come before the plain per-port matches, each rule in its own band so the
// spec's order holds; within a band a port's priority is a hash of its
// MAC, stable as ports come and go.
const (
	rulePrioBase = 0x100
	rulePrioBand = 0x100
	MaxRules     = 60
	portPrioBase = 0x4000
	portPrioBand = 0x3fff
)

// port is a switch port as IOC sees it: the MAC its frames carry.
type port struct {
	owner string
	mac   string
}

// IOCUplink is one uplink on one host of a switch that runs Network I/O
// Control, with the classes that divide it.
type IOCUplink struct {
	Host, Switch string
	NS, NIC      string
	Line         uint64
	Classes      []ioc.Class // the unclassified class first, then the pools in ioc's order
}

// IOCUplinks lists, for every switch with IOC on, each host's attached uplinks.
func IOCUplinks(s *spec.Spec) []IOCUplink {
	var out []IOCUplink
	for si := range s.Switches {
		sw := &s.Switches[si]
		if !sw.IOCEnabled() {
			continue
		}
		pools := sw.IOCPools()
		for _, h := range sw.SwitchHosts() {
			host, _ := s.Host(h)
			for _, u := range attachedUplinks(sw, h) {
				nic, _ := host.NIC(u.NICs[h])
				out = append(out, IOCUplink{Host: h, Switch: sw.Name, NS: NSName(s.Name, h), NIC: nic.Name,
					Line: wireRate(nic.Speed), Classes: ioc.Classes(wireRate(nic.Speed), pools)})
			}
		}
	}
	return out
}

// ioc adds, on each host's uplinks of every IOC switch, the pool
// classes, the filters that sort traffic into them, and the unclassified
// class's share of the line-rate tree.
func (m *modeler) ioc() {
	ups := IOCUplinks(m.s)
	m.splitTeamLimits(ups)
	for _, u := range ups {
		sw := switchNamed(m.s, u.Switch)
		minor := map[string]uint32{}
		for _, c := range u.Classes {
			minor[c.Pool] = c.Minor
		}
		m.setLeaf(u.NS, u.NIC, u.Classes[0])
		for _, c := range u.Classes[1:] {
			m.add(Resource{Kind: KindPool, NS: u.NS, Link: u.NIC, Class: c.Minor, Rate: c.Rate, Ceil: c.Ceil, Quantum: c.Quantum,
				Burst: ClassBurst(c.Ceil), Owner: fmt.Sprintf("pool %s on %s/%s", c.Pool, u.Host, u.NIC)})
		}
		m.filters(sw, u.Host, u.NS, u.NIC, minor)
	}
}

func switchNamed(s *spec.Spec, name string) *spec.Switch {
	for i := range s.Switches {
		if s.Switches[i].Name == name {
			return &s.Switches[i]
		}
	}
	return nil
}

func (m *modeler) setLeaf(ns, link string, c ioc.Class) {
	for i := range m.out {
		r := &m.out[i]
		if r.Kind == KindLineRate && r.NS == ns && r.Link == link {
			r.LeafRate, r.Quantum = c.Rate, c.Quantum
		}
	}
}

func (m *modeler) filters(sw *spec.Switch, host, ns, link string, minor map[string]uint32) {
	used := map[uint16]bool{}
	for _, pg := range sw.PortGroups {
		ports := m.portsOn(pg.Name, host)
		for k, rule := range pg.Classify {
			rk, _ := ioc.RuleKeys(rule.Rule())
			for _, p := range ports {
				mk, _ := ioc.SrcMACKeys(p.mac)
				prio := pickPrio(used, rulePrioBase+uint16(k)*rulePrioBand, rulePrioBand, p.mac)
				m.add(Resource{Kind: KindFilter, NS: ns, Link: link, Prio: prio, Match: ioc.EncodeKeys(append(mk, rk...)), Class: minor[rule.Pool],
					Owner: fmt.Sprintf("%s rule %d -> pool %s", p.owner, k, rule.Pool)})
			}
		}
		for _, p := range ports {
			mk, _ := ioc.SrcMACKeys(p.mac)
			prio := pickPrio(used, portPrioBase, portPrioBand, p.mac)
			m.add(Resource{Kind: KindFilter, NS: ns, Link: link, Prio: prio, Match: ioc.EncodeKeys(mk), Class: minor[pg.PoolOf()],
				Owner: fmt.Sprintf("%s -> pool %s", p.owner, pg.PoolOf())})
		}
	}
}

// pickPrio hashes a MAC into a band and probes past priorities in use.
func pickPrio(used map[uint16]bool, base, band uint16, mac string) uint16 {
	sum := sha256.Sum256([]byte(mac))
	off := binary.BigEndian.Uint16(sum[:2]) % band
	for i := uint16(0); i < band; i++ {
		p := base + (off+i)%band
		if !used[p] {
			used[p] = true
			return p
		}
	}
	return base // more ports than priorities: validation keeps this from happening
}

// portsOn lists the ports of a port group on a host: vNICs and host ports.
// The MAC is the vNIC's end's, whichever end of the pair it is: a vNIC
// that attaches a container's namespace names the switch port first.
func (m *modeler) portsOn(pg, host string) []port {
	var out []port
	for _, r := range m.out {
		if r.Kind != KindVeth || !isPortOf(r, pg) {
			continue
		}
		vnic, sw := r.A, r.B
		if m.vnics[r.A.NS+"/"+r.A.Name].portFirst {
			vnic, sw = r.B, r.A
		}
		if sw.NS != m.ns(host) {
			continue
		}
		out = append(out, port{owner: r.Owner, mac: vnic.MAC})
	}
	return out
}

// isPortOf tells a vNIC's or host port's veth by the port group in its
// owner label, which model writes as "... on <portgroup>".
func isPortOf(r Resource, pg string) bool {
	n := len(r.Owner) - len(pg)
	return n > 4 && r.Owner[n-4:] == " on "+pg
}

// shapers adds the traffic shapers of port groups, and of vNICs that have
// their own: egress on the port's own end (traffic leaving the VM or host
// port), ingress on the switch's end (traffic the switch delivers to it).
// A vNIC's own shaper replaces its port group's in each direction it gives.
func (m *modeler) shapers() {
	var add []Resource
	for _, sw := range m.s.Switches {
		for _, pg := range sw.PortGroups {
			if pg.Shaping == nil {
				continue
			}
			for _, r := range m.out {
				if r.Kind != KindVeth || !isPortOf(r, pg.Name) || m.vnics[r.A.NS+"/"+r.A.Name].own != nil {
					continue
				}
				add = m.shaped(add, r, pg.Shaping)
			}
		}
	}
	for _, r := range m.out {
		f, ok := m.vnics[r.A.NS+"/"+r.A.Name]
		if r.Kind != KindVeth || !ok || f.own == nil || !f.connected {
			continue
		}
		shaping := *f.own
		if pg, _, ok := m.s.PortGroup(f.portgroup); ok && pg.Shaping != nil {
			if shaping.Egress == nil {
				shaping.Egress = pg.Shaping.Egress
			}
			if shaping.Ingress == nil {
				shaping.Ingress = pg.Shaping.Ingress
			}
		}
		add = m.shaped(add, r, &shaping)
	}
	m.out = append(m.out, add...)
}

// shaped appends the shapers of one port's veth r.
func (m *modeler) shaped(add []Resource, r Resource, shaping *spec.Shaping) []Resource {
	own, port := r.A, r.B
	if m.vnics[r.A.NS+"/"+r.A.Name].portFirst {
		own, port = r.B, r.A
	}
	for _, d := range []struct {
		s   *spec.Shaper
		end End
		dir string
	}{{shaping.Egress, own, "egress"}, {shaping.Ingress, port, "ingress"}} {
		if d.s != nil {
			add = append(add, shaperOn(d.end.NS, d.end.Name, d.s, r.Owner+" "+d.dir+" shaping"))
		}
	}
	return add
}

// shaperOn is the token bucket of s on a link.
func shaperOn(ns, link string, s *spec.Shaper, owner string) Resource {
	peak := uint64(s.Peak) / 8 * 8
	avg := uint64(s.Average) / 8 * 8
	if peak <= avg {
		peak = 0 // no separate peak: the average is the ceiling
	}
	return Resource{Kind: KindShaper, NS: ns, Link: link, Rate: avg, Ceil: peak, Burst: uint64(s.Burst), Owner: owner}
}

// LimitKey names one uplink's share of a pool's team-wide limit: the pool
// class on that uplink.
func LimitKey(ns, nic string, minor uint32) string {
	return Resource{Kind: KindPool, NS: ns, Link: nic, Class: minor}.Key()
}

// PoolCeils reads the pool ceilings the kernel holds, by LimitKey: the
// current split of team-wide limits, which the next model keeps.
func PoolCeils(observed []Resource) map[string]uint64 {
	out := map[string]uint64{}
	for _, r := range observed {
		if r.Kind == KindPool {
			out[r.Key()] = r.Ceil
		}
	}
	return out
}

// TeamLimit is a pool's limit split over the uplinks one host uses for a
// switch.
type TeamLimit struct {
	Host, Switch, Pool, NS string
	Limit                  uint64
	Minor                  uint32
	NICs                   []string
}

// TeamLimits lists the pools whose limit several uplinks of a host share.
func TeamLimits(ups []IOCUplink, s *spec.Spec) []TeamLimit {
	var out []TeamLimit
	for start := 0; start < len(ups); {
		end := start + 1
		for end < len(ups) && ups[end].Host == ups[start].Host && ups[end].Switch == ups[start].Switch {
			end++
		}
		group := ups[start:end]
		start = end
		if len(group) < 2 {
			continue
		}
		sw := switchNamed(s, group[0].Switch)
		for i, p := range sw.IOCPools() {
			if p.Limit == 0 {
				continue
			}
			tl := TeamLimit{Host: group[0].Host, Switch: sw.Name, Pool: p.Name, NS: group[0].NS, Limit: p.Limit, Minor: ioc.Minor(i)}
			for _, u := range group {
				tl.NICs = append(tl.NICs, u.NIC)
			}
			out = append(out, tl)
		}
	}
	return out
}

// splitTeamLimits gives each uplink its part of a team-wide limit: the
// split the kernel holds if it still adds up to the limit (the agent moves
// it with demand), else an even one.
func (m *modeler) splitTeamLimits(ups []IOCUplink) {
	for _, tl := range TeamLimits(ups, m.s) {
		ceils := make([]uint64, len(tl.NICs))
		var sum uint64
		for i, nic := range tl.NICs {
			ceils[i] = m.opt.PoolCeils[LimitKey(tl.NS, nic, tl.Minor)]
			sum += ceils[i]
		}
		if slices.Contains(ceils, 0) || math.Abs(float64(sum)-float64(tl.Limit)) > 0.01*float64(tl.Limit) {
			ceils = ioc.EqualSplit(tl.Limit, len(tl.NICs))
		}
		for i, nic := range tl.NICs {
			for j := range ups {
				if ups[j].NS != tl.NS || ups[j].NIC != nic {
					continue
				}
				for k := range ups[j].Classes {
					if c := &ups[j].Classes[k]; c.Minor == tl.Minor {
						c.Ceil = ceils[i] / 8 * 8
						c.Rate = min(c.Rate, c.Ceil)
					}
				}
			}
		}
	}
}
