package plan

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/teaming"
)

// Options are facts about the machine and the moment that the model
// depends on.
type Options struct {
	NumCPU int // CPUs available for VM cpusets; 0 leaves cpusets unset
	// Teams holds each port's current team assignment by port ID (see
	// Assignments), which LBT moves and failback decisions build on.
	Teams map[string]teaming.Assignment
	// Down holds the uplinks that are down, as "host/uplink".
	Down map[string]bool
	// PoolCeils holds how team-wide pool limits are split over uplinks now,
	// by LimitKey (see PoolCeils).
	PoolCeils map[string]uint64
	Now       time.Time // when assignments that change are made
	// Host, when set, models only that host's part of the spec, as its
	// agent realizes it on a real machine: see HostModel.
	Host string
	// HostNS is the namespace that holds the host's switches and tunnel
	// endpoints in a host model; empty means the one the agent runs in
	// (CurrentNS).
	HostNS string
	// DeviceSpeeds holds, in a host model, the line rate in bit/s of each
	// real NIC (spec.NIC.Device) whose spec gives no speed, as the device
	// reports it (ethtool).
	DeviceSpeeds map[string]uint64
	// PortPrograms realizes port policies as tc/BPF programs on the ports
	// (KindPortBPF) rather than in nftables (KindPortSec, KindFirewall):
	// set where the kernel runs them (the dataplane says).
	PortPrograms bool
	// Paused is what of the infrastructure is paused: those ports'
	// switch-side ends are down (see Paused).
	Paused Paused
	// LBDown holds the load balancers' backends that are down, by
	// BackendKey, as their health checks found them.
	LBDown map[string]bool
	// Mark, when set, is the mark of the store that realizes the model
	// (Mark.String), which its namespaces and cgroups then carry as
	// MarkOwned gives it them: set as the model is made, a model of
	// thousands of resources is not copied to be marked.
	Mark string
}

// Model returns every kernel object that realizes the spec, in creation order.
func Model(s *spec.Spec, opt Options) []Resource {
	var rs []Resource
	if opt.Host != "" {
		rs = hostModel(s, opt)
	} else {
		rs = labModel(s, opt, true)
	}
	if opt.Mark != "" {
		for i := range rs {
			if Markable(rs[i].Kind) {
				rs[i].Mark = opt.Mark
			}
		}
	}
	return rs
}

// labModel is the lab's model of the whole spec on one machine: hosts and
// the physical switch as namespaces. withNetworks adds the virtual networks
// to the host namespaces; a host model, which starts from the lab's, makes
// them in the host's own namespace instead.
func labModel(s *spec.Spec, opt Options, withNetworks bool) []Resource {
	return (&modeler{s: s, opt: opt, attachHere: true}).lab(withNetworks)
}

// lab is labModel; with onlyHost set, of the VMs only those on onlyHost.
func (m *modeler) lab(withNetworks bool) []Resource {
	s := m.s
	vms := 0
	for i := range s.VMs {
		if !m.skips(&s.VMs[i]) {
			vms++
		}
	}
	m.out = make([]Resource, 0, 4*vms+16) // a VM's namespace, vNIC, address and port policy
	var nets []Resource
	var underlays []labUnderlay
	if withNetworks {
		nets, underlays = m.labNetworks()
	}
	m.physSwitch(underlays)
	for i := range s.Hosts {
		m.host(&s.Hosts[i])
	}
	for i := range s.VMs {
		if vm := &s.VMs[i]; m.skips(vm) {
			if vm.CPUs > 0 {
				m.cpuset(vm.CPUs) // the next VMs' cpusets follow spec order
			}
			continue
		}
		m.vm(&s.VMs[i])
	}
	for i := range s.HostPorts {
		m.hostPort(i)
	}
	for _, u := range underlays {
		m.underlayLink(u)
	}
	m.out = append(m.out, nets...)
	m.ioc()
	m.shapers()
	m.steering()
	m.security()
	m.balancers()
	m.onTaps()
	return m.out
}

type modeler struct {
	s   *spec.Spec
	opt Options
	// onlyHost, when set, leaves out the VMs of other hosts: a host's
	// model (hostModel) keeps nothing of them.
	onlyHost string
	out      []Resource
	nextCPU  int
	nets     map[string]*spec.Network  // by name, made on first use
	peers    map[string][]netip.Prefix // ACL peers' members, by "portgroup/NAME" or "network/NAME" (model_security.go)
	// attachHere realizes vNICs that attach what exists (a container's
	// namespace, a TAP) on this machine, as the lab's host namespaces'
	// ports (model_attach.go). A host model, which starts from the lab's,
	// realizes them on its real host instead.
	attachHere bool
	// vnics knows, by a vNIC veth's first end, what the shapers need of it
	// beyond its owner: its own shaping, and which end is the VM's.
	vnics map[string]vnicFacts
	// tapPorts are the TAPs that are vNICs' switch ports (attachHere),
	// by the name the port would have otherwise, in its namespace.
	tapPorts map[string]string
}

// network finds a network by name in constant time: a spec may hold
// thousands.
func (m *modeler) network(name string) (*spec.Network, bool) {
	if m.nets == nil {
		m.nets = make(map[string]*spec.Network, len(m.s.Networks))
		for i := range m.s.Networks {
			m.nets[m.s.Networks[i].Name] = &m.s.Networks[i]
		}
	}
	n, ok := m.nets[name]
	return n, ok
}

func (m *modeler) add(r Resource) { m.out = append(m.out, r) }

// skips reports whether the model leaves vm out (see onlyHost).
func (m *modeler) skips(vm *spec.VM) bool { return m.onlyHost != "" && vm.Host != m.onlyHost }

func (m *modeler) ns(node string) string { return NSName(m.s.Name, node) }

func (m *modeler) physSwitch(underlays []labUnderlay) {
	mtu := 0
	for _, h := range m.s.Hosts {
		for _, n := range h.NICs {
			mtu = max(mtu, m.nicMTU(&h, &n))
		}
	}
	for _, u := range underlays {
		mtu = max(mtu, u.mtu)
	}
	if mtu == 0 {
		return // no NIC anywhere: no physical network to emulate
	}
	ns := m.ns(PhysSwitch)
	m.add(Resource{Kind: KindNetns, Name: ns, Sysctls: WantedSysctls(NamespaceSysctls), Owner: "physical switch"})
	m.add(Resource{Kind: KindBridge, NS: ns, Name: PhysBridge, MTU: mtu,
		MAC: StableMAC(m.s.Name, "pswitch"), Sysctls: WantedSysctls(BridgeSysctls), Owner: "physical switch"})
}

func (m *modeler) host(h *spec.Host) {
	ns := m.ns(h.Name)
	m.add(Resource{Kind: KindNetns, Name: ns, Sysctls: WantedSysctls(NamespaceSysctls), Owner: "host " + h.Name})
	for _, sw := range m.s.Switches {
		if sw.OnHost(h.Name) {
			m.add(Resource{Kind: KindBridge, NS: ns, Name: sw.Name, MTU: sw.EffectiveMTU(),
				MAC: StableMAC(m.s.Name, "switch/"+h.Name+"/"+sw.Name), Sysctls: WantedSysctls(BridgeSysctls),
				Owner: "switch " + sw.Name + " on " + h.Name})
		}
	}
	for i := range h.NICs {
		m.nic(h, &h.NICs[i])
	}
}

func (m *modeler) nic(h *spec.Host, n *spec.NIC) {
	ns, phys := m.ns(h.Name), m.ns(PhysSwitch)
	owner := "nic " + h.Name + "/" + n.Name
	mtu := m.nicMTU(h, n)
	a := End{NS: ns, Name: n.Name, MAC: StableMAC(m.s.Name, "nic/"+h.Name+"/"+n.Name), MTU: mtu}
	if sw := m.uplinkOf(h.Name, n.Name); sw != nil {
		a.Master = sw.Name
		a.Isolated = len(attachedUplinks(sw, h.Name)) > 1
	}
	b := End{NS: phys, Name: physPortName(h.Name, n.Name), MAC: StableMAC(m.s.Name, "pport/"+h.Name+"/"+n.Name), MTU: mtu, Master: PhysBridge}
	m.add(Resource{Kind: KindVeth, A: a, B: b, Owner: owner})
	if n.IP != "" {
		m.add(Resource{Kind: KindAddr, NS: ns, Link: n.Name, CIDR: n.IP, Owner: owner})
	}
	// The line rate holds in both directions: host to switch on the NIC,
	// switch to host on the switch's port.
	rate := wireRate(n.Speed) / 8 * 8 // the kernel keeps bytes per second
	m.add(Resource{Kind: KindLineRate, NS: ns, Link: a.Name, Rate: rate, Burst: ClassBurst(rate), Owner: owner + " transmit"})
	m.add(Resource{Kind: KindLineRate, NS: phys, Link: b.Name, Rate: rate, Burst: ClassBurst(rate), Owner: owner + " receive"})
}

// ClassBurst is the bucket of an HTB class whose ceil is ceil bit/s, in
// bytes: 2 ms at the ceil, and never less than one whole 64 KiB GSO frame
// and some. The average rate is unchanged.
//
// A GSO frame: tc's default (rate/HZ + MTU) is under 3 KB with the kernel's
// nanosecond HZ, so each 64 KiB TCP frame left its class in debt for the
// frame's wire time and whatever came next in that class's FIFO waited it
// out. A request behind one bulk frame on a 10 Gbit port lost 52 µs there
// although the port was 90% idle, and the debt rounding cost throughput: a
// 10 Gbit line carried 8.8 Gbit/s. A real wire would have spread that frame
// out upstream.
//
// 2 ms: a saturated class empties a bucket of one frame every half
// millisecond at 1 Gbit, and HTB wakes it with a timer each time. Every
// such timer interrupts whatever a CPU is doing for the other classes.
// With 2 ms buckets, the round-trip p99 of a high-share pool beside a
// saturating low-share one fell by a fifth (docs/ioc.md).
func ClassBurst(ceil uint64) uint64 {
	return max(gsoBucket, ceil/8*uint64(bucketTime/time.Microsecond)/1e6)
}

const (
	gsoBucket  = 64<<10 + 1600
	bucketTime = 2 * time.Millisecond
)

// uplinkOf returns the switch a NIC is an attached uplink of, or nil. An
// uplink no port group's team names stays out of the bridge.
func (m *modeler) uplinkOf(host, nic string) *spec.Switch {
	for i := range m.s.Switches {
		sw := &m.s.Switches[i]
		for _, u := range attachedUplinks(sw, host) {
			if u.NICs[host] == nic {
				return sw
			}
		}
	}
	return nil
}

// nicMTU is the NIC's own MTU, else the largest MTU of the switches it serves.
func (m *modeler) nicMTU(h *spec.Host, n *spec.NIC) int {
	if n.MTU != 0 {
		return n.MTU
	}
	mtu := spec.DefaultMTU
	for _, sw := range m.s.Switches {
		for _, u := range sw.Uplinks {
			if u.NICs[h.Name] == n.Name {
				mtu = max(mtu, sw.EffectiveMTU())
			}
		}
	}
	return mtu
}

func (m *modeler) vm(vm *spec.VM) {
	if m.attachHere && vm.Attached() {
		m.attachedVM(vm)
		return
	}
	ns := m.ns(vm.Name)
	m.add(Resource{Kind: KindNetns, Name: ns, Sysctls: WantedSysctls(NamespaceSysctls), Owner: "vm " + vm.Name})
	for i, n := range vm.NICs {
		ifname := n.LinkName(i)
		on, bridge, portMTU := n.PortGroup, "", 0
		if n.Network != "" {
			// A network's bridge exists only in a host model (networks.go).
			net, ok := m.network(n.Network)
			if !ok {
				continue
			}
			on, bridge, portMTU = "network "+n.Network, NetBridgeName(m.s.Name, n.Network), net.EffectiveMTU()
		} else {
			sw, _ := m.s.PortGroupSwitch(n.PortGroup)
			bridge, portMTU = sw.Name, sw.EffectiveMTU()
		}
		owner := fmt.Sprintf("vm %s eth%d on %s", vm.Name, i, on)
		mtu := n.MTU
		if mtu == 0 {
			mtu = portMTU
		}
		port := End{NS: m.ns(vm.Host), Name: VNICPortName(m.s.Name, vm.Name, i), MAC: StableMAC(m.s.Name, fmt.Sprintf("vport/%s/%d", vm.Name, i)),
			MTU: portMTU, Master: bridge}
		if !n.IsConnected() {
			// Cut from the switch like an unplugged cable: the VM sees no carrier.
			owner = fmt.Sprintf("vm %s eth%d (disconnected from %s)", vm.Name, i, on)
			port.Master, port.Down = "", true
		} else if m.opt.Paused.VNIC(vm.Name, &n) {
			// Paused: still a port of its switch, down.
			port.Down = true
		}
		m.add(Resource{Kind: KindVeth, Owner: owner, A: End{NS: ns, Name: ifname, MAC: m.vnicMAC(vm, i), MTU: mtu}, B: port})
		m.noteVNIC(ns+"/"+ifname, &n, false)
		if n.Offloads != nil {
			m.add(Resource{Kind: KindOffloads, NS: ns, Link: ifname, GRO: TriOf(n.Offloads.GRO), TSO: TriOf(n.Offloads.TSO), Owner: owner})
			if n.Offloads.GRO != nil {
				m.add(portSegments(port, owner))
			}
		}
		if n.IP != "" {
			m.add(Resource{Kind: KindAddr, NS: ns, Link: ifname, CIDR: n.IP, Owner: owner})
		}
		if p, err := netip.ParsePrefix(n.IP6); err == nil {
			m.add(Resource{Kind: KindAddr, NS: ns, Link: ifname, CIDR: p.String(), Owner: owner})
		}
	}
	if vm.CPUs > 0 {
		m.add(Resource{Kind: KindCgroup, Name: CgroupName(m.s.Name, vm.Name),
			CPUMilli: int(math.Round(vm.CPUs * 1000)), CPUs: m.cpuset(vm.CPUs), Owner: "vm " + vm.Name})
	}
}

// portSegments turns TSO off on a vNIC's switch port, so that the port cuts
// what it forwards to the vNIC into MTU-sized frames, as a wire does. Without
// it a vNIC's GRO setting changes nothing: a veth hands a sender's 64 KiB
// GSO frames across whole, and the kernel runs veth GRO only for frames from
// a peer without TSO. With it the VM's stack receives MTU-sized packets with
// GRO off and coalesced ones with GRO on, as behind a NIC without and with LRO.
func portSegments(port End, owner string) Resource {
	return Resource{Kind: KindOffloads, NS: port.NS, Link: port.Name, GRO: Unset, TSO: Off, Owner: owner + ", its port segmenting for the vNIC's GRO"}
}

// HasKind reports whether rs holds a resource of kind k. It reads each in
// place: a model holds tens of thousands, each of some hundred bytes.
func HasKind(rs []Resource, k Kind) bool {
	for i := range rs {
		if rs[i].Kind == k {
			return true
		}
	}
	return false
}

// ResetDroppedOffloads returns desired with a veth's defaults (GRO off, TSO
// on) asked for wherever last, the model of the previously applied spec,
// set an offload that desired leaves unset. An unset offload otherwise means
// whatever the kernel has, so a setting taken out of the spec would stay.
// Once the spec without it is applied, last no longer sets it either and
// the reset leaves the plan.
func ResetDroppedOffloads(desired, last []Resource) []Resource {
	if !HasKind(last, KindOffloads) {
		return desired // nothing to reset: most models set no offloads
	}
	index := map[string]int{}
	links := map[string]bool{} // ns/name of every veth end desired keeps
	for i, r := range desired {
		switch r.Kind {
		case KindOffloads:
			index[r.Key()] = i
		case KindVeth:
			links[r.A.NS+"/"+r.A.Name], links[r.B.NS+"/"+r.B.Name] = true, true
		}
	}
	out := append([]Resource(nil), desired...)
	for _, old := range last {
		if old.Kind != KindOffloads || !links[old.NS+"/"+old.Link] {
			continue // a link that goes takes its offloads with it
		}
		i, ok := index[old.Key()]
		if !ok {
			out = append(out, Resource{Kind: KindOffloads, NS: old.NS, Link: old.Link, Owner: old.Owner + ", offloads dropped from the spec"})
			i = len(out) - 1
			index[old.Key()] = i
		}
		if old.GRO != Unset && out[i].GRO == Unset {
			out[i].GRO = Off
		}
		if old.TSO != Unset && out[i].TSO == Unset {
			out[i].TSO = On
		}
	}
	return out
}

// cpuset spreads VMs over the machine's CPUs in spec order, so two 1-vCPU
// VMs land on different cores when there are two.
func (m *modeler) cpuset(cpus float64) string {
	// Validation bounds cpus, but a model built from an unvalidated spec
	// must not turn NaN or +Inf into a negative slice length.
	if m.opt.NumCPU <= 0 || !(cpus > 0) {
		return ""
	}
	n := m.opt.NumCPU
	if cpus < float64(n) {
		n = int(math.Ceil(cpus))
	}
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (m.nextCPU + i) % m.opt.NumCPU
	}
	m.nextCPU = (m.nextCPU + n) % m.opt.NumCPU
	return formatCPUList(ids)
}

func formatCPUList(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}

// vnicMAC is a vNIC's MAC: the spec's, else one derived from what it is.
func (m *modeler) vnicMAC(vm *spec.VM, i int) string { return VNICMAC(m.s.Name, vm, i) }

// VNICMAC is the MAC of a VM's i-th vNIC in infrastructure infra: the
// spec's, else one derived from what it is, the same wherever and
// whenever it is modelled.
func VNICMAC(infra string, vm *spec.VM, i int) string {
	if mac := vm.NICs[i].MAC; mac != "" {
		return strings.ToLower(mac)
	}
	return StableMAC(infra, fmt.Sprintf("vnic/%s/%d", vm.Name, i))
}

// hostPortMAC is the MAC of a host port's own end.
func (m *modeler) hostPortMAC(host, name string) string {
	return StableMAC(m.s.Name, "hostport/"+host+"/"+name)
}

func (m *modeler) hostPort(i int) {
	hp := m.s.HostPorts[i]
	sw, _ := m.s.PortGroupSwitch(hp.PortGroup)
	ns, name := m.ns(hp.Host), m.s.HostPortName(i)
	owner := fmt.Sprintf("hostport %s/%s on %s", hp.Host, name, hp.PortGroup)
	mtu := hp.MTU
	if mtu == 0 {
		mtu = sw.EffectiveMTU()
	}
	m.add(Resource{Kind: KindVeth, Owner: owner,
		A: End{NS: ns, Name: name, MAC: m.hostPortMAC(hp.Host, name), MTU: mtu},
		B: End{NS: ns, Name: hostPortPeerName(name), MAC: StableMAC(m.s.Name, "hpport/"+hp.Host+"/"+name), MTU: sw.EffectiveMTU(), Master: sw.Name,
			Down: m.opt.Paused.HostPort(hp.PortGroup)}})
	m.add(Resource{Kind: KindAddr, NS: ns, Link: name, CIDR: hp.IP, Owner: owner})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// DroppedDevices are the devices (KindDevice) of last, the model of the
// previously applied spec, that next no longer has: a VM's TAP, when the
// VM goes, whose record its dataplane removes once the TAP is gone.
func DroppedDevices(next, last []Resource) []Resource {
	if !HasKind(last, KindDevice) {
		return nil
	}
	kept := map[string]bool{}
	for _, r := range next {
		if r.Kind == KindDevice {
			kept[r.Key()] = true
		}
	}
	var out []Resource
	for _, r := range last {
		if r.Kind == KindDevice && !kept[r.Key()] {
			out = append(out, r)
		}
	}
	return out
}
