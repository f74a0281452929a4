package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/units"
)

// CurrentNS names, in a host model, the namespace the agent runs in: on a
// real hypervisor that is where its switches and tunnels belong, not in a
// namespace of vnet's own.
const CurrentNS = "@host"

// VXLANPort is the UDP port of every tunnel (IANA's).
const VXLANPort = 4789

// ZeroMAC is the forwarding entry that floods: broadcast, multicast and
// unknown unicast go to every remote endpoint that has one (head-end
// replication).
const ZeroMAC = "00:00:00:00:00:00"

// HostOwner is the owner label of a host-level object in a host model. It
// names the infrastructure, since the namespace it lives in is shared with
// the machine and other infrastructures (see OwnedBy).
func HostOwner(infra, owner string) string { return infra + ": " + owner }

// OwnedBy reports whether a link alias in a host namespace marks an object
// of the infrastructure: its own alias (HostOwner), or the peer alias of a
// switch port whose vNIC is in one of the infrastructure's namespaces.
func OwnedBy(alias, infra string) bool {
	rest, ok := strings.CutPrefix(alias, AliasPrefix)
	if !ok {
		return false
	}
	if peer, ok := strings.CutPrefix(rest, "peer="); ok {
		return strings.HasPrefix(peer, InfraNSPrefix(infra))
	}
	return strings.HasPrefix(rest, infra+": ")
}

// HostBridgeName is the bridge of a switch on a real host. The switch's
// own name could clash with the machine's interfaces or another
// infrastructure's switch, so it is a short hash of both.
func HostBridgeName(infra, sw string) string { return hashName("vs", infra+"/"+sw) }

// VTEPName is the tunnel endpoint of a switch on a host.
func VTEPName(infra, sw string) string { return hashName("vx", infra+"/"+sw) }

// SwitchVNI is the switch's VXLAN network identifier: the spec's, else one
// derived from the infrastructure and switch names, the same on every host.
func SwitchVNI(infra string, sw *spec.Switch) uint32 {
	if sw.VNI != 0 {
		return uint32(sw.VNI)
	}
	sum := sha256.Sum256([]byte("vni/" + infra + "/" + sw.Name))
	return binary.BigEndian.Uint32(sum[:4])%spec.MaxVNI + 1
}

// TunnelOverhead is what VXLAN adds to each frame on the underlay: outer
// Ethernet is not counted (the MTU excludes it), outer IP, UDP, VXLAN
// header and the inner Ethernet header are.
func TunnelOverhead(underlay string) int {
	if a, err := netip.ParseAddr(underlay); err == nil && a.Is6() && !a.Is4In6() {
		return 70
	}
	return 50
}

// Tunneled reports whether a switch spans hosts over VXLAN: it exists on
// more than one host, all of which have an underlay address, and none of
// its uplinks is a real NIC. Real uplinks say the hosts share a physical
// network, which carries the switch; a tunnel beside it would be a second
// path between the same bridges, a loop for every broadcast.
func Tunneled(s *spec.Spec, sw *spec.Switch) bool {
	hosts := sw.SwitchHosts()
	if len(hosts) < 2 || s.HasRealUplink(sw) {
		return false
	}
	for _, hn := range hosts {
		if h, ok := s.Host(hn); !ok || h.Underlay == "" {
			return false
		}
	}
	return true
}

// PlacesOn reports whether the spec puts anything on the host: the host
// itself, a switch or a VM.
func PlacesOn(s *spec.Spec, host string) bool {
	_, ok := s.Host(host)
	return ok
}

// CheckHostMTU fails when a tunneled switch on the host carries frames
// larger than the underlay can, VXLAN's overhead included. underlayMTU is
// the MTU of the link holding the host's underlay address (0: unknown, not
// checked).
func CheckHostMTU(s *spec.Spec, host string, underlayMTU int) error {
	h, ok := s.Host(host)
	if !ok || underlayMTU == 0 {
		return nil
	}
	for i := range s.Switches {
		sw := &s.Switches[i]
		if !sw.OnHost(host) || !Tunneled(s, sw) {
			continue
		}
		over := TunnelOverhead(h.Underlay)
		if sw.EffectiveMTU()+over > underlayMTU {
			return fmt.Errorf("switches[%d].mtu: switch %s's MTU %d needs %d on the underlay (VXLAN adds %d), but host %s's underlay %s has MTU %d: set the switch's mtu to %d or raise the underlay's",
				i, sw.Name, sw.EffectiveMTU(), sw.EffectiveMTU()+over, over, host, h.Underlay, underlayMTU, underlayMTU-over)
		}
	}
	return nil
}

// onlyHostVMs is the host whose VMs alone a host's model models of the
// lab's; "" models them all, which tests compare with.
var onlyHostVMs = func(host string) string { return host }

// hostModel is one host's part of the spec as its agent realizes it on a
// real machine. It starts from the lab's model of the spec (without the
// other hosts' VMs, of which it would keep nothing) and keeps what belongs
// to the host, moved to the host's namespace: the switches'
// bridges (under HostBridgeName) and the ports of its VMs' vNICs there, its
// VMs' namespaces and cgroups as in the lab. What the lab emulates of the
// physical network (the physical switch, NICs as veths, their line rates,
// Network I/O Control and teaming on them) is the machine's own and is
// left out. A host port is a veth pair in the host's namespace: its own end
// with its address, where the machine's system traffic (vMotion, storage,
// networks' tunnels) starts, the other a port of its switch's bridge, so
// that traffic leaves by the switch's real uplinks in its pool, shaped and
// teamed like a VM's. A NIC that names a real device
// (spec.NIC.Device) and is an uplink of a switch is that device, made a
// port of the switch's bridge, with the NIC's line rate and Network I/O
// Control on it, and with several such uplinks the lab's steering on the
// devices and the switch ports (model_hostteam.go). A vNIC attached to a
// TAP is that TAP as the switch port; one attached to a namespace is the lab's veth with its VM end in that
// namespace. A switch that spans hosts (Tunneled) gets a tunnel endpoint in
// its bridge, with a flooding entry per remote host and an entry per remote
// vNIC towards its host.
func hostModel(s *spec.Spec, opt Options) []Resource {
	host := opt.Host
	h, ok := s.Host(host)
	if !ok {
		return nil
	}
	here := opt.HostNS
	if here == "" {
		here = CurrentNS
	}
	labNS := NSName(s.Name, host)
	vms := map[string]bool{}            // namespaces of the host's VMs that vnet makes
	attached := map[string]*spec.VNIC{} // lab vNIC ns/ethN -> its attachment
	for _, vm := range s.VMs {
		if vm.Host != host {
			continue
		}
		ns := NSName(s.Name, vm.Name)
		if !vm.Attached() {
			vms[ns] = true
			continue
		}
		for i := range vm.NICs {
			attached[ns+"/"+vm.NICs[i].LinkName(i)] = &vm.NICs[i]
		}
	}
	bridges := map[string]string{} // switch name -> bridge name
	for _, sw := range s.Switches {
		if sw.OnHost(host) {
			bridges[sw.Name] = HostBridgeName(s.Name, sw.Name)
		}
	}
	for _, n := range s.Networks {
		nb := NetBridgeName(s.Name, n.Name) // already the host's name for it
		bridges[nb] = nb
	}
	hl := newHostLab(s, opt) // teaming over the real uplinks: model_hostteam.go
	devices, labSpec, lab := hl.devices, hl.spec, hl.labOptions(opt)
	lm := &modeler{s: labSpec}
	var out []Resource
	for _, n := range h.NICs {
		if sw := lm.uplinkOf(host, n.Name); n.IsDevice() && sw != nil {
			out = append(out, Resource{Kind: KindDevice, NS: here, Name: n.Device, Link: bridges[sw.Name], MTU: n.MTU,
				Isolate: hl.teamed(host, n.Name), Owner: DeviceOwner(s.Name, "nic "+host+"/"+n.Name+", uplink of "+sw.Name)})
		}
	}
	hostPorts := hostPortsOn(s, host)
	ports := map[string]string{}  // vNIC switch ports on the host: lab name -> name on the host
	vnicNS := map[string]string{} // VM namespaces of attached vNICs -> the namespace they are in
	var sec []Resource            // the lab's port policies, placed once every port is known
	labOut := (&modeler{s: labSpec, opt: lab, onlyHost: onlyHostVMs(host)}).lab(false)
	out = slices.Grow(out, len(labOut)+8*len(s.Networks))
	for _, r := range labOut {
		switch r.Kind {
		case KindPortSec, KindFirewall, KindPortBPF:
			sec = append(sec, r)
			continue
		case KindNetns:
			if !vms[r.Name] {
				continue
			}
		case KindBridge:
			if r.NS != labNS {
				continue
			}
			r.NS, r.Name, r.Owner = here, bridges[r.Name], HostOwner(s.Name, r.Owner)
		case KindVeth:
			if n, ok := attached[r.A.NS+"/"+r.A.Name]; ok {
				rs, port := attachedVNIC(s.Name, here, bridges, r, n)
				ports[r.B.Name] = port
				vnicNS[r.A.NS] = n.NetnsName()
				out = append(out, rs...)
				continue
			}
			if on, ok := hostPorts[r.A.Name]; ok && r.A.NS == labNS {
				out = append(out, hostPort(s.Name, here, bridges, r, on, ports))
				continue
			}
			if !vms[r.A.NS] {
				continue // the host's emulated NICs
			}
			r.B.NS = here
			if r.B.Master != "" {
				r.B.Master = bridges[r.B.Master]
			}
			ports[r.B.Name] = r.B.Name
		case KindCgroup:
			if !vms[r.Namespace()] {
				continue
			}
		case KindLineRate, KindPool, KindFilter:
			dev, ok := devices[r.Link]
			if r.NS != labNS || !ok {
				continue // the emulated NICs and the physical switch
			}
			r.NS, r.Link, r.Owner = here, dev, HostOwner(s.Name, r.Owner)
		case KindLB:
			if r.NS != labNS || ports[r.Link] == "" {
				continue
			}
			r.NS, r.Link, r.Owner = here, ports[r.Link], HostOwner(s.Name, r.Owner)
		case KindOffloads, KindAddr, KindShaper:
			switch {
			case vms[r.NS]:
			case vnicNS[r.NS] != "":
				r.NS = vnicNS[r.NS]
			case r.NS == labNS && ports[r.Link] != "":
				r.NS, r.Link = here, ports[r.Link]
			default:
				continue
			}
		case KindSteer:
			var kept bool
			if r, kept = hl.steer(r); !kept {
				continue
			}
		default:
			continue
		}
		out = append(out, r)
	}
	out = append(out, hostSecurity(s.Name, host, here, labNS, ports, sec)...)
	out = append(out, tunnels(s, host, here, bridges)...)
	return appendNetworks(out, s, host, here)
}

// hostPortNames are the names of a host port's two ends on a real host.
type hostPortNames struct{ end, port string }

// hostPortsOn are the host's host ports by their interface names in the
// lab, each with its ends' names on the host.
func hostPortsOn(s *spec.Spec, host string) map[string]hostPortNames {
	out := map[string]hostPortNames{}
	for i, hp := range s.HostPorts {
		if hp.Host == host {
			name := s.HostPortName(i)
			out[name] = hostPortNames{end: HostPortLink(s, i), port: HostPortSwitchPortOnHost(s.Name, host, name)}
		}
	}
	return out
}

// hostPort is a host port from the lab's veth r: both ends in the host's
// namespace, one a port of its switch's bridge. The MACs and owner are
// the lab's; the ends take their names on the host (on), which tell the
// infrastructures apart in the machine's namespace. ports learns both
// ends' names, so the port's address, shapers and port security follow
// it.
func hostPort(infra, here string, bridges map[string]string, r Resource, on hostPortNames, ports map[string]string) Resource {
	ports[r.A.Name], ports[r.B.Name] = on.end, on.port
	r.A.NS, r.B.NS, r.B.Master = here, here, bridges[r.B.Master]
	r.A.Name, r.B.Name = on.end, on.port
	r.Owner = HostOwner(infra, r.Owner)
	return r
}

// attachedVNIC realizes a vNIC the VM brings, from the lab's veth r: a TAP
// becomes the switch port itself; a namespace gets the lab's VM end, the
// switch port staying in the host's namespace. It returns the resources and
// the switch port's name on the host.
func attachedVNIC(infra, here string, bridges map[string]string, r Resource, n *spec.VNIC) ([]Resource, string) {
	master := ""
	if r.B.Master != "" {
		master = bridges[r.B.Master]
	}
	if tap := n.TapName(); tap != "" {
		if r.B.Down {
			// Paused: vnet sets no device it did not make down, so the
			// TAP leaves its bridge until it is resumed.
			master = ""
		}
		return []Resource{{Kind: KindDevice, NS: here, Name: tap, Link: master, MTU: r.B.MTU,
			Owner: DeviceOwner(infra, r.Owner+", its TAP")}}, tap
	}
	// The port names the pair: it is in the host's namespace, which is
	// observed by alias, while the VM's end is in a namespace vnet does
	// not own.
	port, vm := r.B, r.A
	port.NS, port.Master = here, master
	vm.NS = n.NetnsName()
	return []Resource{{Kind: KindVeth, A: port, B: vm, Owner: HostOwner(infra, r.Owner)}}, port.Name
}

// withDeviceSpeeds returns the spec with the host's real NICs that give no
// speed at the speed their device reports, so that line rates and Network
// I/O Control are worked out from it as from a speed in the spec.
func withDeviceSpeeds(s *spec.Spec, host string, speeds map[string]uint64) *spec.Spec {
	h, ok := s.Host(host)
	if !ok {
		return s
	}
	out := *s
	out.Hosts = append([]spec.Host(nil), s.Hosts...)
	for i := range out.Hosts {
		if out.Hosts[i].Name != h.Name {
			continue
		}
		nics := append([]spec.NIC(nil), h.NICs...)
		for j := range nics {
			if nics[j].IsDevice() && nics[j].Speed == 0 {
				nics[j].Speed = units.Rate(speeds[nics[j].Device])
			}
		}
		out.Hosts[i].NICs = nics
	}
	return &out
}

// DeviceOwner is the owner label of an existing link vnet uses (KindDevice).
// Its alias says so, so that observation tells it from the links vnet
// makes, whatever its type.
func DeviceOwner(infra, what string) string { return HostOwner(infra, deviceMark+what) }

const deviceMark = "device of "

// IsDeviceAlias reports whether a link's alias marks an existing link that
// an infrastructure uses (DeviceOwner).
func IsDeviceAlias(alias string) bool {
	rest, ok := strings.CutPrefix(alias, AliasPrefix)
	if !ok {
		return false
	}
	_, label, ok := strings.Cut(rest, ": ")
	return ok && strings.HasPrefix(label, deviceMark)
}

// tunnels are the tunnel endpoints of the host's switches that span hosts,
// and their forwarding entries.
func tunnels(s *spec.Spec, host, here string, bridges map[string]string) []Resource {
	h, _ := s.Host(host)
	var out []Resource
	for i := range s.Switches {
		sw := &s.Switches[i]
		if !sw.OnHost(host) || !Tunneled(s, sw) {
			continue
		}
		vtep := VTEPName(s.Name, sw.Name)
		owner := HostOwner(s.Name, "tunnel of switch "+sw.Name+" on "+host)
		out = append(out, Resource{Kind: KindVxlan, NS: here, Name: vtep, Link: bridges[sw.Name],
			MAC: StableMAC(s.Name, "vtep/"+host+"/"+sw.Name), MTU: sw.EffectiveMTU(),
			VNI: SwitchVNI(s.Name, sw), Local: h.Underlay, Port: VXLANPort, Owner: owner})
		remote := map[string]string{} // host -> underlay
		for _, hn := range sw.SwitchHosts() {
			if hn == host {
				continue
			}
			rh, _ := s.Host(hn)
			remote[hn] = rh.Underlay
			out = append(out, Resource{Kind: KindFDB, NS: here, Link: vtep, MAC: ZeroMAC, Remote: rh.Underlay,
				Owner: owner + ": flood to " + hn})
		}
		m := &modeler{s: s}
		for vi := range s.VMs {
			vm := &s.VMs[vi]
			under, ok := remote[vm.Host]
			if !ok {
				continue
			}
			for ni, n := range vm.NICs {
				if pgSw, _ := s.PortGroupSwitch(n.PortGroup); pgSw == nil || pgSw.Name != sw.Name || !n.IsConnected() {
					continue
				}
				if n.TapName() != "" && n.MAC == "" {
					continue // its guest chose its MAC: the flooding entries reach it
				}
				out = append(out, Resource{Kind: KindFDB, NS: here, Link: vtep, MAC: m.vnicMAC(vm, ni), Remote: under,
					Owner: fmt.Sprintf("%s: vm %s eth%d on %s", owner, vm.Name, ni, vm.Host)})
			}
		}
	}
	return out
}
