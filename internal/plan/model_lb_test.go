package plan

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/spec"
)

const lbTestSpec = `name: lbt
hosts:
  - {name: hv1, underlay: 192.0.2.11}
  - {name: hv2, underlay: 192.0.2.12}
  - {name: hv3, underlay: 192.0.2.13}
networks:
  - name: a-web
    subnet: 10.1.0.0/24
    gateway: 10.1.0.1
    subnet6: "fd00:1::/64"
    gateway6: "fd00:1::1"
    router: ta
    loadBalancers:
      - name: web
        vip: 10.1.0.100
        vip6: "fd00:1::100"
        listeners: [{protocol: tcp, port: 80, backendPort: 8080}]
        backends: [{vm: a1}, {vm: a2}, {vm: a3}]
        selection: {method: source, timeout: 90s}
        healthCheck: {interval: 1s}
  - {name: a-db, subnet: 10.2.0.0/24, gateway: 10.2.0.1, router: ta}
  - name: b-web
    subnet: 10.1.0.0/24
    loadBalancers:
      - {name: web, vip: 10.1.0.100, listeners: [{protocol: udp, port: 53}], backends: [{vm: b1}]}
vms:
  - {name: a1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24, ip6: "fd00:1::11/64", mac: "02:00:00:00:00:11"}]}
  - {name: a2, host: hv2, nics: [{network: a-web, ip: 10.1.0.12/24, mac: "02:00:00:00:00:12"}]}
  - {name: a3, host: hv3, nics: [{network: a-db, ip: 10.2.0.13/24, mac: "02:00:00:00:00:13"}]}
  - {name: c1, host: hv3, nics: [{network: a-web, ip: 10.1.0.21/24, connected: false}]}
  - {name: b1, host: hv2, nics: [{network: b-web, ip: 10.1.0.11/24, mac: "02:00:00:00:00:11"}]}
`

func loadLBSpec(t *testing.T) *spec.Spec {
	t.Helper()
	doc, err := spec.Load("t.yaml", []byte(lbTestSpec))
	if err != nil {
		t.Fatal(err)
	}
	return doc.Spec
}

func TestPortBalancersText(t *testing.T) {
	s := loadLBSpec(t)
	sites := s.BalancerSites()
	aweb, _ := s.Network("a-web")
	pb := SiteBalancers(s, sites[0], aweb, map[string]bool{BackendKey("network a-web", "web", "a1", 0): true})
	text := pb.String()
	gw := GatewayMAC("lbt", "ta", "a-web")
	want := "lb web vip 10.1.0.100,fd00:1::100 mac " + VIPMAC("lbt", "network a-web", "web") +
		" listen tcp:80:8080 select source 90s backends 10.1.0.11/fd00:1::11@02:00:00:00:00:11,10.1.0.12/-@02:00:00:00:00:12,10.2.0.13/-@" + gw
	if text != want {
		t.Errorf("text\n%s\nwant\n%s", text, want)
	}
	if got := pb.DownText(); got != "web/10.1.0.11,web/fd00:1::11" {
		t.Errorf("down %q", got)
	}
	back, err := ParsePortBalancers(text)
	if err != nil {
		t.Fatal(err)
	}
	back = back.WithDown(pb.DownText())
	if back.String() != text || back.DownText() != pb.DownText() || !back[0].Backends[0].Down || back[0].Backends[1].Down {
		t.Errorf("read back %q down %q", back.String(), back.DownText())
	}
	if back[0].Affinity != 90*time.Second || !back[0].Source || back[0].VIPs[1] != netip.MustParseAddr("fd00:1::100") {
		t.Errorf("read back %+v", back[0])
	}
	for _, bad := range []string{"", "lb x", "lb web vip 10.1.0.100 mac 02:00:00:00:00:01 listen tcp:80 select hash backends -/-@02:00:00:00:00:02",
		"lb web vip 10.1.0.100 mac 02:00:00:00:00:01 listen tcp:80:80 select round backends -/-@02:00:00:00:00:02",
		"lb web vip 10.1.0.100 mac 02:00:00:00:00:01 listen tcp:80:80 select hash backends 10.1.0.1/-@zz"} {
		if _, err := ParsePortBalancers(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The lab's model puts every connected vNIC's port of a network whose
// router has load balancers under a KindLB resource, with every load
// balancer of the router (a client on a-db reaches a-web's VIP, its
// backends through its own gateway); a host's model the same on its own
// ports only; the twin tenant's ports get their own tenant's.
func TestBalancerModel(t *testing.T) {
	s := loadLBSpec(t)
	lbs := func(rs []Resource) map[string]Resource {
		out := map[string]Resource{}
		for _, r := range rs {
			if r.Kind == KindLB {
				out[r.NS+"/"+r.Link] = r
			}
		}
		return out
	}
	lab := lbs(Model(s, Options{}))
	want := []string{
		"vnet.lbt.hv1/" + VNICPortName("lbt", "a1", 0), "vnet.lbt.hv2/" + VNICPortName("lbt", "a2", 0), "vnet.lbt.hv3/" + VNICPortName("lbt", "a3", 0),
		"vnet.lbt.hv2/" + VNICPortName("lbt", "b1", 0),
	}
	if len(lab) != len(want) {
		t.Errorf("lab: %d KindLB, want %d: %v", len(lab), len(want), lab)
	}
	for _, k := range want {
		if _, ok := lab[k]; !ok {
			t.Errorf("lab: no load balancers on %s", k)
		}
	}
	a, b := lab["vnet.lbt.hv2/"+VNICPortName("lbt", "a2", 0)], lab["vnet.lbt.hv2/"+VNICPortName("lbt", "b1", 0)]
	if a.Match == b.Match || !strings.Contains(b.Match, "listen udp:53:53") || strings.Contains(b.Match, "10.1.0.12") {
		t.Errorf("the twin tenant's port:\n%s\n%s", a.Match, b.Match)
	}
	// a3 on a-db: a-web's VIP, a-web's backends at a-db's gateway, a3 its own.
	db := lab["vnet.lbt.hv3/"+VNICPortName("lbt", "a3", 0)].Match
	gwDB := GatewayMAC("lbt", "ta", "a-db")
	if !strings.Contains(db, "vip 10.1.0.100") || !strings.Contains(db, "10.1.0.11/fd00:1::11@"+gwDB) || !strings.Contains(db, "10.2.0.13/-@02:00:00:00:00:13") {
		t.Errorf("a routed client's port:\n%s", db)
	}
	// A host's model: its own ports, in its own namespace, with health.
	down := map[string]bool{BackendKey("network a-web", "web", "a2", 0): true}
	hv2 := lbs(Model(s, Options{Host: "hv2", LBDown: down}))
	if len(hv2) != 2 {
		t.Errorf("hv2: %v", hv2)
	}
	r, ok := hv2[CurrentNS+"/"+VNICPortName("lbt", "a2", 0)]
	if !ok || r.Why != "web/10.1.0.12" || !strings.HasPrefix(r.Owner, "lbt: ") {
		t.Errorf("hv2's a2 port: %+v", r)
	}
	if r := hv2[CurrentNS+"/"+VNICPortName("lbt", "b1", 0)]; r.Why != "" {
		t.Errorf("the other tenant's health: %+v", r)
	}
	// Health changes a port's Why only: a change in place.
	before := Model(s, Options{Host: "hv2"})
	p := Diff(Model(s, Options{Host: "hv2", LBDown: down}), before)
	if len(p.Actions) != 1 {
		t.Fatalf("plan:\n%s", p)
	}
	for _, a := range p.Actions {
		if a.Op != OpModify || a.New.Kind != KindLB || !strings.Contains(a.String(), "down none -> web/10.1.0.12") {
			t.Errorf("action %s", a)
		}
	}
	// What status reads: the ports, each load balancer with its site.
	ports := BalancerPorts(s, "", "")
	if len(ports) != 4 {
		t.Fatalf("ports %v", ports)
	}
	for _, p := range ports {
		if p.Port == VNICPortName("lbt", "a3", 0) {
			lb, ok := p.LBOf("10.1.0.100", "10.1.0.12", 8080, "tcp")
			if !ok || lb.Site != "network a-web" || lb.Name != "web" {
				t.Errorf("a3's port: %+v %v", lb, ok)
			}
		}
	}
}

// Slots gives each backend an even share, and a backend going down gives
// up only its own slots.
func TestSlots(t *testing.T) {
	ids := []string{"10.1.0.11/-@02:00:00:00:00:11", "10.1.0.12/-@02:00:00:00:00:12", "10.1.0.13/-@02:00:00:00:00:13"}
	for _, c := range []struct {
		n, m int
	}{{3, 257}, {10, 257}, {50, 1031}, {64, 2053}} {
		ids := ids
		for len(ids) < c.n {
			ids = append(ids, netip.AddrFrom4([4]byte{10, 9, 0, byte(len(ids))}).String())
		}
		if SlotCount(c.n) != c.m {
			t.Errorf("%d backends: %d slots, want %d", c.n, SlotCount(c.n), c.m)
		}
		up := make([]bool, c.n)
		for i := range up {
			up[i] = true
		}
		table := Slots(ids, up, c.m)
		share := make([]int, c.n)
		for _, b := range table {
			if b < 0 {
				t.Fatalf("%d backends: an empty slot", c.n)
			}
			share[b]++
		}
		lo, hi := c.m, 0
		for _, n := range share {
			lo, hi = min(lo, n), max(hi, n)
		}
		if hi-lo > 1 {
			t.Errorf("%d backends: shares %d..%d", c.n, lo, hi)
		}
		up[1] = false
		after := Slots(ids, up, c.m)
		moved := 0
		for i := range table {
			if table[i] == 1 {
				if after[i] == 1 {
					t.Fatalf("slot %d still on the backend that is down", i)
				}
				continue
			}
			if after[i] != table[i] {
				moved++
			}
		}
		// Maglev moves a few slots of the backends that stay up: a
		// connection's backend is kept by connection tracking anyway.
		if moved > c.m/10 {
			t.Errorf("%d backends: %d of %d slots of backends that stayed up moved", c.n, moved, c.m)
		}
	}
	none := Slots(ids, []bool{false, false, false}, 257)
	for _, b := range none {
		if b != -1 {
			t.Fatal("a slot with every backend down")
		}
	}
}
