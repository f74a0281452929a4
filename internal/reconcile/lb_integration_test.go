package reconcile_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
)

// lbOnOneMachine is examples/networks/loadbalancer.yaml (tenant a's VIP
// over three web VMs, one per host; tenant b's same VIP over its own), and
// a load balancer on a port group of the lab's physical network.
func lbOnOneMachine(t *testing.T) (string, string) {
	t.Helper()
	b, err := os.ReadFile("../../examples/networks/loadbalancer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(b), "hosts:\n  - {name: hv1, underlay: 192.0.2.11}\n  - {name: hv2, underlay: 192.0.2.12}\n  - {name: hv3, underlay: 192.0.2.13}\n",
		`hosts:
  - {name: hv1, underlay: 192.0.2.11, nics: [{name: vmnic0, speed: 1Gbit}]}
  - {name: hv2, underlay: 192.0.2.12, nics: [{name: vmnic0, speed: 1Gbit}]}
  - {name: hv3, underlay: 192.0.2.13, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: vmnic0, hv2: vmnic0, hv3: vmnic0}}]
    portgroups:
      - name: pg-app
        loadBalancers:
          - {name: app, vip: 192.168.7.100, listeners: [{protocol: tcp, port: 80, backendPort: 8080}], backends: [{vm: app1}, {address: 192.168.7.12}]}
`, 1)
	src += `  - {name: app1, host: hv1, nics: [{portgroup: pg-app, ip: 192.168.7.11/24}]}
  - {name: app2, host: hv2, nics: [{portgroup: pg-app, ip: 192.168.7.12/24}]}
  - {name: appc, host: hv3, nics: [{portgroup: pg-app, ip: 192.168.7.21/24}]}
`
	return nstest.Rename(t, src)
}

// The load balancers on one machine: clients on every host reach every
// backend through the VIP, IPv4 and IPv6, seen from their own addresses;
// the twin tenant's VIP reaches its own backend; a port group's VIP
// works across the lab's physical switch; a second apply changes nothing;
// status counts the connections; destroy leaves nothing.
func TestLoadBalancersOnOneMachine(t *testing.T) {
	eng := nstest.Engine(t)
	src, infra := lbOnOneMachine(t)
	doc, _ := nstest.Apply(t, eng, src)
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Fatalf("not converged after apply: %v\n%s", err, p)
	}
	ns := func(vm string) string { return plan.NSName(infra, vm) }
	for _, vm := range []string{"web1", "web2", "web3", "b-web1", "app1", "app2"} {
		(&nstest.LBServer{Name: vm, NS: ns(vm), Port: 8080}).Start(t)
	}
	clients := map[string][2]string{"client1": {"10.1.0.21", "fd00:1::21"}, "client2": {"10.1.0.22", "fd00:1::22"}, "client3": {"10.1.0.23", "fd00:1::23"}}
	// The VMs' IPv6 addresses are tentative for a second or so after the
	// apply (duplicate address detection): until each backend answers.
	for _, vip := range []string{"10.1.0.100:80", "[fd00:1::100]:80"} {
		seen, deadline := map[string]bool{}, time.Now().Add(10*time.Second)
		for len(seen) < 3 && time.Now().Before(deadline) {
			if s, _, err := nstest.LBAsk(ns("client1"), vip); err == nil {
				seen[s] = true
			}
		}
	}
	before := lbTotals(t, eng, doc)
	for client, addrs := range clients {
		for i, vip := range []string{"10.1.0.100:80", "[fd00:1::100]:80"} {
			seen := map[string]int{}
			for range 60 {
				s, from, err := nstest.LBAsk(ns(client), vip)
				if err != nil {
					t.Fatalf("%s -> %s: %v", client, vip, err)
				}
				if from != addrs[i] {
					t.Errorf("%s saw %s's connection from %s", s, client, from)
				}
				seen[s]++
			}
			if len(seen) != 3 || seen["b-web1"] != 0 {
				t.Errorf("%s -> %s: %v", client, vip, seen)
			}
		}
	}
	for range 10 {
		if s, from, err := nstest.LBAsk(ns("b-client"), "10.1.0.100:80"); err != nil || s != "b-web1" || from != "10.1.0.21" {
			t.Fatalf("tenant b -> its VIP: %v %s from %s", err, s, from)
		}
	}
	seen := map[string]int{}
	for range 40 {
		s, _, err := nstest.LBAsk(ns("appc"), "192.168.7.100:80")
		if err != nil {
			t.Fatalf("appc -> the port group's VIP: %v", err)
		}
		seen[s]++
	}
	if len(seen) != 2 {
		t.Errorf("the port group's VIP: %v", seen)
	}
	after := lbTotals(t, eng, doc)
	for lb, want := range map[string]uint64{"network a-web/web": 360, "network b-web/web": 10, "portgroup pg-app/app": 40} {
		if got := after[lb] - before[lb]; got != want {
			t.Errorf("status counts %d connections of %s, want %d", got, lb, want)
		}
	}
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Errorf("traffic changed what a plan sees: %v\n%s", err, p)
	}
	if _, err := eng.Destroy(infra); err != nil {
		t.Fatal(err)
	}
	if left := nstest.Snapshot(t, infra); len(left) > 0 {
		t.Errorf("destroy left %v", left)
	}
}

// lbTotals is what status counts of each load balancer's connections.
func lbTotals(t *testing.T, eng *reconcile.Engine, doc *spec.Document) map[string]uint64 {
	t.Helper()
	st, err := eng.Status(doc)
	if err != nil {
		t.Fatal(err)
	}
	total := map[string]uint64{}
	for _, lb := range st.Balancers {
		for _, b := range lb.Backends {
			total[lb.Site+"/"+lb.Name] += b.Connections
		}
	}
	return total
}
