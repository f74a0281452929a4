package clustertest

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
)

// Two tenants over two machines with the same IPv6 addresses and MACs:
// tenant a's web network is dual-stack and its db network IPv6 only, both
// on router ta; tenant b's web network is the twin of a's.
const twoTenants6 = `networks:
  - {name: a-web, subnet: 10.1.0.0/24, gateway: 10.1.0.1, subnet6: "fd00:1::/64", gateway6: "fd00:1::1", router: ta}
  - {name: a-db, subnet6: "fd00:2::/64", gateway6: "fd00:2::1", router: ta}
  - {name: b-web, subnet6: "fd00:1::/64", gateway6: "fd00:1::1", router: tb}
vms:
  - {name: a1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24, ip6: "fd00:1::11/64", mac: "02:00:00:00:00:11"}]}
  - {name: a2, host: hv2, nics: [{network: a-web, ip: 10.1.0.12/24, ip6: "fd00:1::12/64", mac: "02:00:00:00:00:12"}]}
  - {name: a4, host: hv2, nics: [{network: a-db, ip6: "fd00:2::14/64", mac: "02:00:00:00:00:14"}]}
  - {name: b1, host: hv1, nics: [{network: b-web, ip6: "fd00:1::11/64", mac: "02:00:00:00:00:11"}]}
  - {name: b2, host: hv2, nics: [{network: b-web, ip6: "fd00:1::12/64", mac: "02:00:00:00:00:12"}]}
`

// waitAddr6 waits until a VM's IPv6 address has finished duplicate address
// detection (it is no longer tentative), so sockets can use it.
func waitAddr6(t *testing.T, ns, addr string) {
	t.Helper()
	waitFor(t, 10*time.Second, addr+" usable in "+ns, func() (bool, string) {
		out, err := exec.Command("ip", "-n", ns, "-6", "addr", "show", "dev", "eth0").CombinedOutput()
		s := string(out)
		i := strings.Index(s, addr+"/")
		if err != nil || i < 0 {
			return false, s
		}
		line, _, _ := strings.Cut(s[i:], "\n")
		return !strings.Contains(line, "tentative"), s
	})
}

func TestClusterNetworksIPv6(t *testing.T) {
	c := faultCluster(t, 2*time.Minute, "hv1", "hv2")
	infra := c.Infra()
	ns := func(vm string) string { return plan.NSName(infra, vm) }
	applySpec(t, c, infra, c.Spec(infra, twoTenants6))
	waitConverged(t, c, infra, 1, 30*time.Second)

	// What the agent made reads back as planned: IPv6 neighbour entries,
	// the router's IPv6 settings and gateway6 addresses included.
	hv1 := c.Machine("hv1")
	hv1.KillAgent()
	logBefore := len(hv1.AgentLog())
	hv1.StartAgent("--interval", "30s")
	time.Sleep(2 * time.Second)
	if after := hv1.AgentLog()[logBefore:]; strings.Contains(after, "applied") || strings.Contains(after, "error") {
		t.Errorf("restarted agent changed something:\n%s", after)
	}

	addr6 := map[string]string{"a1": "fd00:1::11", "a2": "fd00:1::12", "a4": "fd00:2::14", "b1": "fd00:1::11", "b2": "fd00:1::12"}
	for vm, a := range addr6 {
		waitAddr6(t, ns(vm), a)
		echo(t, ns(vm))
	}
	for vm, gw := range map[string]string{"a1": "fd00:1::1", "a2": "fd00:1::1", "a4": "fd00:2::1", "b1": "fd00:1::1", "b2": "fd00:1::1"} {
		if out, err := exec.Command("ip", "-n", ns(vm), "-6", "route", "add", "default", "via", gw).CombinedOutput(); err != nil {
			t.Fatalf("route in %s: %v\n%s", vm, err, out)
		}
	}
	a2, b2 := countFrames(t, ns("a2"), "eth0"), countFrames(t, ns("b2"), "eth0")

	// The counter sees solicitations that cross: a2's link-local address
	// is in no neighbour table, so a1's solicitations for it reach a2.
	ll := "fe80::ff:fe00:12"
	if sent, got := udpPing(t, ns("a1"), ll+"%eth0", 20*time.Millisecond, 3); got != sent {
		t.Errorf("a1 -> a2 over IPv6 link-local: %d sent, %d answered", sent, got)
	}
	time.Sleep(200 * time.Millisecond)
	if a2.SolicitationsFor(ll) == 0 {
		t.Fatalf("a2 saw no neighbour solicitation for %s: the count below would prove nothing", ll)
	}

	// A solicitation for a remote VM's IPv6 address is answered on the
	// sender's host: a1 (hv1) reaches a2 (hv2) and learns its MAC, and a2
	// counts no solicitation for its address.
	before := a2.SolicitationsFor("fd00:1::12")
	if out, err := exec.Command("ip", "-n", ns("a1"), "-6", "neigh", "flush", "all").CombinedOutput(); err != nil {
		t.Fatalf("neigh flush: %v\n%s", err, out)
	}
	if sent, got := udpPing(t, ns("a1"), "fd00:1::12", 20*time.Millisecond, 5); got != sent {
		t.Errorf("a1 -> a2 over IPv6: %d sent, %d answered", sent, got)
	}
	tcpTo(t, ns("a1"), ns("a2"), "fd00:1::12")
	time.Sleep(200 * time.Millisecond)
	if got := a2.SolicitationsFor("fd00:1::12") - before; got != 0 {
		t.Errorf("a2 on hv2 received %d neighbour solicitations for fd00:1::12: they should be answered on hv1", got)
	}
	neigh, _ := exec.Command("ip", "-n", ns("a1"), "-6", "neigh", "show", "fd00:1::12").CombinedOutput()
	if !strings.Contains(string(neigh), "02:00:00:00:00:12") {
		t.Errorf("a1's neighbour entry for a2: %s", neigh)
	}

	// Routed IPv6 between a tenant's networks, both ways, counted on the
	// source host's router leg.
	rns := plan.RouterNSName(infra, "ta", "hv1")
	leg := plan.RouterLegName("a-db")
	tx := linkStats(t, rns, leg).TxPackets
	if sent, got := udpPing(t, ns("a1"), "fd00:2::14", 10*time.Millisecond, 20); got != sent {
		t.Errorf("a1 -> a4 through router ta: %d sent, %d answered", sent, got)
	}
	if d := linkStats(t, rns, leg).TxPackets - tx; d < 20 {
		t.Errorf("hv1's router ta sent %d packets into a-db for 20 datagrams a1 -> a4", d)
	}
	tcpTo(t, ns("a4"), ns("a1"), "fd00:1::11")

	// Tenant b's twin addresses reach tenant b's VMs only, and b's router
	// knows no fd00:2::/64.
	tcpTo(t, ns("b1"), ns("b2"), "fd00:1::12")
	if sent, got := udpPing(t, ns("b1"), "fd00:2::14", 20*time.Millisecond, 5); got != 0 {
		t.Errorf("b1 reached a4 across routers over IPv6: %d of %d answered", got, sent)
	}
	unreachable(t, ns("b1"), net.JoinHostPort("fd00:2::14", "7777"))
	if got := b2.SolicitationsFor("fd00:1::12") + b2.SolicitationsFor(ll); got != 0 {
		t.Errorf("b2 (tenant b) received %d solicitations for its addresses: tenant a's, or b1's that hv1 should answer", got)
	}

	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "nothing left after destroy", func() (bool, string) {
		left := leftovers(t, c, infra)
		return len(left) == 0, strings.Join(left, ", ")
	})
}
