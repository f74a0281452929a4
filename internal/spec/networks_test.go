package spec

import (
	"errors"
	"strings"
	"testing"
)

// netSpec is a valid spec with two tenants; each case replaces one line.
const netSpec = `name: dc
hosts:
  - {name: hv1, underlay: 10.0.0.11}
  - {name: hv2, underlay: 10.0.0.12}
networks:
  - {name: a-web, vni: 101, subnet: 10.1.0.0/24, gateway: 10.1.0.1, subnet6: "fd00:1::/64", gateway6: "fd00:1::1", router: ta}
  - {name: a-db, subnet: 10.2.0.0/24, gateway: 10.2.0.1, router: ta}
  - {name: b-web, subnet: 10.1.0.0/24, gateway: 10.1.0.1, router: tb}
vms:
  - {name: a1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24, mac: "02:00:00:00:00:11"}]}
  - {name: b1, host: hv2, nics: [{network: b-web, ip: 10.1.0.11/24, mac: "02:00:00:00:00:11"}]}
`

func TestNetworksValid(t *testing.T) {
	doc, err := Load("t.yaml", []byte(netSpec))
	if err != nil {
		t.Fatalf("the same IP and MAC in two tenants: %v", err)
	}
	if got := doc.Spec.NetworkHosts("a-web"); len(got) != 1 || got[0] != "hv1" {
		t.Errorf("a-web hosts %v", got)
	} // Dual stack, and an IPv6-only network on a router without gateway.
	dual := strings.Replace(netSpec, `{network: a-web, ip: 10.1.0.11/24,`, `{network: a-web, ip: 10.1.0.11/24, ip6: "fd00:1::11/64",`, 1)
	dual = strings.Replace(dual, `{name: a-db, subnet: 10.2.0.0/24, gateway: 10.2.0.1,`, `{name: a-db, subnet6: "fd00:2::/64", gateway6: "fd00:2::1",`, 1)
	if _, err := Load("t.yaml", []byte(dual)); err != nil {
		t.Errorf("dual stack: %v", err)
	}
}

func TestNetworksValidation(t *testing.T) {
	cases := []struct {
		name, old, new, path, msg string
		line                      int
	}{
		{"vni range", "vni: 101,", "vni: 16777216,", "networks[0].vni", "outside 1..16777215", 6},
		{"vni zero", "vni: 101,", "vni: 0,", "networks[0].vni", "would be taken for the field left out", 6},
		{"vni twice", "{name: a-db,", "{name: a-db, vni: 101,", "networks[1].vni", "vni 101 is also networks[0]'s", 7},
		{"name", "{name: a-db,", "{name: A_db,", "networks[1].name", "lower-case", 7},
		{"duplicate name", "{name: a-db,", "{name: a-web,", "networks[1].name", "duplicate network", 7},
		{"subnet", "subnet: 10.2.0.0/24", "subnet: 10.2.0.1/24", "networks[1].subnet", "has host bits set", 7},
		{"gateway outside", "gateway: 10.2.0.1", "gateway: 10.3.0.1", "networks[1].gateway", "outside subnet 10.2.0.0/24", 7},
		{"gateway broadcast", "gateway: 10.2.0.1", "gateway: 10.2.0.255", "networks[1].gateway", "broadcast", 7},
		{"ipv6 subnet", "subnet: 10.2.0.0/24, gateway: 10.2.0.1", "subnet: \"2001:db8::/64\", gateway: \"2001:db8::1\"", "networks[1].subnet", "give it as subnet6", 7},
		{"ipv6 gateway", "gateway: 10.2.0.1", "gateway: \"2001:db8::1\"", "networks[1].gateway", "give it as gateway6", 7},
		{"subnet6 not ipv6", "{name: a-db,", "{name: a-db, subnet6: 10.9.0.0/24,", "networks[1].subnet6", "not IPv6", 7},
		{"subnet6 host bits", "{name: a-db,", "{name: a-db, subnet6: \"fd00:2::1/64\",", "networks[1].subnet6", "host bits", 7},
		{"subnet6 link-local", "{name: a-db,", "{name: a-db, subnet6: \"fe80::/64\", gateway6: \"fe80::1\",", "networks[1].subnet6", "link-local", 7},
		{"router without gateway6", "{name: a-db,", "{name: a-db, subnet6: \"fd00:2::/64\",", "networks[1].gateway6", "set gateway6", 7},
		{"gateway6 outside", "{name: a-db,", "{name: a-db, subnet6: \"fd00:2::/64\", gateway6: \"fd00:3::1\",", "networks[1].gateway6", "outside subnet6 fd00:2::/64", 7},
		{"gateway6 anycast", "{name: a-db,", "{name: a-db, subnet6: \"fd00:2::/64\", gateway6: \"fd00:2::\",", "networks[1].gateway6", "subnet-router anycast", 7},
		{"gateway6 without subnet6", "{name: a-db,", "{name: a-db, gateway6: \"fd00:2::1\",", "networks[1].subnet6", "needs the network's subnet6", 7},
		{"overlap6 on a router", "{name: a-db,", "{name: a-db, subnet6: \"fd00:1::/48\", gateway6: \"fd00:1::2\",", "networks[1].subnet6", "overlaps fd00:1::/64", 7},
		{"ip6 without subnet6", "{network: b-web, ip: 10.1.0.11/24", "{network: b-web, ip6: \"fd00:1::11/64\", ip: 10.1.0.11/24", "vms[1].nics[0].ip6", "no subnet6", 11},
		{"ip6 outside subnet6", "ip: 10.1.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "ip6: \"fd00:9::11/64\", ip: 10.1.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "vms[0].nics[0].ip6", "not in network a-web's subnet6 fd00:1::/64", 10},
		{"ip6 is ipv4", "ip: 10.1.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "ip6: 10.1.0.12/24, ip: 10.1.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "vms[0].nics[0].ip6", "not IPv6", 10},
		{"ip6 link-local", "ip: 10.1.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "ip6: \"fe80::11/64\", ip: 10.1.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "vms[0].nics[0].ip6", "link-local", 10},
		{"ip6 is the gateway6", "ip: 10.1.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "ip6: \"fd00:1::1/64\", ip: 10.1.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "vms[0].nics[0].ip6", "already used at networks[0].gateway6", 10},
		{"ip6 on a port group", "{network: b-web, ip: 10.1.0.11/24", "{portgroup: pg, ip6: \"fd00:1::11/64\", ip: 10.1.0.11/24", "vms[1].nics[0].ip6", "ip6 is for vNICs on a network", 11},
		{"router without gateway", "gateway: 10.2.0.1, ", "", "networks[1].gateway", "set gateway", 7},
		{"overlap on a router", "subnet: 10.2.0.0/24", "subnet: 10.1.0.0/16", "networks[1].subnet", "overlaps 10.1.0.0/24", 7},
		{"ip outside subnet", "ip: 10.1.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "ip: 10.9.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "vms[0].nics[0].ip", "not in network a-web's subnet", 10},
		{"ip is the gateway", "ip: 10.1.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "ip: 10.1.0.1/24, mac: \"02:00:00:00:00:11\"}]}\n  - {name: b1", "vms[0].nics[0].ip", "already used at networks[0].gateway", 10},
		{"unknown network", "{network: b-web,", "{network: c-web,", "vms[1].nics[0].network", `unknown network "c-web"`, 11},
		{"network and port group", "{network: b-web,", "{network: b-web, portgroup: pg,", "vms[1].nics[0].network", "not both", 11},
		{"same router, same IP", "{network: b-web, ip: 10.1.0.11/24", "{network: a-web, ip: 10.1.0.11/24", "vms[1].nics[0].ip", "already used at vms[0].nics[0].ip", 11},
		{"same network, same MAC", "{network: b-web, ip: 10.1.0.11/24", "{network: a-web, ip: 10.1.0.12/24", "vms[1].nics[0].mac", "duplicate MAC", 11},
		{"no underlay", "{name: hv2, underlay: 10.0.0.12}", "{name: hv2}", "vms[0].nics[0].network", "hv2 has no underlay address", 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := netSpec
			if c.name == "no underlay" {
				src = strings.Replace(src, "{network: b-web,", "{network: a-web,", 1)
				src = strings.Replace(src, "10.1.0.11/24, mac: \"02:00:00:00:00:11\"}]}\n", "10.1.0.12/24, mac: \"02:00:00:00:00:12\"}]}\n", 2)
			}
			if !strings.Contains(src, c.old) {
				t.Fatalf("spec has no %q", c.old)
			}
			src = strings.Replace(src, c.old, c.new, 1)
			_, err := Load("t.yaml", []byte(src))
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("not Errors: %v", err)
			}
			for _, e := range es {
				if e.Path == c.path && strings.Contains(e.Msg, c.msg) {
					if e.Pos.Line != c.line {
						t.Errorf("%s at line %d, want %d", e.Path, e.Pos.Line, c.line)
					}
					return
				}
			}
			t.Errorf("got\n%v\nwant %s: ...%s...", err, c.path, c.msg)
		})
	}
}

func TestAllocateVNIs(t *testing.T) {
	doc, err := Load("t.yaml", []byte(netSpec))
	if err != nil {
		t.Fatal(err)
	}
	first := AllocateVNIs(doc.Spec, nil)
	if first["a-web"] != 101 {
		t.Errorf("a given VNI is kept: %v", first)
	}
	seen := map[int]string{}
	for n, v := range first {
		if v < 1 || v > MaxVNI {
			t.Errorf("%s: VNI %d out of range", n, v)
		}
		if other, dup := seen[v]; dup {
			t.Errorf("%s and %s share VNI %d", n, other, v)
		}
		seen[v] = n
	}
	// A VNI stored for a network stays even when a new network's hash
	// lands on it: the newcomer moves on.
	prev := *doc.Spec
	prev.Networks = append([]Network(nil), doc.Spec.Networks...)
	prev.Networks[1].VNI = DerivedVNI("dc", "network/zz-new")
	s := *doc.Spec
	s.Networks = append(append([]Network(nil), doc.Spec.Networks...), Network{Name: "zz-new"})
	got := AllocateVNIs(&s, &prev)
	if got["a-db"] != prev.Networks[1].VNI {
		t.Errorf("a-db's stored VNI %d became %d", prev.Networks[1].VNI, got["a-db"])
	}
	if got["zz-new"] == got["a-db"] || got["zz-new"] == 0 {
		t.Errorf("new network got VNI %d (a-db has %d)", got["zz-new"], got["a-db"])
	}
}

func TestPinVNIs(t *testing.T) {
	doc, err := Load("t.yaml", []byte(netSpec))
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := PinVNIs(doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range pinned.Spec.Networks {
		if n.VNI == 0 {
			t.Errorf("%s has no VNI in the pinned spec", n.Name)
		}
	}
	again, err := PinVNIs(pinned, pinned.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Source) != string(pinned.Source) {
		t.Errorf("pinning a pinned spec changed it:\n%s\n---\n%s", pinned.Source, again.Source)
	}
	// Applying the unpinned file again after it was stored gives the same
	// source, so an unchanged spec is recognized as unchanged.
	re, err := PinVNIs(doc, pinned.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if string(re.Source) != string(pinned.Source) {
		t.Errorf("re-pinning the same file differs")
	}
}

// pgNetSpec carries network a-web's tunnels over port group pg-tun: each
// host's host port there is its tunnel address.
const pgNetSpec = `name: dc
hosts:
  - {name: hv1, nics: [{name: vmnic1, device: data0, speed: 1Gbit}]}
  - {name: hv2, nics: [{name: vmnic1, device: data0, speed: 1Gbit}]}
switches:
  - name: dvs
    uplinks: [{name: up1, nics: {hv1: vmnic1, hv2: vmnic1}}]
    portgroups: [{name: pg-tun}]
  - {name: priv, hosts: [hv1], portgroups: [{name: pg-priv}]}
hostports:
  - {host: hv1, portgroup: pg-tun, ip: 10.9.0.11/24}
  - {host: hv2, portgroup: pg-tun, ip: 10.9.0.12/24}
networks:
  - {name: a-web, subnet: 10.1.0.0/24, portgroup: pg-tun}
vms:
  - {name: a1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24}]}
  - {name: a2, host: hv2, nics: [{network: a-web, ip: 10.1.0.12/24}]}
`

func TestNetworkPortGroup(t *testing.T) {
	doc, err := Load("t.yaml", []byte(pgNetSpec))
	if err != nil {
		t.Fatalf("tunnels over a port group, hosts without underlay: %v", err)
	}
	n, _ := doc.Spec.Network("a-web")
	if got := doc.Spec.TunnelAddress(n, "hv2"); got != "10.9.0.12" {
		t.Errorf("hv2's tunnel address %q, want its host port's 10.9.0.12", got)
	}
	cases := []struct {
		name, old, new, path, msg string
	}{
		{"unknown port group", "portgroup: pg-tun}\nvms", "portgroup: pg-nope}\nvms", "networks[0].portgroup", `unknown port group "pg-nope"`},
		{"switch without uplinks", "portgroup: pg-tun}\nvms", "portgroup: pg-priv}\nvms", "networks[0].portgroup", "no uplinks"},
		{"no uplink on a host", "{hv1: vmnic1, hv2: vmnic1}", "{hv1: vmnic1}", "networks[0].portgroup", "no uplink on host hv2"},
		{"no host port", "  - {host: hv2, portgroup: pg-tun, ip: 10.9.0.12/24}\n", "", "networks[0].portgroup", "host hv2 has no host port on port group pg-tun"},
		{"two host ports", "  - {host: hv2, portgroup: pg-tun, ip: 10.9.0.12/24}\n", "  - {host: hv2, portgroup: pg-tun, ip: 10.9.0.12/24}\n  - {host: hv2, portgroup: pg-tun, ip: 10.9.0.13/24}\n", "networks[0].portgroup", "2 host ports"},
		{"families", "ip: 10.9.0.12/24}", `ip: "fd09::12/64"}`, "hostports[1].ip", "IPv4 on other hosts"},
		{"mtu", "portgroup: pg-tun}\nvms", "portgroup: pg-tun, mtu: 1480}\nvms", "networks[0].mtu", "needs 1530"},
		{"a VM on the carrier", "  - {name: a2,", "  - {name: x1, host: hv1, nics: [{portgroup: pg-tun, ip: 10.9.0.99/24}]}\n  - {name: a2,", "vms[1].nics[0].portgroup", "carries virtual networks' tunnels"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(pgNetSpec, c.old) {
				t.Fatalf("spec has no %q", c.old)
			}
			src := strings.Replace(pgNetSpec, c.old, c.new, 1)
			_, err := Load("t.yaml", []byte(src))
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("accepted or not Errors: %v\n%s", err, src)
			}
			for _, e := range es {
				if e.Path == c.path && strings.Contains(e.Msg, c.msg) {
					return
				}
			}
			t.Errorf("got\n%v\nwant %s: ...%s...", err, c.path, c.msg)
		})
	}
}
