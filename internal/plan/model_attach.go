package plan

import (
	"fmt"

	"github.com/vnet-project/vnet/internal/spec"
)

// vnicFacts is what the model notes of a vNIC's veth for its shapers.
type vnicFacts struct {
	own       *spec.Shaping // the vNIC's own shaper, nil when it has none
	portgroup string
	connected bool
	// portFirst: the veth's first end is the switch port, the second the
	// VM's (an attached namespace's vNIC, which observation finds from the
	// port's side).
	portFirst bool
}

// noteVNIC records what the shapers need of the vNIC whose veth's first
// end is key.
func (m *modeler) noteVNIC(key string, n *spec.VNIC, portFirst bool) {
	if n.Shaping == nil && !portFirst {
		return
	}
	if m.vnics == nil {
		m.vnics = map[string]vnicFacts{}
	}
	m.vnics[key] = vnicFacts{own: n.Shaping, portgroup: n.PortGroup, connected: n.IsConnected(), portFirst: portFirst}
}

// attachedVM models, on one machine, a VM that brings its vNICs: a
// container's namespace gets each vNIC's VM end (named by attach.ifname,
// else ethN), with its MAC, MTU and address, and its switch port stays in
// the lab host's namespace as any VM's does; a TAP moves into the lab
// host's namespace and is the switch port itself (KindDevice; the dataplane
// moves it in from the machine's namespace and back).
// vnet makes no namespace or cgroup for such a VM.
//
// The pair names the port first: the port is in a namespace vnet owns,
// which observation reads whole, and the VM's end is found from it, in a
// namespace vnet does not own (as on a real host, model_host.go). Its owner
// names the infrastructure, which is how observation tells the ends in a
// foreign namespace that are this infrastructure's.
func (m *modeler) attachedVM(vm *spec.VM) {
	hostNS := m.ns(vm.Host)
	for i := range vm.NICs {
		n := &vm.NICs[i]
		bridge, portMTU, on := m.portOf(n)
		if bridge == "" {
			continue
		}
		owner := fmt.Sprintf("vm %s eth%d on %s", vm.Name, i, on)
		port := End{NS: hostNS, Name: VNICPortName(m.s.Name, vm.Name, i), MAC: StableMAC(m.s.Name, fmt.Sprintf("vport/%s/%d", vm.Name, i)),
			MTU: portMTU, Master: bridge}
		if !n.IsConnected() {
			owner = fmt.Sprintf("vm %s eth%d (disconnected from %s)", vm.Name, i, on)
			port.Master, port.Down = "", true
		}
		if tap := n.TapName(); tap != "" {
			m.add(Resource{Kind: KindDevice, NS: hostNS, Name: tap, Link: port.Master, MTU: portMTU,
				Owner: DeviceOwner(m.s.Name, owner+", its TAP")})
			if m.tapPorts == nil {
				m.tapPorts = map[string]string{}
			}
			m.tapPorts[hostNS+"/"+port.Name] = tap
			m.tapShaper(hostNS, tap, n, owner)
			continue
		}
		ns, ifname := n.NetnsName(), n.LinkName(i)
		mtu := n.MTU
		if mtu == 0 {
			mtu = portMTU
		}
		m.add(Resource{Kind: KindVeth, Owner: HostOwner(m.s.Name, owner), A: port,
			B: End{NS: ns, Name: ifname, MAC: m.vnicMAC(vm, i), MTU: mtu}})
		m.noteVNIC(port.NS+"/"+port.Name, n, true)
		if n.IP != "" {
			m.add(Resource{Kind: KindAddr, NS: ns, Link: ifname, CIDR: n.IP, Owner: owner})
		}
		if n.IP6 != "" {
			m.add(Resource{Kind: KindAddr, NS: ns, Link: ifname, CIDR: n.IP6, Owner: owner})
		}
	}
}

// portOf is the bridge a vNIC's port is on in its host's namespace, its
// MTU, and what it is on for owners ("pg-web", "network a-web"); an empty
// bridge for a network the spec lacks.
func (m *modeler) portOf(n *spec.VNIC) (bridge string, mtu int, on string) {
	if n.Network != "" {
		net, ok := m.network(n.Network)
		if !ok {
			return "", 0, ""
		}
		return NetBridgeName(m.s.Name, n.Network), net.EffectiveMTU(), "network " + n.Network
	}
	sw, _ := m.s.PortGroupSwitch(n.PortGroup)
	return sw.Name, sw.EffectiveMTU(), n.PortGroup
}

// VNICPlace is where the i-th vNIC of a VM is seen from inside the VM: its
// namespace and link on this machine (the lab). A container's vNIC is in
// the container's namespace under attach.ifname; a TAP is the guest's, and
// vnet sees only the switch's side of it: its own name in the host's
// namespace, with tx and rx the other way round (tap reports true).
func VNICPlace(infra string, vm *spec.VM, i int) (ns, link string, tap bool) {
	n := &vm.NICs[i]
	if t := n.TapName(); t != "" {
		return NSName(infra, vm.Host), t, true
	}
	if netns := n.NetnsName(); netns != "" {
		return netns, n.LinkName(i), false
	}
	return NSName(infra, vm.Name), n.LinkName(i), false
}

// tapShaper shapes what the switch delivers to a TAP's guest: a shaper on
// the TAP, the switch's end of the vNIC (the vNIC's own ingress shaper,
// else its port group's). What the guest sends is the guest's: a TAP has
// no end of vnet's to shape it on.
func (m *modeler) tapShaper(ns, tap string, n *spec.VNIC, owner string) {
	var s *spec.Shaper
	if n.Shaping != nil {
		s = n.Shaping.Ingress
	}
	if pg, _, ok := m.s.PortGroup(n.PortGroup); s == nil && ok && pg.Shaping != nil && n.IsConnected() {
		s = pg.Shaping.Ingress
	}
	if s != nil {
		m.add(shaperOn(ns, tap, s, owner+" ingress shaping"))
	}
}

// onTaps puts what the model hangs on the switch ports of vNICs that are
// TAPs (port security, steering) on the TAPs themselves.
func (m *modeler) onTaps() {
	if len(m.tapPorts) == 0 {
		return
	}
	for i := range m.out {
		r := &m.out[i]
		switch r.Kind {
		case KindPortSec, KindPortBPF, KindSteer, KindOffloads:
			if tap, ok := m.tapPorts[r.NS+"/"+r.Link]; ok {
				r.Link = tap
			}
		}
	}
}

// SwitchPort is the name of the switch port of a VM's i-th vNIC in its
// host's namespace: the TAP of a guest that brings one, else the port vnet
// makes (VNICPortName).
func SwitchPort(infra string, vm *spec.VM, i int) string {
	if tap := vm.NICs[i].TapName(); tap != "" {
		return tap
	}
	return VNICPortName(infra, vm.Name, i)
}
