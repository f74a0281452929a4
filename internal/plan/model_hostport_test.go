package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A host agent makes every host port of its host: a veth pair in the
// host's namespace with the address on the host port's end and the other
// end a port of the switch's bridge, the port group's shaper, and on every
// real uplink a filter sending the host port's frames to its pool.
func TestHostModelHostPorts(t *testing.T) {
	const hostPortsSpec = `name: dc
hosts:
  - {name: hv1, nics: [{name: vmnic0, device: eth1, speed: 1Gbit}, {name: vmnic1, device: eth2, speed: 1Gbit}]}
  - {name: hv2, nics: [{name: vmnic0, device: eth1, speed: 1Gbit}]}
switches:
  - name: dvs
    uplinks: [{name: up1, nics: {hv1: vmnic0, hv2: vmnic0}}, {name: up2, nics: {hv1: vmnic1}}]
    ioc: {enabled: true, pools: {vmotion: {shares: high, limit: 600Mbit}}}
    portgroups:
      - {name: pg-mgmt, pool: management}
      - name: pg-vmotion
        pool: vmotion
        shaping: {egress: {average: 400Mbit, burst: 64KiB}}
        security: {macChanges: false, forgedTransmits: false}
hostports:
  - {host: hv1, portgroup: pg-mgmt, ip: 10.0.0.11/24}
  - {host: hv1, portgroup: pg-vmotion, ip: 10.1.0.11/24, name: vmotion0}
  - {host: hv2, portgroup: pg-vmotion, ip: 10.1.0.12/24, name: vmotion0}
`
	s := mustLoad(t, hostPortsSpec)
	bridge := HostBridgeName("dc", "dvs")
	tests := []struct {
		host, port, link, ip, pool string
		devices                    []string
		shaped                     bool
	}{
		// Without a name of the spec's, the host port's end names the
		// infrastructure, which vmk0 alone would not on a machine that
		// holds several.
		{host: "hv1", port: "vmk0", link: hashName("vh", "dc/hv1/vmk0"), ip: "10.0.0.11/24", pool: "management", devices: []string{"eth1", "eth2"}},
		{host: "hv1", port: "vmotion0", link: "vmotion0", ip: "10.1.0.11/24", pool: "vmotion", devices: []string{"eth1", "eth2"}, shaped: true},
		{host: "hv2", port: "vmotion0", link: "vmotion0", ip: "10.1.0.12/24", pool: "vmotion", devices: []string{"eth1"}, shaped: true},
	}
	for _, tt := range tests {
		t.Run(tt.host+"/"+tt.port, func(t *testing.T) {
			rs := Model(s, Options{Host: tt.host})
			var text []string
			for _, r := range rs {
				text = append(text, r.String())
			}
			all := strings.Join(text, "\n")
			owner := "hostport " + tt.host + "/" + tt.port
			peer := hashName("vk", "dc/"+tt.host+"/"+tt.port)
			var pair, addr, shaper, steer, sec bool
			filters := map[string]bool{}
			for _, r := range rs {
				switch {
				case r.Kind == KindVeth && r.A.Name == tt.link:
					pair = r.A.NS == CurrentNS && r.B.NS == CurrentNS && r.B.Name == peer && r.B.Master == bridge &&
						r.A.MAC == (&modeler{s: s}).hostPortMAC(tt.host, tt.port) && strings.Contains(r.Owner, owner)
				case r.Kind == KindAddr && r.Link == tt.link:
					addr = r.NS == CurrentNS && r.CIDR == tt.ip
				case r.Kind == KindShaper && r.Link == tt.link:
					shaper = r.NS == CurrentNS
				case r.Kind == KindSteer && r.Link == peer:
					steer = r.NS == CurrentNS
				case r.Kind == KindPortSec && r.Link == peer:
					sec = r.NS == CurrentNS
				case r.Kind == KindFilter && strings.Contains(r.Owner, owner+" on ") && strings.HasSuffix(r.Owner, "-> pool "+tt.pool):
					filters[r.Link] = r.NS == CurrentNS
				}
			}
			if !pair {
				t.Errorf("no veth pair %s <-> %s (port of %s) in the host's namespace:\n%s", tt.link, peer, bridge, all)
			}
			if !addr {
				t.Errorf("no address %s on %s in the host's namespace:\n%s", tt.ip, tt.link, all)
			}
			if shaper != tt.shaped {
				t.Errorf("shaper on %s: %v, want %v:\n%s", tt.port, shaper, tt.shaped, all)
			}
			if !sec {
				t.Errorf("no port security on %s:\n%s", peer, all)
			}
			if teamed := len(tt.devices) > 1; steer != teamed {
				t.Errorf("steering on %s: %v, want %v (the switch teams %d devices):\n%s", peer, steer, teamed, len(tt.devices), all)
			}
			for _, dev := range tt.devices {
				if !filters[dev] {
					t.Errorf("no filter on %s sending %s's frames to pool %s:\n%s", dev, tt.port, tt.pool, all)
				}
			}
			if len(filters) != len(tt.devices) {
				t.Errorf("filters for %s on %v, want on %v", tt.port, filters, tt.devices)
			}
			for _, r := range rs {
				if r.Kind == KindVeth && strings.Contains(r.Owner, "hostport ") && !strings.Contains(r.Owner, "hostport "+tt.host+"/") {
					t.Errorf("another host's host port is made on %s: %v", tt.host, r)
				}
			}
			if tt.host != "hv1" {
				return
			}
			teams, _ := Teaming(s, Options{Host: tt.host})
			var inTeam bool
			for _, team := range teams {
				for _, p := range team.Ports {
					inTeam = inTeam || p.Link == peer
				}
			}
			if !inTeam {
				t.Errorf("the teaming agent does not know %s's switch port %s: %+v", tt.port, peer, teams)
			}
		})
	}
}

// Two infrastructures whose hosts share one machine, each with a host port
// of the default name and one of a name of its own, give the machine's
// namespace no link name twice: only the names the specs write meet.
func TestHostPortsOfTwoInfrastructuresOnOneMachine(t *testing.T) {
	const src = `name: %s
hosts:
  - {name: hv1}
switches:
  - {name: sw, hosts: [hv1], portgroups: [{name: pg}]}
hostports:
  - {host: hv1, portgroup: pg, ip: 10.0.0.11/24}
  - {host: hv1, portgroup: pg, ip: 10.0.1.11/24, name: %s}
`
	links := func(infra, named string) []string {
		var out []string
		for _, r := range Model(mustLoad(t, fmt.Sprintf(src, infra, named)), Options{Host: "hv1"}) {
			if r.Kind == KindVeth {
				out = append(out, r.A.Name, r.B.Name)
			}
		}
		if len(out) != 4 {
			t.Fatalf("%s: want two host ports' veth pairs, got the links %v", infra, out)
		}
		return out
	}
	blue := links("blue", "nfs-blue")
	for _, name := range links("green", "nfs-green") {
		if slices.Contains(blue, name) {
			t.Errorf("both infrastructures name a link %s on the machine (blue's: %v)", name, blue)
		}
	}
	if !slices.Contains(blue, "nfs-blue") {
		t.Errorf("the host port's end is not named as the spec names it: %v", blue)
	}
}
