package plan

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

const tenantsSpec = `name: dc
hosts:
  - {name: hv1, underlay: 10.0.0.11}
  - {name: hv2, underlay: 10.0.0.12}
  - {name: hv3, underlay: 10.0.0.13}
networks:
  - {name: a-web, vni: 101, subnet: 10.1.0.0/24, gateway: 10.1.0.1, router: ta}
  - {name: a-db, vni: 102, subnet: 10.2.0.0/24, gateway: 10.2.0.1, router: ta}
  - {name: b-web, vni: 201, subnet: 10.1.0.0/24, gateway: 10.1.0.1, router: tb}
  - {name: lonely, vni: 301}
vms:
  - {name: a1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24, mac: "02:00:00:00:00:11"}]}
  - {name: a2, host: hv2, nics: [{network: a-web, ip: 10.1.0.12/24, mac: "02:00:00:00:00:12"}]}
  - {name: a4, host: hv3, nics: [{network: a-db, ip: 10.2.0.14/24, mac: "02:00:00:00:00:14"}]}
  - {name: b1, host: hv1, nics: [{network: b-web, ip: 10.1.0.11/24, mac: "02:00:00:00:00:11"}]}
  - {name: b2, host: hv2, nics: [{network: b-web, ip: 10.1.0.12/24, mac: "02:00:00:00:00:12"}]}
`

func mustLoad(t *testing.T, src string) *spec.Spec {
	t.Helper()
	doc, err := spec.Load("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return doc.Spec
}

// networkKinds summarizes a host model's network objects: kind and owner
// label of each, so a test reads what a host carries.
func networkObjects(rs []Resource) []string {
	var out []string
	for _, r := range rs {
		switch r.Kind {
		case KindBridge, KindVxlan, KindFDB, KindNeigh:
			if r.Isolate || r.Kind == KindFDB || r.Kind == KindNeigh {
				out = append(out, r.String())
			}
		case KindNetns:
			if IsRouterNS(r.Name) {
				out = append(out, r.String())
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestNetworkHostModel(t *testing.T) {
	s := mustLoad(t, tenantsSpec)
	br := func(n string) string { return NetBridgeName("dc", n) }
	vx := func(n string) string { return NetVTEPName("dc", n) }
	cases := []struct {
		host string
		want []string // substrings, each of some object's description
		none []string // substrings no object's description has
		objs int      // how many network objects (networkObjects)
	}{
		{host: "hv1",
			want: []string{
				"bridge " + br("a-web"), "bridge " + br("a-db"), "bridge " + br("b-web"),
				// a-db has no VM on hv1, but router ta forwards into it there.
				"vxlan " + vx("a-db") + " in @host (vni 102, local 10.0.0.11",
				"fdb 00:00:00:00:00:00 dst 10.0.0.12 on " + vx("a-web"),
				"fdb 00:00:00:00:00:00 dst 10.0.0.13 on " + vx("a-db"),
				"fdb 02:00:00:00:00:12 dst 10.0.0.12 on " + vx("a-web"),
				"fdb 02:00:00:00:00:12 on " + vx("a-web") + " in @host (master static)",
				"fdb 02:00:00:00:00:14 dst 10.0.0.13 on " + vx("a-db"),
				"neighbour 10.1.0.12 lladdr 02:00:00:00:00:12 on " + br("a-web"),
				"neighbour 10.1.0.12 lladdr 02:00:00:00:00:12 on " + br("b-web"),
				"neighbour 10.1.0.1 lladdr " + GatewayMAC("dc", "ta", "a-web") + " on " + br("a-web"),
				"netns " + RouterNSName("dc", "ta", "hv1"), "netns " + RouterNSName("dc", "tb", "hv1"),
			},
			none: []string{
				// floods go only to hosts with the network's VMs
				"fdb 00:00:00:00:00:00 dst 10.0.0.13 on " + vx("a-web"),
				"fdb 00:00:00:00:00:00 dst 10.0.0.13 on " + vx("b-web"),
				br("lonely"),
			},
			// bridges 3, tunnels 3, floods a-web 1 + a-db 1 + b-web 1,
			// remote VMs (tunnel and bridge entries) a-web 2 + a-db 2 + b-web 2,
			// neighbours a-web 2+1, a-db 1+1, b-web 2+1, router namespaces 2
			objs: 3 + 3 + 3 + 6 + 8 + 2},
		{host: "hv3",
			// Only a-db's VM is on hv3: it carries tenant a's networks (its
			// router forwards between them) but nothing of tenant b.
			want: []string{"bridge " + br("a-web"), "bridge " + br("a-db"), "netns " + RouterNSName("dc", "ta", "hv3")},
			none: []string{br("b-web"), vx("b-web"), RouterNSName("dc", "tb", "hv3")}},
	}
	for _, tc := range cases {
		t.Run(tc.host, func(t *testing.T) {
			got := networkObjects(Model(s, Options{Host: tc.host}))
			text := strings.Join(got, "\n")
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("no object with %q in:\n%s", w, text)
				}
			}
			for _, n := range tc.none {
				if strings.Contains(text, n) {
					t.Errorf("an object with %q, which the host should not carry:\n%s", n, text)
				}
			}
			if tc.objs != 0 && len(got) != tc.objs {
				t.Errorf("%d network objects, want %d:\n%s", len(got), tc.objs, text)
			}
		})
	}
}

func TestNetworkRouterLegs(t *testing.T) {
	s := mustLoad(t, tenantsSpec)
	for _, host := range []string{"hv1", "hv2", "hv3"} {
		legs := map[string]Resource{}
		for _, r := range Model(s, Options{Host: host}) {
			if r.Kind == KindVeth && IsRouterNS(r.A.NS) {
				legs[r.A.NS+"/"+r.Owner] = r
			}
			if r.Kind == KindAddr && IsRouterNS(r.NS) && !strings.HasSuffix(r.CIDR, "/24") {
				t.Errorf("%s: gateway address %s without its subnet's prefix", host, r.CIDR)
			}
		}
		for _, r := range legs {
			if r.A.MAC != GatewayMAC("dc", routerOf(r.A.NS), networkOf(r.Owner)) {
				t.Errorf("%s: leg %s has MAC %s, not the network's gateway MAC", host, r.Owner, r.A.MAC)
			}
			if r.B.NS != CurrentNS || r.B.Master != NetBridgeName("dc", networkOf(r.Owner)) {
				t.Errorf("%s: leg %s's port %+v is not on its network's bridge", host, r.Owner, r.B)
			}
		}
		if want := map[string]int{"hv1": 3, "hv2": 3, "hv3": 2}[host]; len(legs) != want {
			t.Errorf("%s: %d router legs, want %d: %v", host, len(legs), want, legs)
		}
	}
	if GatewayMAC("dc", "ta", "a-web") == GatewayMAC("dc", "tb", "b-web") {
		t.Error("two routers' gateways on the same subnet share a MAC")
	}
}

func routerOf(ns string) string {
	_, node, _ := SplitNSName(ns)
	return strings.Split(node, ".")[1]
}

func networkOf(owner string) string {
	_, rest, _ := strings.Cut(owner, " on network ")
	n, _, _ := strings.Cut(rest, " on ")
	return n
}

// A host model puts a network vNIC's port in the network's bridge in the
// host's namespace, with the vNIC's own MAC and the network's MTU.
func TestNetworkVNICPortInHostModel(t *testing.T) {
	s := mustLoad(t, tenantsSpec)
	for _, r := range Model(s, Options{Host: "hv2"}) {
		if r.Kind == KindVeth && r.A.NS == NSName("dc", "a2") {
			if r.B.Master != NetBridgeName("dc", "a-web") || r.A.MTU != spec.DefaultNetworkMTU || r.A.MAC != "02:00:00:00:00:12" {
				t.Errorf("a2's vNIC %s", r)
			}
			return
		}
	}
	t.Error("no vNIC for a2 on hv2")
}

func TestNetworkSysctls(t *testing.T) {
	cases := []struct {
		ns     string
		router bool
	}{
		{RouterNSName("dc", "ta", "hv1"), true},
		{NSName("dc", "a1"), false},
		{NSName("dc", "_pswitch"), false},
		{"vnet.dc", false},
	}
	for _, tc := range cases {
		set := NamespaceSysctlSet(tc.ns)
		forwards := strings.Contains(fmt.Sprint(set), "ip_forward")
		if forwards != tc.router {
			t.Errorf("%s: forwarding %v, want %v", tc.ns, forwards, tc.router)
		}
	}
}

// Changing one network touches only that network's objects on a host: the
// diff between two models has no action on another network.
func TestNetworkChangeIsLocal(t *testing.T) {
	before := mustLoad(t, tenantsSpec)
	after := mustLoad(t, tenantsSpec+"  - {name: b3, host: hv1, nics: [{network: b-web, ip: 10.1.0.13/24}]}\n")
	p := Diff(Model(after, Options{Host: "hv2"}), Model(before, Options{Host: "hv2"}))
	if p.Empty() {
		t.Fatal("no change on hv2 for a new b-web VM on hv1")
	}
	for _, a := range p.Actions {
		s := a.Subject().String()
		if !strings.Contains(s, "b-web") && !strings.Contains(s, NetBridgeName("dc", "b-web")) {
			t.Errorf("action outside b-web: %s %s", a.Op, s)
		}
		if a.Op != OpCreate {
			t.Errorf("a new VM elsewhere should only add entries: %s %s", a.Op, s)
		}
	}
}

// A dual-stack network: the VMs' IPv6 addresses are on their vNICs and,
// like their IPv4 ones, neighbour entries of every carrying host's bridge
// (from which the bridge answers solicitations for remote VMs); the router
// leg holds gateway6 with subnet6's prefix, and the bridge a neighbour
// entry for it with the gateway MAC.
func TestNetworkIPv6(t *testing.T) {
	src := strings.Replace(tenantsSpec, "gateway: 10.1.0.1, router: ta}", `gateway: 10.1.0.1, subnet6: "fd00:1::/64", gateway6: "fd00:1::1", router: ta}`, 1)
	src = strings.Replace(src, `{network: a-web, ip: 10.1.0.12/24,`, `{network: a-web, ip: 10.1.0.12/24, ip6: "fd00:1:0:0::12/64",`, 1)
	src = strings.Replace(src, `{name: a-db, vni: 102, subnet: 10.2.0.0/24, gateway: 10.2.0.1,`, `{name: a-db, vni: 102, subnet6: "fd00:2::/64", gateway6: "fd00:2::1",`, 1)
	src = strings.Replace(src, `{network: a-db, ip: 10.2.0.14/24,`, `{network: a-db, ip6: "fd00:2::14/64",`, 1)
	s := mustLoad(t, src)
	var text []string
	for _, r := range Model(s, Options{Host: "hv1"}) {
		text = append(text, r.String())
	}
	all := strings.Join(text, "\n")
	for _, w := range []string{
		"neighbour fd00:1::12 lladdr 02:00:00:00:00:12 on " + NetBridgeName("dc", "a-web"),
		"neighbour fd00:1::1 lladdr " + GatewayMAC("dc", "ta", "a-web") + " on " + NetBridgeName("dc", "a-web"),
		"neighbour fd00:2::14 lladdr 02:00:00:00:00:14 on " + NetBridgeName("dc", "a-db"),
		"neighbour fd00:2::1 lladdr " + GatewayMAC("dc", "ta", "a-db") + " on " + NetBridgeName("dc", "a-db"),
		"fd00:1::1/64", "fd00:2::1/64", "10.1.0.1/24",
	} {
		if !strings.Contains(all, w) {
			t.Errorf("hv1 has no %q:\n%s", w, all)
		}
	}
	if strings.Contains(all, "10.2.0.1") {
		t.Errorf("IPv6-only a-db has an IPv4 gateway on hv1:\n%s", all)
	}
	found := false
	for _, r := range Model(s, Options{Host: "hv2"}) {
		if r.Kind == KindAddr && r.NS == NSName("dc", "a2") && r.CIDR == "fd00:1::12/64" {
			found = true
		}
	}
	if !found {
		t.Error("a2's eth0 has no fd00:1::12/64 (canonical form of its ip6)")
	}
	if !strings.Contains(fmt.Sprint(RouterSysctls), "net/ipv6/conf/all/forwarding") {
		t.Error("routers do not forward IPv6")
	}
	// The bridges of networks with IPv6 keep it on (they hold IPv6
	// neighbour entries); the others have it off.
	want := map[string]bool{NetBridgeName("dc", "a-web"): false, NetBridgeName("dc", "a-db"): false}
	plain := mustLoad(t, tenantsSpec)
	for _, r := range Model(plain, Options{Host: "hv1"}) {
		if r.Kind == KindBridge && r.Name == NetBridgeName("dc", "a-web") {
			want["plain "+r.Name] = true
			if !BridgeWantsIPv6Off(r.Sysctls) {
				t.Errorf("bridge of a network without IPv6 keeps it on: %q", r.Sysctls)
			}
		}
	}
	for _, r := range Model(s, Options{Host: "hv1"}) {
		if _, ok := want[r.Name]; ok && r.Kind == KindBridge {
			want[r.Name] = true
			if BridgeWantsIPv6Off(r.Sysctls) {
				t.Errorf("bridge %s of a network with IPv6 has it off: %q", r.Name, r.Sysctls)
			}
		}
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("no bridge %s on hv1", name)
		}
	}
}

func TestBridgeSysctlText(t *testing.T) {
	for _, tc := range []struct {
		off  bool
		text string
	}{
		{false, "rp_filter=1"},
		{true, "rp_filter=1 disable_ipv6=1"},
	} {
		got := BridgeSysctlText(tc.off)
		if got != tc.text || BridgeWantsIPv6Off(got) != tc.off {
			t.Errorf("BridgeSysctlText(%v) = %q (off %v), want %q", tc.off, got, BridgeWantsIPv6Off(got), tc.text)
		}
	}
	if BridgeWantsIPv6Off("rp_filter=1 disable_ipv6=0") {
		t.Error("disable_ipv6=0 read as off")
	}
}

// A network whose tunnels a port group carries: on each host its tunnel
// starts at the host's host port on the port group, which the agent makes
// (into the switch's bridge, with the port group's shaping), and the uplink
// device's pool filters send that port's frames to the port group's pool.
func TestNetworkPortGroupTunnels(t *testing.T) {
	s := mustLoad(t, `name: dc
hosts:
  - {name: hv1, nics: [{name: vmnic1, device: data0, speed: 1Gbit}]}
  - {name: hv2, nics: [{name: vmnic1, device: data0, speed: 1Gbit}]}
switches:
  - name: dvs
    uplinks: [{name: up1, nics: {hv1: vmnic1, hv2: vmnic1}}]
    ioc: {enabled: true, pools: {tunnels: {shares: low, limit: 50Mbit}}}
    portgroups:
      - {name: pg-tun, pool: tunnels, shaping: {egress: {average: 40Mbit, peak: 40Mbit, burst: 64KiB}}}
      - {name: pg-other}
hostports:
  - {host: hv1, portgroup: pg-tun, ip: 10.9.0.11/24, name: vtep0}
  - {host: hv2, portgroup: pg-tun, ip: 10.9.0.12/24, name: vtep0}
  - {host: hv1, portgroup: pg-other, ip: 10.8.0.11/24, name: mgmt0}
networks:
  - {name: a-web, subnet: 10.1.0.0/24, portgroup: pg-tun}
vms:
  - {name: a1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24}]}
  - {name: a2, host: hv2, nics: [{network: a-web, ip: 10.1.0.12/24}]}
`)
	var text []string
	var vtep, port *Resource
	for _, r := range Model(s, Options{Host: "hv1"}) {
		text = append(text, r.String())
		switch {
		case r.Kind == KindVxlan && r.Name == NetVTEPName("dc", "a-web"):
			vtep = &r
		case r.Kind == KindVeth && r.A.Name == "vtep0":
			port = &r
		}
	}
	all := strings.Join(text, "\n")
	if vtep == nil || vtep.Local != "10.9.0.11" {
		t.Fatalf("a-web's tunnel on hv1 does not start at its host port 10.9.0.11: %v\n%s", vtep, all)
	}
	if !strings.Contains(all, "fdb 00:00:00:00:00:00 dst 10.9.0.12 on "+vtep.Name) {
		t.Errorf("floods do not go to hv2's host port:\n%s", all)
	}
	if port == nil || port.A.NS != CurrentNS || port.B.NS != CurrentNS || port.B.Master != HostBridgeName("dc", "dvs") {
		t.Fatalf("host port vtep0 is not made into dvs's bridge on the host: %v\n%s", port, all)
	}
	for _, w := range []string{"address 10.9.0.11/24 on vtep0 in @host"} {
		if !strings.Contains(all, w) {
			t.Errorf("hv1's model has no %q:\n%s", w, all)
		}
	}
	var shaped, filtered bool
	for _, r := range Model(s, Options{Host: "hv1"}) {
		shaped = shaped || (r.Kind == KindShaper && r.Link == "vtep0")
		filtered = filtered || (r.Kind == KindFilter && r.Link == "data0" && strings.Contains(r.String(), "hostport hv1/vtep0 on pg-tun -> pool tunnels"))
	}
	if !shaped {
		t.Errorf("vtep0 has no shaper:\n%s", all)
	}
	if !filtered {
		t.Errorf("no filter on data0 sending vtep0's frames to pool tunnels:\n%s", all)
	}
}
