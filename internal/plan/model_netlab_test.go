package plan

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// On one machine each host's namespace holds exactly what that host's
// agent makes on a real host, in the host's namespace instead of its own.
func TestLabNetworksAreTheHostModelsInHostNamespaces(t *testing.T) {
	s := mustLoad(t, tenantsSpec)
	lab := Model(s, Options{})
	for _, h := range s.Hosts {
		here := NSName(s.Name, h.Name)
		want := networkObjects(networks(s, h.Name, here))
		var got []Resource
		for _, r := range lab {
			if r.NS == here || r.Kind == KindNetns && strings.HasSuffix(r.Name, "."+h.Name) && IsRouterNS(r.Name) {
				got = append(got, r)
			}
		}
		if g := networkObjects(got); !slices.Equal(g, want) {
			t.Errorf("%s:\n got %s\nwant %s", h.Name, strings.Join(g, "\n     "), strings.Join(want, "\n     "))
		}
	}
	// The host model keeps its networks in the host's namespace, once.
	hm := Model(s, Options{Host: "hv1"})
	bridges := map[string]int{}
	for _, r := range hm {
		if r.Kind == KindBridge {
			bridges[r.NS+"/"+r.Name]++
		}
		if r.NS == NSName(s.Name, "hv1") || r.Kind == KindVeth && r.A.Name == UnderlayLinkName {
			t.Errorf("host model holds the lab's %s", r)
		}
	}
	for b, n := range bridges {
		if n != 1 {
			t.Errorf("host model has bridge %s %d times", b, n)
		}
	}
}

func TestLabUnderlay(t *testing.T) {
	for _, tc := range []struct {
		name, hosts string
		links       map[string]string // host -> address on its underlay link
	}{
		{"each host gets an underlay link", `
  - {name: hv1, underlay: 10.0.0.11}
  - {name: hv2, underlay: 10.0.0.12}
  - {name: hv3, underlay: 10.0.0.13}`, map[string]string{"hv1": "10.0.0.11/24", "hv2": "10.0.0.12/24", "hv3": "10.0.0.13/24"}},
		{"the prefix spans every host's underlay", `
  - {name: hv1, underlay: 10.0.0.11}
  - {name: hv2, underlay: 10.0.1.12}
  - {name: hv3, underlay: 10.0.0.13}`, map[string]string{"hv1": "10.0.0.11/23", "hv2": "10.0.1.12/23", "hv3": "10.0.0.13/23"}},
		{"a host port with the underlay address carries the tunnels", `
  - {name: hv1, underlay: 10.0.0.11, nics: [{name: vmnic0, speed: 1Gbit}]}
  - {name: hv2, underlay: 10.0.0.12}
  - {name: hv3, underlay: 10.0.0.13}
switches:
  - name: vs0
    uplinks: [{name: up0, nics: {hv1: vmnic0}}]
    portgroups: [{name: pg-tep}]
hostports:
  - {host: hv1, portgroup: pg-tep, ip: 10.0.0.11/24}`, map[string]string{"hv2": "10.0.0.12/24", "hv3": "10.0.0.13/24"}},
		{"IPv6", `
  - {name: hv1, underlay: "fd00::11"}
  - {name: hv2, underlay: "fd00::12"}
  - {name: hv3, underlay: "fd00::13"}`, map[string]string{"hv1": "fd00::11/64", "hv2": "fd00::12/64", "hv3": "fd00::13/64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(tenantsSpec, `
  - {name: hv1, underlay: 10.0.0.11}
  - {name: hv2, underlay: 10.0.0.12}
  - {name: hv3, underlay: 10.0.0.13}`, tc.hosts, 1)
			s := mustLoad(t, src)
			got := map[string]string{}
			mtu := 0
			for _, r := range Model(s, Options{}) {
				switch {
				case r.Kind == KindAddr && r.Link == UnderlayLinkName:
					_, host, _ := SplitNSName(r.NS)
					got[host] = r.CIDR
				case r.Kind == KindVeth && r.A.Name == UnderlayLinkName:
					if r.B.NS != NSName(s.Name, PhysSwitch) || r.B.Master != PhysBridge {
						t.Errorf("underlay link not on the physical switch: %s", r)
					}
					mtu = r.A.MTU
				case r.Kind == KindVxlan:
					_, host, _ := SplitNSName(r.NS)
					h, _ := s.Host(host)
					if r.Local != h.Underlay {
						t.Errorf("%s's tunnel starts at %s, not %s", host, r.Local, h.Underlay)
					}
				}
			}
			if len(got) != len(tc.links) {
				t.Fatalf("underlay addresses %v, want %v", got, tc.links)
			}
			for h, a := range tc.links {
				if got[h] != a {
					t.Errorf("%s: underlay link address %s, want %s", h, got[h], a)
				}
			}
			if want := 1450 + TunnelOverhead(s.Hosts[1].Underlay); mtu != max(want, 1500) {
				t.Errorf("underlay link MTU %d, want %d", mtu, max(want, 1500))
			}
		})
	}
}

// A network on one host has no tunnel, so no underlay either.
func TestLabNetworkOnOneHostNeedsNoUnderlay(t *testing.T) {
	s := mustLoad(t, `name: one
hosts: [{name: hv1}]
networks: [{name: web, subnet: 10.1.0.0/24}]
vms:
  - {name: a, host: hv1, nics: [{network: web, ip: 10.1.0.11/24}]}
  - {name: b, host: hv1, nics: [{network: web, ip: 10.1.0.12/24}]}
`)
	for _, r := range Model(s, Options{}) {
		if r.Kind == KindVxlan || r.Kind == KindNetns && r.Name == NSName("one", PhysSwitch) || r.Kind == KindVeth && r.A.Name == UnderlayLinkName {
			t.Errorf("unexpected %s", r)
		}
	}
}

func TestCommonBits(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"10.0.0.11", "10.0.0.12", 29}, {"10.0.0.11", "10.0.0.11", 32}, {"10.0.0.1", "138.0.0.1", 0}, {"fd00::11", "fd00::12", 126}} {
		if got := commonBits(netip.MustParseAddr(tc.a), netip.MustParseAddr(tc.b)); got != tc.want {
			t.Errorf("commonBits(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestLabNetworkOnPortGroupTunnelsThroughItsHostPorts(t *testing.T) {
	s := mustLoad(t, `name: pgl
hosts:
  - {name: hv1, nics: [{name: vmnic1, speed: 1Gbit}]}
  - {name: hv2, nics: [{name: vmnic1, speed: 1Gbit}]}
switches:
  - name: dvs
    uplinks: [{name: up1, nics: {hv1: vmnic1, hv2: vmnic1}}]
    portgroups: [{name: pg-tun}]
hostports:
  - {host: hv1, portgroup: pg-tun, ip: 10.9.0.11/24, name: vtep0}
  - {host: hv2, portgroup: pg-tun, ip: 10.9.0.12/24, name: vtep0}
networks:
  - {name: a-web, subnet: 10.1.0.0/24, portgroup: pg-tun}
vms:
  - {name: a1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24}]}
  - {name: a2, host: hv2, nics: [{network: a-web, ip: 10.1.0.12/24}]}
`)
	var locals []string
	for _, r := range Model(s, Options{}) {
		if r.Kind == KindVeth && r.A.Name == UnderlayLinkName {
			t.Errorf("hosts whose tunnels start at host ports get an underlay link: %s", r)
		}
		if r.Kind == KindVxlan {
			locals = append(locals, r.Local)
		}
	}
	if strings.Join(locals, ",") != "10.9.0.11,10.9.0.12" {
		t.Errorf("tunnels start at %v, want the host ports' 10.9.0.11 and 10.9.0.12", locals)
	}
}
