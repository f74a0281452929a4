package plan

import (
	"fmt"
	"strings"

	"github.com/vnet-project/vnet/internal/units"
)

// Kind is the type of a kernel object vnet manages.
type Kind string

// The kinds, in the order they are created.
const (
	KindNetns    Kind = "netns"
	KindBridge   Kind = "bridge"
	KindVeth     Kind = "veth"
	KindOffloads Kind = "offloads"
	KindAddr     Kind = "addr"
	KindLineRate Kind = "linerate"
	KindPool     Kind = "pool"
	KindFilter   Kind = "filter"
	KindShaper   Kind = "shaper"
	KindSteer    Kind = "steer"
	KindFirewall Kind = "firewall" // a host namespace's nftables tables (see model_security.go)
	KindPortSec  Kind = "portsec"  // one switch port's security policy and ACL
	// KindPortBPF is a switch port's security policy and ACL as tc/BPF
	// programs on the port itself, where the kernel can run them (see
	// Options.PortPrograms); KindPortSec is the nftables way.
	KindPortBPF Kind = "portbpf"
	// KindLB is a client's switch port's load balancers: tc/BPF programs
	// in its hooks that translate its connections to VIPs (model_lb.go).
	KindLB     Kind = "lb"
	KindCgroup Kind = "cgroup"
	KindVxlan  Kind = "vxlan" // a VXLAN tunnel endpoint, a port of its switch's bridge
	KindFDB    Kind = "fdb"   // a static forwarding entry of a tunnel endpoint
	KindNeigh  Kind = "neigh" // a static neighbour entry (IP -> MAC) on a link
	// KindDevice is a link vnet did not make and never deletes (a real
	// host's NIC, a hypervisor's TAP): it is made a port of a bridge, and
	// given back as it was found when the resource goes.
	KindDevice Kind = "device"
)

var rank = map[Kind]int{
	KindNetns: 0, KindBridge: 1, KindVeth: 2, KindOffloads: 3,
	KindAddr: 4, KindLineRate: 5, KindPool: 6, KindFilter: 7, KindShaper: 8, KindSteer: 9,
	KindFirewall: 10, KindPortSec: 11, KindPortBPF: 11, KindLB: 11, KindCgroup: 12,
	KindVxlan: 2, KindFDB: 4, KindNeigh: 4, KindDevice: 2,
}

// End is one end of a veth pair.
type End struct {
	NS     string `json:"ns"`
	Name   string `json:"name"`
	MAC    string `json:"mac"`
	MTU    int    `json:"mtu"`
	Master string `json:"master,omitempty"` // bridge it is a port of, in the same namespace
	// Isolated marks a teamed uplink's bridge port: the bridge neither
	// forwards between such ports nor floods to them (steering does).
	Isolated bool `json:"isolated,omitempty"`
	Down     bool `json:"down,omitempty"` // administratively down: a disconnected vNIC's switch port
}

// Tri is an optional boolean: the kernel default, on or off.
type Tri int8

// The values of Tri.
const (
	Unset Tri = iota
	On
	Off
)

func (t Tri) String() string {
	return [...]string{"default", "on", "off"}[t]
}

// TriOf converts an optional spec boolean.
func TriOf(b *bool) Tri {
	switch {
	case b == nil:
		return Unset
	case *b:
		return On
	default:
		return Off
	}
}

// Resource is one kernel object. Which fields matter depends on Kind:
//
//	netns:    Name, Sysctls (see NamespaceSysctls), Mark (which store made it, see Mark)
//	bridge:   NS, Name, MAC, MTU, Sysctls (see BridgeSysctls)
//	veth:     A, B (A is the end that names the pair)
//	offloads: NS, Link, GRO, TSO
//	addr:     NS, Link, CIDR
//	linerate: NS, Link, Rate (bit/s, the wire: class 1:1); LeafRate and
//	          Quantum of the default leaf 1:10 when IOC divides the line (0: the whole line);
//	          Burst (bytes, the bucket of 1:1 and 1:10, see ClassBurst)
//	pool:     NS, Link, Class (minor of 1:Class under 1:1), Rate, Ceil, Quantum, Burst
//	filter:   NS, Link, Prio, Match (u32 keys, see ioc.EncodeKeys), Class
//	shaper:   NS, Link, Rate (average), Ceil (peak, 0: none), Burst (bytes): TBF at the link's root
//	steer:    NS, Link, Match (Steer's text); on a port also Name (port ID)
//	          and Why (its team assignment, see whyText)
//	firewall: NS, Match (FirewallBridge or FirewallStateful); Name, the
//	          tables' name, in a host's own namespace (FirewallTable; "": vnet)
//	portsec:  NS, Link (the switch-side port), Match (PortPolicy's text),
//	          Name (its firewall's)
//	portbpf:  NS, Link (the switch-side port), Match (PortPolicy's text)
//	lb:       NS, Link (the client's switch port), Match (PortBalancers'
//	          text), Why (the backends down, PortBalancers.DownText)
//	cgroup:   Name (relative path), CPUMilli, CPUs (cpuset list)
//	bridge:   with Isolate, the host's IPv6 stack is kept off it (no link-local address)
//	vxlan:    NS, Name, MAC, MTU, VNI, Local (underlay address), Port (UDP),
//	          Link (the bridge it is a port of); with Isolate its bridge port
//	          neither learns nor floods ARP the bridge can answer (neigh_suppress)
//	fdb:      NS, Link (the tunnel endpoint), MAC, Remote (underlay address);
//	          without Remote, the bridge's own static entry: MAC is behind that port
//	neigh:    NS, Link, CIDR (an address without prefix length), MAC
//	device:   NS, Name (the existing link), Link (the bridge it is a port of;
//	          "" for none), MTU (0: left as found); with Isolate a teamed
//	          uplink: an isolated bridge port nothing is flooded to
type Resource struct {
	Kind     Kind   `json:"kind"`
	NS       string `json:"ns,omitempty"`
	Name     string `json:"name,omitempty"`
	MAC      string `json:"mac,omitempty"`
	MTU      int    `json:"mtu,omitempty"`
	A        End    `json:"a,omitzero"`
	B        End    `json:"b,omitzero"`
	Link     string `json:"link,omitempty"`
	CIDR     string `json:"cidr,omitempty"`
	Rate     uint64 `json:"rate,omitempty"`
	GRO      Tri    `json:"gro,omitempty"`
	TSO      Tri    `json:"tso,omitempty"`
	LeafRate uint64 `json:"leaf_rate,omitempty"`
	Ceil     uint64 `json:"ceil,omitempty"`
	Quantum  uint32 `json:"quantum,omitempty"`
	Burst    uint64 `json:"burst,omitempty"`
	Class    uint32 `json:"class,omitempty"`
	Prio     uint16 `json:"prio,omitempty"`
	Match    string `json:"match,omitempty"`
	CPUMilli int    `json:"cpu_milli,omitempty"`
	CPUs     string `json:"cpus,omitempty"`
	Why      string `json:"why,omitempty"`
	Sysctls  string `json:"sysctls,omitempty"`
	Mark     string `json:"mark,omitempty"`
	VNI      uint32 `json:"vni,omitempty"`
	Local    string `json:"local,omitempty"`
	Remote   string `json:"remote,omitempty"`
	Port     uint16 `json:"port,omitempty"`
	Isolate  bool   `json:"isolate,omitempty"`
	// Owner says which spec object this realizes ("vm web1 eth0"). It is a
	// label for people and is not compared.
	Owner string `json:"owner,omitempty"`
}

// Key identifies a resource: two resources with the same key are the same
// object, possibly in different states.
func (r Resource) Key() string {
	switch r.Kind {
	case KindNetns:
		return "netns/" + r.Name
	case KindBridge, KindVxlan:
		return "link/" + r.NS + "/" + r.Name
	case KindDevice:
		return "device/" + r.NS + "/" + r.Name
	case KindFDB:
		return "fdb/" + r.NS + "/" + r.Link + "/" + r.MAC + "/" + r.Remote
	case KindVeth:
		return "link/" + r.A.NS + "/" + r.A.Name
	case KindOffloads, KindLineRate, KindShaper, KindSteer:
		return string(r.Kind) + "/" + r.NS + "/" + r.Link
	case KindPool:
		return fmt.Sprintf("pool/%s/%s/%x", r.NS, r.Link, r.Class)
	case KindFilter:
		return fmt.Sprintf("filter/%s/%s/%d", r.NS, r.Link, r.Prio)
	case KindAddr:
		return "addr/" + r.NS + "/" + r.Link + "/" + r.CIDR
	case KindCgroup:
		return "cgroup/" + r.Name
	case KindNeigh:
		return "neigh/" + r.NS + "/" + r.Link + "/" + r.CIDR
	case KindFirewall:
		if r.Name != "" {
			return "firewall/" + r.NS + "/" + r.Name
		}
		return "firewall/" + r.NS
	case KindPortSec:
		return "portsec/" + r.NS + "/" + r.Link
	case KindPortBPF:
		return "portbpf/" + r.NS + "/" + r.Link
	case KindLB:
		return "lb/" + r.NS + "/" + r.Link
	}
	return string(r.Kind) + "/?"
}

// HalfPair reports whether r is a veth pair read without its second end:
// the kernel is taking it down with a namespace that is gone, or is
// about to. No request can make such a pair again, so a rollback does
// not try to.
func (r Resource) HalfPair() bool {
	return r.Kind == KindVeth && r.B.Name == ""
}

// Same reports whether two resources are in the same state, labels aside.
func Same(a, b Resource) bool {
	a.Owner, b.Owner = "", ""
	return a == b
}

// links returns the namespace/name of every link the resource is.
func (r Resource) links() []string {
	switch r.Kind {
	case KindBridge, KindVxlan, KindDevice:
		return []string{r.NS + "/" + r.Name}
	case KindVeth:
		return []string{r.A.NS + "/" + r.A.Name, r.B.NS + "/" + r.B.Name}
	}
	return nil
}

// onLink returns the namespace/name of the link a resource is attached to.
func (r Resource) onLink() string {
	switch r.Kind {
	case KindOffloads, KindAddr, KindLineRate, KindPool, KindFilter, KindShaper, KindSteer, KindFDB, KindVxlan, KindNeigh, KindDevice, KindPortBPF, KindLB:
		return r.NS + "/" + r.Link
	}
	return ""
}

// refs returns the namespace/name of other links a resource names: the
// uplinks a port's steering program redirects to, by interface index.
func (r Resource) refs() []string {
	if r.Kind != KindSteer {
		return nil
	}
	s, err := ParseSteer(r.Match)
	if err != nil {
		return nil
	}
	var out []string
	for _, to := range s.To {
		out = append(out, r.NS+"/"+to)
	}
	return out
}

// String describes the resource the way ip(8) and tc(8) users think of it.
func (r Resource) String() string {
	var s string
	switch r.Kind {
	case KindNetns:
		s = "netns " + r.Name
	case KindBridge:
		s = fmt.Sprintf("bridge %s in %s (mtu %d)", r.Name, r.NS, r.MTU)
	case KindVeth:
		s = fmt.Sprintf("veth %s %s <-> %s %s", r.A.NS, endDesc(r.A), r.B.NS, endDesc(r.B))
	case KindOffloads:
		s = fmt.Sprintf("offloads %s in %s: gro %s, tso %s", r.Link, r.NS, r.GRO, r.TSO)
	case KindAddr:
		s = fmt.Sprintf("address %s on %s in %s", r.CIDR, r.Link, r.NS)
	case KindLineRate:
		s = fmt.Sprintf("line rate %s on %s in %s", units.Rate(r.Rate), r.Link, r.NS)
		if r.LeafRate != 0 {
			s += fmt.Sprintf(" (unclassified: %s assured)", units.Rate(r.LeafRate))
		}
	case KindPool:
		s = fmt.Sprintf("pool class 1:%x on %s in %s: rate %s ceil %s quantum %d", r.Class, r.Link, r.NS, units.Rate(r.Rate), units.Rate(r.Ceil), r.Quantum)
	case KindFilter:
		s = fmt.Sprintf("filter prio %d on %s in %s: u32 %s -> 1:%x", r.Prio, r.Link, r.NS, r.Match, r.Class)
	case KindShaper:
		s = fmt.Sprintf("shaper on %s in %s: average %s peak %s burst %s", r.Link, r.NS, units.Rate(r.Rate), units.Rate(max(r.Ceil, r.Rate)), units.Size(r.Burst))
	case KindSteer:
		s = fmt.Sprintf("steering on %s in %s: %s", r.Link, r.NS, r.Match)
		if r.Why != "" {
			s += " (" + r.Why + ")"
		}
	case KindFirewall:
		s = fmt.Sprintf("firewall in %s: %s", r.NS, r.Match)
		if r.Name != "" {
			s = fmt.Sprintf("firewall %s in %s: %s", r.Name, r.NS, r.Match)
		}
	case KindPortSec:
		s = fmt.Sprintf("port security on %s in %s: %s", r.Link, r.NS, shortMatch(r))
	case KindPortBPF:
		s = fmt.Sprintf("port security on %s in %s (tc/BPF): %s", r.Link, r.NS, shortMatch(r))
	case KindLB:
		s = fmt.Sprintf("load balancers on %s in %s: %s", r.Link, r.NS, shortMatch(r))
		if r.Why != "" {
			s += " (down: " + r.Why + ")"
		}
	case KindCgroup:
		s = fmt.Sprintf("cgroup %s (cpu %.2f, cpuset %s)", r.Name, float64(r.CPUMilli)/1000, r.CPUs)
	case KindVxlan:
		s = fmt.Sprintf("vxlan %s in %s (vni %d, local %s, port %d, port of %s, mtu %d)", r.Name, r.NS, r.VNI, r.Local, r.Port, r.Link, r.MTU)
		if r.Isolate {
			s += " (no learning, neighbour suppression)"
		}
	case KindDevice:
		s = fmt.Sprintf("device %s in %s", r.Name, r.NS)
		if r.Link != "" {
			s += " (port of " + r.Link + ")"
		}
		if r.MTU != 0 {
			s += fmt.Sprintf(" (mtu %d)", r.MTU)
		}
	case KindFDB:
		if r.Remote == "" {
			s = fmt.Sprintf("fdb %s on %s in %s (master static)", r.MAC, r.Link, r.NS)
		} else {
			s = fmt.Sprintf("fdb %s dst %s on %s in %s", r.MAC, r.Remote, r.Link, r.NS)
		}
	case KindNeigh:
		s = fmt.Sprintf("neighbour %s lladdr %s on %s in %s", r.CIDR, r.MAC, r.Link, r.NS)
	default:
		s = string(r.Kind)
	}
	if r.Owner != "" {
		s += " [" + r.Owner + "]"
	}
	return s
}

func endDesc(e End) string {
	var b strings.Builder
	b.WriteString(e.Name)
	if e.Master != "" {
		b.WriteString(" (port of " + e.Master)
		if e.Isolated {
			b.WriteString(", isolated uplink")
		}
		b.WriteString(")")
	}
	if e.Down {
		b.WriteString(" (down)")
	}
	return b.String()
}

// Counters are a qdisc's or class's statistics.
type Counters struct {
	Bytes      uint64 `json:"bytes"`
	Packets    uint64 `json:"packets"`
	Drops      uint64 `json:"drops"`
	Overlimits uint64 `json:"overlimits"`
	Backlog    uint64 `json:"backlog_bytes"`
	Qlen       uint64 `json:"qlen"`
}
