package spec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// lbSpec is a valid spec with a load balancer in each of two tenants, the
// same VIP in both; each case replaces some text.
const lbSpec = `name: dc
hosts:
  - {name: hv1, underlay: 10.0.0.11}
  - {name: hv2, underlay: 10.0.0.12}
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
        listeners: [{protocol: tcp, port: 80, backendPort: 8080}, {protocol: udp, port: 53}]
        backends: [{vm: a1}, {address: 10.1.0.12}, {vm: a3}]
        selection: {method: source, timeout: 5m}
        healthCheck: {interval: 500ms, fall: 1}
  - {name: a-db, subnet: 10.2.0.0/24, gateway: 10.2.0.1, router: ta}
  - name: b-web
    subnet: 10.1.0.0/24
    loadBalancers:
      - {name: web, vip: 10.1.0.100, listeners: [{protocol: tcp, port: 80}], backends: [{vm: b1}]}
vms:
  - {name: a1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24, ip6: "fd00:1::11/64"}]}
  - {name: a2, host: hv2, nics: [{network: a-web, ip: 10.1.0.12/24, ip6: "fd00:1::12/64"}]}
  - {name: a3, host: hv2, nics: [{network: a-db, ip: 10.2.0.13/24}]}
  - {name: b1, host: hv2, nics: [{network: b-web, ip: 10.1.0.11/24}]}
`

func TestLoadBalancersValid(t *testing.T) {
	doc, err := Load("t.yaml", []byte(lbSpec))
	if err != nil {
		t.Fatalf("%v", err)
	}
	s := doc.Spec
	sites := s.BalancerSites()
	if len(sites) != 2 || sites[0].Name() != "network a-web" || sites[1].Name() != "network b-web" {
		t.Fatalf("sites %v", sites)
	}
	lb := &s.Networks[0].LoadBalancers[0]
	if lb.Method() != SelectSource || lb.AffinityTimeout() != 5*time.Minute {
		t.Errorf("selection %s %v", lb.Method(), lb.AffinityTimeout())
	}
	h, ok := lb.EffectiveHealth()
	if !ok || h.Protocol != "tcp" || h.Port != 8080 || h.Interval != 500*time.Millisecond || h.Timeout != 500*time.Millisecond || h.Rise != 2 || h.Fall != 1 {
		t.Errorf("health %+v", h)
	}
	if b := s.Networks[2].LoadBalancers[0]; b.Method() != SelectHash || b.AffinityTimeout() != 0 {
		t.Errorf("default selection %s", b.Method())
	}
	if _, ok := s.Networks[2].LoadBalancers[0].EffectiveHealth(); ok {
		t.Error("no health check, yet one")
	}
	for i, want := range []struct {
		vm      string
		network string
		routed  bool
	}{{"a1", "a-web", false}, {"a2", "a-web", false}, {"a3", "a-db", true}} {
		got, err := s.ResolveBackend(sites[0], lb.Backends[i])
		if err != nil || got.VM != want.vm || got.Network != want.network || got.Routed(sites[0]) != want.routed {
			t.Errorf("backend %d: %+v %v", i, got, err)
		}
	}
}

func TestLoadBalancersValidation(t *testing.T) {
	const lb = "networks[0].loadBalancers[0]"
	cases := []struct {
		name, old, new, path, msg string
		line                      int
	}{
		{"no vip", "\n        vip: 10.1.0.100\n        vip6: \"fd00:1::100\"", "", lb + ".vip", "needs a vip", 13},
		{"vip with prefix", "vip: 10.1.0.100\n", "vip: 10.1.0.100/24\n", lb + ".vip", "not an address", 14},
		{"vip is ipv6", "vip: 10.1.0.100\n", "vip: \"fd00:1::99\"\n", lb + ".vip", "give it as vip6", 14},
		{"vip6 is ipv4", "vip6: \"fd00:1::100\"", "vip6: 10.1.0.99", lb + ".vip6", "give it as vip", 15},
		{"vip is the gateway", "vip: 10.1.0.100\n", "vip: 10.1.0.1\n", lb + ".vip", "already the address at networks[0].gateway", 14},
		{"vip is a vNIC's", "vip: 10.1.0.100\n", "vip: 10.1.0.12\n", lb + ".vip", "already the address at vms[1].nics[0].ip", 14},
		{"vip broadcast", "vip: 10.1.0.100\n", "vip: 10.1.0.255\n", lb + ".vip", "broadcast", 14},
		{"vip in another network", "vip: 10.1.0.100\n", "vip: 10.2.0.100\n", lb + ".vip", "inside network a-db's subnet", 14},
		{"vip multicast", "vip: 10.1.0.100\n", "vip: 224.0.0.5\n", lb + ".vip", "not a unicast address", 14},
		{"vip twice in a router", "{name: a-db, subnet", "{name: a-db, loadBalancers: [{name: x, vip: 10.1.0.100, listeners: [{protocol: tcp, port: 1}], backends: [{vm: a3}]}], subnet", "networks[1].loadBalancers[0].vip", "also the VIP at networks[0].loadBalancers[0].vip", 20},
		{"name twice in a router", "{name: a-db, subnet", "{name: a-db, loadBalancers: [{name: web, vip: 10.2.0.100, listeners: [{protocol: tcp, port: 1}], backends: [{vm: a3}]}], subnet", "networks[1].loadBalancers[0].name", "duplicate load balancer", 20},
		{"name", "name: web\n        vip: 10.1.0.100\n", "name: Web\n        vip: 10.1.0.100\n", lb + ".name", "lower-case", 13},
		{"no listener", "listeners: [{protocol: tcp, port: 80, backendPort: 8080}, {protocol: udp, port: 53}]", "listeners: []", lb + ".listeners", "needs a listener", 16},
		{"duplicate listener", "{protocol: udp, port: 53}", "{protocol: tcp, port: 80}", lb + ".listeners[1].port", "tcp port 80 is also " + lb + ".listeners[0]'s", 16},
		{"listener protocol", "{protocol: udp, port: 53}", "{protocol: sctp, port: 53}", lb + ".listeners[1].protocol", "want tcp or udp", 16},
		{"listener port", "{protocol: udp, port: 53}", "{protocol: udp, port: 70000}", lb + ".listeners[1].port", "outside 1..65535", 16},
		{"backend port zero", "backendPort: 8080", "backendPort: 0", lb + ".listeners[0].backendPort", "would be taken for the field left out", 16},
		{"no backend", "backends: [{vm: a1}, {address: 10.1.0.12}, {vm: a3}]", "backends: []", lb + ".backends", "needs a backend", 17},
		{"unknown vm", "{vm: a3}]", "{vm: a9}]", lb + ".backends[2].vm", `unknown VM "a9"`, 17},
		{"vm and address", "{vm: a3}]", "{vm: a3, address: 10.2.0.13}]", lb + ".backends[2]", "not both", 17},
		{"backend twice", "{vm: a3}]", "{vm: a1}]", lb + ".backends[2].vm", "already the backend at " + lb + ".backends[0]", 17},
		{"address twice", "{address: 10.1.0.12}", "{address: \"fd00:1::11\"}", lb + ".backends[1].address", "already the backend", 17},
		{"address of no vNIC", "{address: 10.1.0.12}", "{address: 10.1.0.99}", lb + ".backends[1].address", "no vNIC on network a-web or another network of router ta has address 10.1.0.99", 17},
		{"address of another tenant", "{address: 10.1.0.12}", "{address: 10.9.0.1}", lb + ".backends[1].address", "has address 10.9.0.1", 17},
		{"nic out of range", "{vm: a3}]", "{vm: a3, nic: 2}]", lb + ".backends[2].nic", "has no vNIC 2", 17},
		{"backend outside, not routed", "backends: [{vm: b1}]", "backends: [{vm: a1}]", "networks[2].loadBalancers[0].backends[0].vm", "VM a1 has no vNIC on network b-web", 24},
		{"no ipv6 backend", "backends: [{vm: a1}, {address: 10.1.0.12}, {vm: a3}]", "backends: [{vm: a3}]", lb + ".vip6", "no backend has an IPv6 address", 15},
		{"method", "method: source, timeout: 5m", "method: random", lb + ".selection.method", "want hash", 18},
		{"timeout with hash", "method: source, timeout: 5m", "method: hash, timeout: 5m", lb + ".selection.timeout", "for method source", 18},
		{"timeout range", "timeout: 5m}", "timeout: 500ms}", lb + ".selection.timeout", "outside 1s..24h0m0s", 18},
		{"health protocol", "healthCheck: {interval: 500ms, fall: 1}", "healthCheck: {protocol: http}", lb + ".healthCheck.protocol", "want tcp", 19},
		{"health interval", "interval: 500ms", "interval: 10ms", lb + ".healthCheck.interval", "outside 100ms..1h0m0s", 19},
		{"health timeout", "interval: 500ms", "interval: 500ms, timeout: 2s", lb + ".healthCheck.timeout", "the interval", 19},
		{"health fall", "fall: 1", "fall: 11", lb + ".healthCheck.fall", "outside 1..10", 19},
		{"health fall zero", "fall: 1", "fall: 0", lb + ".healthCheck.fall", "would be taken for the field left out", 19},
		{"health port", "fall: 1", "port: 70000", lb + ".healthCheck.port", "outside 1..65535", 19},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(lbSpec, c.old) {
				t.Fatalf("spec has no %q", c.old)
			}
			src := strings.Replace(lbSpec, c.old, c.new, 1)
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

// A VIP apart from every subnet, and load balancers on a port group.
func TestLoadBalancersApartAndPortGroup(t *testing.T) {
	apart := strings.Replace(lbSpec, "vip: 10.1.0.100\n", "vip: 172.16.0.1\n", 1)
	if _, err := Load("t.yaml", []byte(apart)); err != nil {
		t.Errorf("a VIP apart: %v", err)
	}
	const pg = `name: lab
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: sw0
    uplinks: [{name: u1, nics: {esx1: vmnic0}}]
    portgroups:
      - name: pg-web
        loadBalancers:
          - {name: web, vip: 192.168.0.100, listeners: [{protocol: tcp, port: 80}], backends: [{vm: w1}, {address: 192.168.0.12}]}
vms:
  - {name: w1, host: esx1, nics: [{portgroup: pg-web, ip: 192.168.0.11/24}]}
  - {name: w2, host: esx1, nics: [{portgroup: pg-web, ip: 192.168.0.12/24}]}
`
	doc, err := Load("t.yaml", []byte(pg))
	if err != nil {
		t.Fatalf("port group: %v", err)
	}
	if sites := doc.Spec.BalancerSites(); len(sites) != 1 || sites[0].Name() != "portgroup pg-web" {
		t.Errorf("sites %v", sites)
	}
	for _, c := range []struct{ old, new, path, msg string }{
		{"vip: 192.168.0.100", "vip: 192.168.0.11", "switches[0].portgroups[0].loadBalancers[0].vip", "already the address at vms[0].nics[0].ip"},
		{"uplinks: [{name: u1, nics: {esx1: vmnic0}}]", "uplinks: [{name: u1, nics: {esx1: vmnic0}}, {name: u2, nics: {esx1: vmnic1}}]", "switches[0].portgroups[0].loadBalancers", "has 2 uplinks"},
	} {
		src := strings.Replace(pg, c.old, c.new, 1)
		src = strings.Replace(src, "nics: [{name: vmnic0, speed: 1Gbit}]", "nics: [{name: vmnic0, speed: 1Gbit}, {name: vmnic1, speed: 1Gbit}]", 1)
		_, err := Load("t.yaml", []byte(src))
		var es Errors
		if !errors.As(err, &es) {
			t.Fatalf("%s: %v", c.msg, err)
		}
		found := false
		for _, e := range es {
			found = found || e.Path == c.path && strings.Contains(e.Msg, c.msg)
		}
		if !found {
			t.Errorf("got %v, want %s: %s", err, c.path, c.msg)
		}
	}
}
