package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/vnet-project/vnet/internal/spec"
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
// more than one host, all of which have an underlay address.
func Tunneled(s *spec.Spec, sw *spec.Switch) bool {
	hosts := sw.SwitchHosts()
	if len(hosts) < 2 {
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

// hostModel is one host's part of the spec as its agent realizes it on a
// real machine. It starts from the lab's model of the whole spec and keeps
// what belongs to the host, moved to the host's namespace: the switches'
// bridges (under HostBridgeName) and the ports of its VMs' vNICs there, its
// VMs' namespaces and cgroups as in the lab. What the lab emulates of the
// physical network (the physical switch, NICs as veths, their line rates,
// Network I/O Control and teaming on them) is the machine's own and is
// left out, and so are host ports. A switch that spans hosts (Tunneled)
// gets a tunnel endpoint in its bridge, with a flooding entry per remote
// host and an entry per remote vNIC towards its host.
func hostModel(s *spec.Spec, opt Options) []Resource {
	host := opt.Host
	if _, ok := s.Host(host); !ok {
		return nil
	}
	here := opt.HostNS
	if here == "" {
		here = CurrentNS
	}
	labNS := NSName(s.Name, host)
	vms := map[string]bool{}
	for _, vm := range s.VMs {
		if vm.Host == host {
			vms[NSName(s.Name, vm.Name)] = true
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
	lab := opt
	lab.Host, lab.HostNS = "", ""
	lab.Teams, lab.Down, lab.PoolCeils = nil, nil, nil
	ports := map[string]bool{} // vNIC switch ports on the host
	var out []Resource
	for _, r := range Model(s, lab) {
		switch r.Kind {
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
			if !vms[r.A.NS] {
				continue // the host's NICs and host ports
			}
			r.B.NS = here
			if r.B.Master != "" {
				r.B.Master = bridges[r.B.Master]
			}
			ports[r.B.Name] = true
		case KindCgroup:
			if !vms[r.Namespace()] {
				continue
			}
		case KindOffloads, KindAddr, KindShaper:
			switch {
			case vms[r.NS]:
			case r.NS == labNS && ports[r.Link]:
				r.NS = here
			default:
				continue
			}
		default:
			continue // line rates, pools, filters and steering of the emulated NICs
		}
		out = append(out, r)
	}
	out = append(out, tunnels(s, host, here, bridges)...)
	return append(out, networks(s, host, here)...)
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
				out = append(out, Resource{Kind: KindFDB, NS: here, Link: vtep, MAC: m.vnicMAC(vm, ni), Remote: under,
					Owner: fmt.Sprintf("%s: vm %s eth%d on %s", owner, vm.Name, ni, vm.Host)})
			}
		}
	}
	return out
}
