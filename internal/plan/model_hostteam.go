package plan

import (
	"maps"
	"slices"

	"github.com/vnet-project/vnet/internal/spec"
)

// On a real host a switch's uplinks are the host's real NICs (devices),
// and its teams are steered as in the lab: the same steering programs and
// team-wide limit splits, on the devices and the switch ports in the host's
// namespace. The host model is made from the lab's model of a lab spec in
// which each NIC of the host that names no device is no uplink: it stands
// for nothing on a real host, so it neither takes ports nor a part of a
// limit. The names in the lab's resources (the host's lab namespace, NIC
// names, lab switch ports) are then mapped to the host's.

// hostLab is the lab's view of one host's part of the spec.
type hostLab struct {
	spec    *spec.Spec
	labNS   string            // the host's namespace in the lab model
	here    string            // the namespace the host's objects live in
	devices map[string]string // NIC name -> device, for the attached uplinks
	ports   map[string]string // lab switch port of a vNIC or host port on the host -> its name on the host
}

func newHostLab(s *spec.Spec, opt Options) *hostLab {
	host := opt.Host
	here := opt.HostNS
	if here == "" {
		here = CurrentNS
	}
	hl := &hostLab{spec: realUplinksOnly(withDeviceSpeeds(s, host, opt.DeviceSpeeds), host),
		labNS: NSName(s.Name, host), here: here, devices: map[string]string{}, ports: map[string]string{}}
	lm := &modeler{s: hl.spec}
	if h, ok := s.Host(host); ok {
		for _, n := range h.NICs {
			if n.IsDevice() && lm.uplinkOf(host, n.Name) != nil {
				hl.devices[n.Name] = n.Device
			}
		}
	}
	for i, hp := range s.HostPorts {
		if hp.Host == host {
			name := s.HostPortName(i)
			hl.ports[hostPortPeerName(name)] = HostPortSwitchPortOnHost(s.Name, host, name)
		}
	}
	for _, vm := range s.VMs {
		if vm.Host != host {
			continue
		}
		for i, n := range vm.NICs {
			port := VNICPortName(s.Name, vm.Name, i)
			if tap := n.TapName(); tap != "" {
				hl.ports[port] = tap
			} else {
				hl.ports[port] = port
			}
		}
	}
	return hl
}

// realUplinksOnly returns the spec with the host's NICs that name no
// device taken out of the switches' uplinks. A switch stays on the host
// all the same (its bridge and the VMs' ports on it).
func realUplinksOnly(s *spec.Spec, host string) *spec.Spec {
	h, ok := s.Host(host)
	if !ok {
		return s
	}
	out := *s
	out.Switches = append([]spec.Switch(nil), s.Switches...)
	for i := range out.Switches {
		sw := &out.Switches[i]
		onHost := sw.OnHost(host)
		var ups []spec.Uplink
		for _, u := range sw.Uplinks {
			if nic, ok := h.NIC(u.NICs[host]); ok && !nic.IsDevice() {
				u.NICs = maps.Clone(u.NICs)
				delete(u.NICs, host)
			}
			ups = append(ups, u)
		}
		sw.Uplinks = ups
		if onHost && !sw.OnHost(host) {
			sw.Hosts = append(slices.Clone(sw.Hosts), host)
		}
	}
	return &out
}

// labOptions are the options of the lab's model: the runtime state of the
// host's teams, with team-wide limit splits keyed by the lab's names.
func (hl *hostLab) labOptions(opt Options) Options {
	lab := opt
	lab.Host, lab.HostNS, lab.DeviceSpeeds = "", "", nil
	if len(opt.PoolCeils) == 0 {
		return lab
	}
	lab.PoolCeils = map[string]uint64{}
	for _, u := range IOCUplinks(hl.spec) {
		dev, ok := hl.devices[u.NIC]
		if u.NS != hl.labNS || !ok {
			continue
		}
		for _, c := range u.Classes {
			if ceil, ok := opt.PoolCeils[LimitKey(hl.here, dev, c.Minor)]; ok {
				lab.PoolCeils[LimitKey(hl.labNS, u.NIC, c.Minor)] = ceil
			}
		}
	}
	return lab
}

// steer maps a steering program of the lab's model to the host: on a
// device or a switch port of a vNIC or host port, redirecting to devices.
// It reports false for one on a link the host does not make.
func (hl *hostLab) steer(r Resource) (Resource, bool) {
	if r.NS != hl.labNS {
		return r, false
	}
	link, ok := hl.devices[r.Link]
	if !ok {
		if link, ok = hl.ports[r.Link]; !ok {
			return r, false
		}
	}
	st, err := ParseSteer(r.Match)
	if err != nil {
		return r, false
	}
	to := make([]string, len(st.To))
	for i, nic := range st.To {
		to[i] = hl.devices[nic]
	}
	st.To = to
	r.NS, r.Link, r.Match, r.Owner = hl.here, link, st.String(), HostOwner(hl.spec.Name, r.Owner)
	return r, true
}

// teamed reports whether the host's switch that a NIC is an uplink of has
// several uplinks attached: its device is then an isolated bridge port.
func (hl *hostLab) teamed(host, nic string) bool {
	sw := (&modeler{s: hl.spec}).uplinkOf(host, nic)
	return sw != nil && len(attachedUplinks(sw, host)) > 1
}

// Teaming returns the teams that need steering and the pools whose limit
// several uplinks share, in the names of the model opt makes: the lab's, or
// with opt.Host that host's own (its namespace, its devices, its switch
// ports). The agent that keeps teams right works from these.
func Teaming(s *spec.Spec, opt Options) ([]HostTeam, []TeamLimit) {
	if opt.Host == "" {
		return HostTeams(s), TeamLimits(IOCUplinks(s), s)
	}
	hl := newHostLab(s, opt)
	var teams []HostTeam
	for _, t := range HostTeams(hl.spec) {
		if t.Host != opt.Host {
			continue
		}
		t.NS = hl.here
		nics := map[string]string{}
		for u, nic := range t.NIC {
			nics[u] = hl.devices[nic]
		}
		t.NIC = nics
		var ports []TeamPort
		for _, p := range t.Ports {
			if link, ok := hl.ports[p.Link]; ok {
				p.Link = link
				ports = append(ports, p)
			}
		}
		t.Ports = ports
		teams = append(teams, t)
	}
	var limits []TeamLimit
	for _, tl := range TeamLimits(IOCUplinks(hl.spec), hl.spec) {
		if tl.Host != opt.Host {
			continue
		}
		tl.NS = hl.here
		nics := make([]string, len(tl.NICs))
		for i, nic := range tl.NICs {
			nics[i] = hl.devices[nic]
		}
		tl.NICs = nics
		limits = append(limits, tl)
	}
	return teams, limits
}
