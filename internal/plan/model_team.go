package plan

import (
	"fmt"
	"sort"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/teaming"
)

// attachedUplinks are the switch's uplinks that a host puts in its bridge:
// those with a NIC on the host that some team of the switch names, in the
// switch's order.
func attachedUplinks(sw *spec.Switch, host string) []spec.Uplink {
	used := sw.TeamUplinks()
	var out []spec.Uplink
	for _, u := range sw.Uplinks {
		if _, ok := u.NICs[host]; ok && used[u.Name] {
			out = append(out, u)
		}
	}
	return out
}

// TeamPort is a switch port on a host, as teaming sees it.
type TeamPort struct {
	ID   string `json:"id"` // "vm/eth0" or "host/vmk0": stable, unique in the infra
	MAC  string `json:"mac"`
	Link string `json:"link"` // the switch's end, in the host
}

// PortID names a vNIC's or host port's switch port in team assignments.
func PortID(node, ifname string) string { return node + "/" + ifname }

// HostTeam is one port group's team on one host where its switch attaches
// several uplinks: what the planner steers, the agent watches and status
// reports.
type HostTeam struct {
	Host, Switch, PortGroup, NS string
	Team                        spec.Team         // narrowed to the uplinks attached on this host
	Uplinks                     []string          // the switch's attached uplinks on this host, in order
	NIC                         map[string]string // uplink -> NIC
	Line                        map[string]uint64 // uplink -> line rate, bit/s
	Ports                       []TeamPort
}

// HostTeams lists the teams that need steering, switch by switch and host
// by host, port groups in spec order.
func HostTeams(s *spec.Spec) []HostTeam {
	var out []HostTeam
	for si := range s.Switches {
		sw := &s.Switches[si]
		for _, host := range sw.SwitchHosts() {
			uplinks := attachedUplinks(sw, host)
			if len(uplinks) < 2 {
				continue
			}
			h, _ := s.Host(host)
			base := HostTeam{Host: host, Switch: sw.Name, NS: NSName(s.Name, host), NIC: map[string]string{}, Line: map[string]uint64{}}
			for _, u := range uplinks {
				base.Uplinks = append(base.Uplinks, u.Name)
				base.NIC[u.Name] = u.NICs[host]
				if n, ok := h.NIC(u.NICs[host]); ok {
					base.Line[u.Name] = wireRate(n.Speed)
				}
			}
			ports := switchPorts(s, sw, host)
			for pi := range sw.PortGroups {
				pg := &sw.PortGroups[pi]
				t := base
				t.PortGroup = pg.Name
				t.Team = sw.EffectiveTeam(pg)
				t.Team.Team = onHost(t.Team.Team, t.NIC)
				t.Ports = ports[pg.Name]
				out = append(out, t)
			}
		}
	}
	return out
}

// switchPorts lists the connected ports of a switch on a host by port group.
func switchPorts(s *spec.Spec, sw *spec.Switch, host string) map[string][]TeamPort {
	m := &modeler{s: s}
	out := map[string][]TeamPort{}
	for vi := range s.VMs {
		vm := &s.VMs[vi]
		if vm.Host != host {
			continue
		}
		for i, n := range vm.NICs {
			_, psw, _ := s.PortGroup(n.PortGroup)
			if psw != sw || !n.IsConnected() {
				continue
			}
			out[n.PortGroup] = append(out[n.PortGroup], TeamPort{ID: PortID(vm.Name, "eth"+fmt.Sprint(i)), MAC: m.vnicMAC(vm, i), Link: VNICPortName(s.Name, vm.Name, i)})
		}
	}
	for i, hp := range s.HostPorts {
		_, psw, _ := s.PortGroup(hp.PortGroup)
		if hp.Host != host || psw != sw {
			continue
		}
		name := s.HostPortName(i)
		out[hp.PortGroup] = append(out[hp.PortGroup], TeamPort{ID: PortID(host, name), MAC: m.hostPortMAC(host, name), Link: hostPortPeerName(name)})
	}
	return out
}

// steering adds, for every host where a switch attaches several uplinks,
// the programs that pin each port to its uplink (Steer explains them).
func (m *modeler) steering() {
	teams := HostTeams(m.s)
	for start := 0; start < len(teams); {
		end := start + 1
		for end < len(teams) && teams[end].Host == teams[start].Host && teams[end].Switch == teams[start].Switch {
			end++
		}
		m.steerHost(teams[start:end])
		start = end
	}
}

// steerHost steers one switch on one host: its port groups' teams.
func (m *modeler) steerHost(teams []HostTeam) {
	first := teams[0]
	up := map[string]bool{}
	designated := ""
	for _, u := range first.Uplinks {
		up[u] = !m.opt.Down[first.Host+"/"+u]
		if designated == "" && up[u] {
			designated = u
		}
	}
	var local []string
	for _, t := range teams {
		for _, p := range t.Ports {
			local = append(local, p.MAC)
		}
	}
	sort.Strings(local)
	accept := map[string][]string{}
	for _, t := range teams {
		for _, p := range t.Ports {
			a := teaming.Assign(t.Team.Team, up, []teaming.Port{{ID: p.ID, MAC: p.MAC}}, m.opt.Teams, m.opt.Now)[p.ID]
			var toNICs []string
			for _, u := range portUplinks(t.Team.Team, up, a) {
				toNICs = append(toNICs, first.NIC[u])
				accept[u] = append(accept[u], p.MAC)
			}
			m.add(Resource{Kind: KindSteer, NS: first.NS, Link: p.Link, Name: p.ID, Why: whyText(a),
				Match: Steer{Out: true, To: toNICs, Local: local}.String(), Owner: "port " + p.ID + " teaming"})
		}
	}
	for _, u := range first.Uplinks {
		sort.Strings(accept[u])
		m.add(Resource{Kind: KindSteer, NS: first.NS, Link: first.NIC[u],
			Match: Steer{Bcast: u == designated, Accept: accept[u], Local: local}.String(),
			Owner: fmt.Sprintf("uplink %s on %s teaming", u, first.Host)})
	}
}

// onHost narrows a team to the uplinks that exist on the host.
func onHost(t teaming.Team, nic map[string]string) teaming.Team {
	keep := func(list []string) []string {
		var out []string
		for _, u := range list {
			if _, ok := nic[u]; ok {
				out = append(out, u)
			}
		}
		return out
	}
	t.Active, t.Standby = keep(t.Active), keep(t.Standby)
	return t
}

// portUplinks are the uplinks a port's frames leave by: its assigned one,
// or with IP hash every active uplink that is up.
func portUplinks(t teaming.Team, up map[string]bool, a teaming.Assignment) []string {
	if a.Uplink == "" {
		return nil
	}
	if t.Policy == teaming.IPHash && a.Reason != teaming.FailedTo {
		var live []string
		for _, u := range t.Active {
			if up[u] {
				live = append(live, u)
			}
		}
		if len(live) > 0 {
			return live
		}
	}
	return []string{a.Uplink}
}
