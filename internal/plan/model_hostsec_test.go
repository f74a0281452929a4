package plan

import (
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// hostSecSpec spans two hosts: port groups with an ACL that names another
// port group, a TAP with and without a MAC, a container's namespace, and
// two networks, one with an ACL naming the other.
const hostSecSpec = `name: dc
hosts:
  - {name: hv1, underlay: 10.0.0.11}
  - {name: hv2, underlay: 10.0.0.12}
switches:
  - name: dvs
    hosts: [hv1, hv2]
    mtu: 1450
    portgroups:
      - name: web
        security: {ipSpoofing: false}
        acl:
          default: deny
          rules:
            - {action: allow, direction: ingress, proto: tcp, dport: 80, from: {portgroup: app}}
      - name: app
      - {name: open, security: {promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true}}
networks:
  - name: a-web
    subnet: 10.1.0.0/24
    acl:
      default: deny
      rules: [{action: allow, direction: ingress, from: {network: a-db}}]
  - {name: a-db, subnet: 10.2.0.0/24, security: {ipSpoofing: false}}
  - {name: a-open, subnet: 10.3.0.0/24, security: {promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true}}
vms:
  - {name: web1, host: hv1, nics: [{portgroup: web, ip: 172.16.0.1/24}]}
  - {name: app1, host: hv1, nics: [{portgroup: app, ip: 172.16.0.11/24}]}
  - {name: app2, host: hv2, nics: [{portgroup: app, ip: 172.16.0.12/24}]}
  - {name: guest1, host: hv1, nics: [{portgroup: web, attach: {tap: tap-g1}, mac: "52:54:00:00:00:01", ip: 172.16.0.2/24}]}
  - {name: guest2, host: hv1, nics: [{portgroup: app, attach: {tap: tap-g2}, ip: 172.16.0.3/24}]}
  - {name: box1, host: hv1, nics: [{portgroup: web, attach: {netns: box1}, ip: 172.16.0.4/24}]}
  - {name: open1, host: hv1, nics: [{portgroup: open, ip: 172.16.0.5/24}]}
  - {name: n1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24}]}
  - {name: n2, host: hv2, nics: [{network: a-db, ip: 10.2.0.12/24}]}
  - {name: n3, host: hv1, nics: [{network: a-open, ip: 10.3.0.13/24}]}
`

func loadText(t *testing.T, src string) *spec.Spec {
	t.Helper()
	doc, err := spec.Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return doc.Spec
}

// portPolicies returns a host model's port policies by port, and its
// firewalls.
func portPolicies(t *testing.T, rs []Resource) (map[string]PortPolicy, []Resource) {
	t.Helper()
	pols := map[string]PortPolicy{}
	var fws []Resource
	for _, r := range rs {
		switch r.Kind {
		case KindPortSec:
			if r.NS != CurrentNS || r.Name != FirewallTable("dc") {
				t.Errorf("%s: want it in %s, table %s", r, CurrentNS, FirewallTable("dc"))
			}
			p, err := ParsePortPolicy(r.Match)
			if err != nil {
				t.Fatal(err)
			}
			pols[r.Link] = p
		case KindFirewall:
			fws = append(fws, r)
		}
	}
	return pols, fws
}

func TestHostModelSecurity(t *testing.T) {
	s := loadText(t, hostSecSpec)
	pols, fws := portPolicies(t, Model(s, Options{Host: "hv1"}))
	if len(fws) != 1 || fws[0].Match != FirewallStateful || fws[0].NS != CurrentNS || fws[0].Name != FirewallTable("dc") {
		t.Fatalf("firewalls %v: want one stateful in the host's namespace, the infrastructure's table", fws)
	}
	cases := []struct {
		name, port string
		want       string // PortPolicy's text, "" for no policy
	}{
		{"VM on an ACL port group: peers on every host", VNICPortName("dc", "web1", 0),
			"mac " + StableMAC("dc", "vnic/web1/0") + " ip 172.16.0.1,0.0.0.0,::," + mustLL(StableMAC("dc", "vnic/web1/0")) +
				" guard mac,ip,ra unicast-only acl deny; allow in tcp dport 80 from 172.16.0.11,172.16.0.12,172.16.0.3"},
		{"TAP with its guest's MAC", "tap-g1",
			"mac 52:54:00:00:00:01 ip 172.16.0.2,0.0.0.0,::," + mustLL("52:54:00:00:00:01") +
				" guard mac,ip,ra unicast-only acl deny; allow in tcp dport 80 from 172.16.0.11,172.16.0.12,172.16.0.3"},
		{"TAP whose guest chose its MAC: no MAC checks", "tap-g2", "mac " + StableMAC("dc", "vnic/guest2/0") + " guard ra"},
		{"container's namespace: its port on the host", VNICPortName("dc", "box1", 0),
			"mac " + StableMAC("dc", "vnic/box1/0") + " ip 172.16.0.4,0.0.0.0,::," + mustLL(StableMAC("dc", "vnic/box1/0")) +
				" guard mac,ip,ra unicast-only acl deny; allow in tcp dport 80 from 172.16.0.11,172.16.0.12,172.16.0.3"},
		{"port group accepting everything", VNICPortName("dc", "open1", 0), ""},
		{"network with the defaults and an ACL naming a network", VNICPortName("dc", "n1", 0),
			"mac " + StableMAC("dc", "vnic/n1/0") + " guard mac,ra unicast-only acl deny; allow in from 10.2.0.12"},
		{"network accepting everything", VNICPortName("dc", "n3", 0), ""},
		{"a VM on another host", VNICPortName("dc", "app2", 0), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, ok := pols[c.port]
			switch {
			case c.want == "" && ok:
				t.Errorf("policy %s, want none", p)
			case c.want != "" && !ok:
				t.Errorf("no policy, want %s", c.want)
			case ok && p.String() != c.want:
				t.Errorf("policy\n%s\nwant\n%s", p, c.want)
			}
		})
	}
	pols2, fws2 := portPolicies(t, Model(s, Options{Host: "hv2"}))
	if len(fws2) != 1 || fws2[0].Match != FirewallBridge {
		t.Errorf("hv2's firewalls %v: want one without connection tracking (no ACL there)", fws2)
	}
	if p, ok := pols2[VNICPortName("dc", "n2", 0)]; !ok || !p.GuardIP || p.Default != "" {
		t.Errorf("n2 on a-db: %v, want the IP guard and no ACL", p)
	}
}

func mustLL(mac string) string {
	a, _ := LinkLocal(mac)
	return a.String()
}

// A VM that joins a peer port group or network on another host changes the
// policies that name it in place (the same key), and nothing else of the
// firewall.
func TestHostModelSecurityFollowsRemoteMembers(t *testing.T) {
	for _, c := range []struct{ name, vm, port, addr string }{
		{"port group", "  - {name: app3, host: hv2, nics: [{portgroup: app, ip: 172.16.0.13/24}]}\n", VNICPortName("dc", "web1", 0), "172.16.0.13"},
		{"network", "  - {name: n4, host: hv2, nics: [{network: a-db, ip: 10.2.0.14/24}]}\n", VNICPortName("dc", "n1", 0), "10.2.0.14"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := Model(loadText(t, hostSecSpec), Options{Host: "hv1"})
			after := Model(loadText(t, hostSecSpec+c.vm), Options{Host: "hv1"})
			old := indexByKey(before)
			var changed []string
			for _, r := range after {
				o, ok := old[r.Key()]
				if r.Kind != KindPortSec && r.Kind != KindFirewall {
					continue
				}
				if !ok {
					t.Errorf("new %s", r)
					continue
				}
				if !Same(o, r) {
					changed = append(changed, r.Link)
					if !strings.Contains(r.Match, c.addr) {
						t.Errorf("%s does not admit %s", r, c.addr)
					}
				}
			}
			if len(changed) == 0 {
				t.Fatal("no policy changed")
			}
			for _, p := range changed {
				if c.name == "network" && p != c.port {
					t.Errorf("changed %s, want only %s", p, c.port)
				}
			}
		})
	}
}
