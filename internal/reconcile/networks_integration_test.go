package reconcile_test

import (
	"errors"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
)

// twoTenantsOneMachine is nstest's two tenants over three hosts, as
// namespaces of one machine.
func twoTenantsOneMachine(infra string) string {
	return `name: ` + infra + `
hosts:
  - {name: hv1, underlay: 192.0.2.11}
  - {name: hv2, underlay: 192.0.2.12}
  - {name: hv3, underlay: 192.0.2.13}
` + nstest.TwoTenants
}

var tenantAddr = nstest.TenantIP

var tenantGateway = map[string]string{"a1": "10.1.0.1", "a2": "10.1.0.1", "a3": "10.1.0.1", "a4": "10.2.0.1",
	"b1": "10.1.0.1", "b2": "10.1.0.1", "b3": "10.1.0.1"}

// defaultRoute gives a VM its route through its gateway (vnet sets no
// routes in VMs).
func defaultRoute(t *testing.T, vmNS, gw string) {
	t.Helper()
	if out, err := exec.Command("ip", "-n", vmNS, "route", "replace", "default", "via", gw).CombinedOutput(); err != nil {
		t.Fatalf("route in %s: %v\n%s", vmNS, err, out)
	}
}

// tcpHello sends a line over TCP from one namespace to a listener at addr
// in another, and checks it comes back.
func tcpHello(t *testing.T, fromNS, toNS, addr string) {
	t.Helper()
	l := nstest.Listen(t, toNS, ":7777")
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		buf := make([]byte, 64)
		n, _ := conn.Read(buf)
		_, _ = conn.Write(buf[:n])
	}()
	conn, err := nstest.Dial(t, fromNS, net.JoinHostPort(addr, "7777"), net.Dialer{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("tcp %s -> %s (%s): %v", fromNS, addr, toNS, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Write([]byte("hello tenant")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := conn.Read(buf); err != nil || string(buf[:n]) != "hello tenant" {
		t.Fatalf("tcp %s -> %s: read %q, %v", fromNS, addr, buf[:n], err)
	}
}

// Two tenants with the same subnets and MACs over three hosts on one
// machine: every pair inside a tenant talks (UDP, TCP, ARP answered on the
// source host), no frame crosses tenants (counted on packet sockets),
// routed traffic flows through the source host's router, a second apply
// changes nothing, drift is repaired by a full apply, a VM that moves keeps
// its address and is reached on its new host, and destroy leaves nothing.
func TestNetworksOnOneMachine(t *testing.T) {
	eng := nstest.Engine(t)
	infra := nstest.Infra("itnets")
	ns := func(node string) string { return plan.NSName(infra, node) }
	src := twoTenantsOneMachine(infra)
	nstest.Apply(t, eng, src)
	if p := planOf(t, eng, src, true); p != "" {
		t.Fatalf("a second apply would do:\n%s", p)
	}
	if _, res := nstest.Apply(t, eng, src); !res.Plan.Empty() {
		t.Fatalf("the second apply did:\n%s", res.Plan)
	}

	vms := []string{"a1", "a2", "a3", "a4", "b1", "b2", "b3"}
	counters := map[string]*nstest.FrameCounter{}
	for _, vm := range vms {
		defaultRoute(t, ns(vm), tenantGateway[vm])
		nstest.Echo(t, ns(vm))
		counters[vm] = nstest.CountFrames(t, ns(vm), "eth0", "TENANT-A-TAG", "TENANT-B-TAG", "SPOOF-TAG")
	}

	// Every pair inside a tenant talks, both ways: on one network across
	// hosts and through the router between networks. The twins with the
	// same addresses in the other tenant would answer the same datagrams.
	pairs := [][2]string{{"a1", "a2"}, {"a1", "a3"}, {"a2", "a3"}, {"a1", "a4"}, {"a2", "a4"}, {"a3", "a4"},
		{"b1", "b2"}, {"b1", "b3"}, {"b2", "b3"}}
	for _, p := range pairs {
		for _, dir := range [][2]string{{p[0], p[1]}, {p[1], p[0]}} {
			if sent, got := nstest.UDPPing(t, ns(dir[0]), tenantAddr[dir[1]], 20*time.Millisecond, 5); got != sent {
				t.Errorf("udp %s -> %s: %d sent, %d answered", dir[0], dir[1], sent, got)
			}
		}
		tcpHello(t, ns(p[0]), ns(p[1]), tenantAddr[p[1]])
	}

	// Tagged broadcast, unicast and multicast from a1 reach a-web's VMs and
	// nothing of tenant b or of a-db; a storm from b1 with a's MACs forged
	// as source, and unicast to the MAC b3 shares with a3, reach no VM of
	// tenant a while the unicast reaches b3.
	bcast := nstest.EthFrame("ff:ff:ff:ff:ff:ff", "02:00:00:00:00:11", unix.ETH_P_IP,
		nstest.IPv4UDP("10.1.0.11", "10.1.0.255", 4000, 4000, []byte("TENANT-A-TAG broadcast")))
	ucast := nstest.EthFrame("02:00:00:00:00:12", "02:00:00:00:00:11", unix.ETH_P_IP,
		nstest.IPv4UDP("10.1.0.11", "10.1.0.12", 4000, 4000, []byte("TENANT-A-TAG unicast")))
	mcast := nstest.EthFrame("01:00:5e:01:02:03", "02:00:00:00:00:11", unix.ETH_P_IP,
		nstest.IPv4UDP("10.1.0.11", "239.1.2.3", 4000, 4000, []byte("TENANT-A-TAG multicast")))
	nstest.SendFrames(t, ns("a1"), "eth0", 20, bcast, ucast, mcast)
	storm := nstest.EthFrame("ff:ff:ff:ff:ff:ff", "02:00:00:00:00:12", unix.ETH_P_IP,
		nstest.IPv4UDP("10.1.0.12", "10.1.0.255", 4000, 4000, []byte("TENANT-B-TAG storm")))
	spoof := nstest.EthFrame("02:00:00:00:00:13", "02:00:00:00:00:11", unix.ETH_P_IP,
		nstest.IPv4UDP("10.1.0.11", "10.1.0.13", 4000, 4000, []byte("SPOOF-TAG to the twin MAC")))
	nstest.SendFrames(t, ns("b1"), "eth0", 1000, storm, spoof)
	time.Sleep(time.Second)
	if got := counters["a2"].Tagged("TENANT-A-TAG"); got < 40 {
		t.Errorf("a2 got %d of a1's broadcasts and unicasts (sent 40)", got)
	}
	if got := counters["a3"].Tagged("TENANT-A-TAG"); got < 20 {
		t.Errorf("a3 got %d of a1's broadcasts (sent 20)", got)
	}
	if got := counters["a4"].Tagged("TENANT-A-TAG"); got != 0 {
		t.Errorf("a4 (network a-db) got %d of a-web's frames", got)
	}
	for _, vm := range []string{"b1", "b2", "b3"} {
		if got := counters[vm].Tagged("TENANT-A-TAG"); got != 0 {
			t.Errorf("%s (tenant b) got %d of tenant a's frames", vm, got)
		}
	}
	for _, vm := range []string{"a1", "a2", "a3", "a4"} {
		for _, tag := range []string{"TENANT-B-TAG", "SPOOF-TAG"} {
			if got := counters[vm].Tagged(tag); got != 0 {
				t.Errorf("%s (tenant a) got %d frames tagged %s from tenant b", vm, got, tag)
			}
		}
	}
	// A busy host's counter socket loses frames of a storm; a tenth
	// shows the path was open.
	if got := counters["b3"].Tagged("SPOOF-TAG"); got < 100 {
		t.Errorf("b3 got %d of b1's 1000 unicasts to its MAC: the zeros above prove nothing", got)
	}

	// Routed traffic leaves on the source host's router: a1 (hv1) to a4
	// (hv3) is counted on hv1's leg of router ta into a-db.
	rns, leg := plan.RouterNSName(infra, "ta", "hv1"), plan.RouterLegName("a-db")
	tx := nstest.LinkStats(t, rns, leg).TxPackets
	if sent, got := nstest.UDPPing(t, ns("a1"), tenantAddr["a4"], 10*time.Millisecond, 50); got != sent {
		t.Errorf("a1 -> a4 through router ta: %d sent, %d answered", sent, got)
	}
	if d := nstest.LinkStats(t, rns, leg).TxPackets - tx; d < 50 {
		t.Errorf("hv1's router ta sent %d packets into a-db for 50 datagrams a1 -> a4", d)
	}
	// Tenant b's router has no network 10.2.0.0/24.
	if sent, got := nstest.UDPPing(t, ns("b1"), "10.2.0.14", 20*time.Millisecond, 5); got != 0 {
		t.Errorf("b1 reached a4 across routers: %d of %d answered", got, sent)
	}
	// No VM reaches the underlay, where hv1 reaches hv2.
	nstest.Echo(t, ns("hv2"))
	if sent, got := nstest.UDPPing(t, ns("hv1"), "192.0.2.12", 20*time.Millisecond, 3); got != sent {
		t.Errorf("hv1 -> hv2 on the underlay: %d of %d answered: the test below proves nothing", got, sent)
	}
	for _, vm := range []string{"a1", "b1"} {
		if sent, got := nstest.UDPPing(t, ns(vm), "192.0.2.12", 20*time.Millisecond, 3); got != 0 {
			t.Errorf("%s reached hv2's underlay address: %d of %d answered", vm, got, sent)
		}
	}

	// ARP is answered on the source host: a1 (hv1) asks for a2 (hv2), and
	// a2 never sees the request.
	arps := counters["a2"].ARPFor("10.1.0.12")
	if out, err := exec.Command("ip", "-n", ns("a1"), "neigh", "flush", "all").CombinedOutput(); err != nil {
		t.Fatalf("neigh flush: %v\n%s", err, out)
	}
	nstest.SendFrames(t, ns("a1"), "eth0", 5, nstest.ARPRequest("02:00:00:00:00:11", "10.1.0.11", "10.1.0.12"))
	if sent, got := nstest.UDPPing(t, ns("a1"), "10.1.0.12", 20*time.Millisecond, 3); got != sent {
		t.Errorf("a1 -> a2 after flushing its neighbours: %d sent, %d answered", sent, got)
	}
	time.Sleep(200 * time.Millisecond)
	if got := counters["a2"].ARPFor("10.1.0.12") - arps; got != 0 {
		t.Errorf("a2 on hv2 received %d ARP requests for itself from a1 on hv1: they should be answered on hv1", got)
	}

	// Drift: a tunnel removed by hand is left by a scoped apply of a
	// change elsewhere and made again by a full one.
	vtep := plan.NetVTEPName(infra, "b-web")
	if out, err := exec.Command("ip", "-n", ns("hv2"), "link", "del", vtep).CombinedOutput(); err != nil {
		t.Fatalf("remove b-web's tunnel on hv2: %v\n%s", err, out)
	}
	if p := planOf(t, eng, src, true); !strings.Contains(p, "create vxlan "+vtep) {
		t.Fatalf("a full apply would not make the tunnel again:\n%s", p)
	}
	eng.Full = true
	nstest.Apply(t, eng, src)
	eng.Full = false
	if p := planOf(t, eng, src, true); p != "" {
		t.Fatalf("after the full apply, still to do:\n%s", p)
	}
	if sent, got := nstest.UDPPing(t, ns("b1"), "10.1.0.12", 20*time.Millisecond, 3); got != sent {
		t.Errorf("b1 -> b2 after the repair: %d of %d answered", got, sent)
	}

	// The bridges of these networks, which have no IPv6, have it off; IPv6
	// turned on by hand is drift, which a full apply repairs.
	bridgeIPv6 := func() string {
		out, err := exec.Command("ip", "netns", "exec", ns("hv1"), "cat",
			"/proc/sys/net/ipv6/conf/"+plan.NetBridgeName(infra, "a-web")+"/disable_ipv6").CombinedOutput()
		if err != nil {
			t.Fatalf("read a-web's bridge's disable_ipv6 on hv1: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := bridgeIPv6(); got != "1" {
		t.Errorf("a-web's bridge on hv1 (a network without IPv6): disable_ipv6 %s, want 1", got)
	}
	if out, err := exec.Command("ip", "netns", "exec", ns("hv1"), "sysctl", "-qw",
		"net.ipv6.conf."+plan.NetBridgeName(infra, "a-web")+".disable_ipv6=0").CombinedOutput(); err != nil {
		t.Fatalf("turn IPv6 on: %v\n%s", err, out)
	}
	if p := planOf(t, eng, src, true); !strings.Contains(p, "disable_ipv6 ? -> 1") {
		t.Fatalf("a full apply would not turn IPv6 off again:\n%s", p)
	}
	eng.Full = true
	nstest.Apply(t, eng, src)
	eng.Full = false
	if got := bridgeIPv6(); got != "1" {
		t.Errorf("after the full apply, a-web's bridge on hv1 has disable_ipv6 %s, want 1", got)
	}

	// a2 moves from hv2 to hv3: same address and MAC, hv1's tunnel sends
	// its frames to hv3 only, and its peers reach it there, on its network
	// and through the router.
	moved := strings.Replace(src, "{name: a2, host: hv2", "{name: a2, host: hv3", 1)
	nstest.Apply(t, eng, moved)
	if p := planOf(t, eng, moved, true); p != "" {
		t.Fatalf("after the move, a full apply would do:\n%s", p)
	}
	link, _ := exec.Command("ip", "-n", ns("a2"), "-o", "link", "show", "eth0").CombinedOutput()
	addr, _ := exec.Command("ip", "-n", ns("a2"), "-o", "addr", "show", "eth0").CombinedOutput()
	if !strings.Contains(string(link), "02:00:00:00:00:12") || !strings.Contains(string(addr), "10.1.0.12/24") {
		t.Errorf("a2 after the move:\n%s%s", link, addr)
	}
	fdb, _ := exec.Command("bridge", "-n", ns("hv1"), "fdb", "show", "dev", plan.NetVTEPName(infra, "a-web")).CombinedOutput()
	if !strings.Contains(string(fdb), "02:00:00:00:00:12 dst 192.0.2.13") || strings.Contains(string(fdb), "02:00:00:00:00:12 dst 192.0.2.12") {
		t.Errorf("hv1's tunnel of a-web does not send a2's frames to hv3 only:\n%s", fdb)
	}
	defaultRoute(t, ns("a2"), "10.1.0.1") // its vNIC is new; its namespace, with its echo, is not
	for _, from := range []string{"a1", "a3", "a4"} {
		if sent, got := nstest.UDPPing(t, ns(from), "10.1.0.12", 20*time.Millisecond, 5); got != sent {
			t.Errorf("%s -> a2 on hv3: %d of %d answered", from, got, sent)
		}
	}
	if sent, got := nstest.UDPPing(t, ns("b1"), "10.1.0.12", 20*time.Millisecond, 3); got != sent {
		t.Errorf("b1 -> b2, a2's twin, after a2 moved: %d of %d answered", got, sent)
	}

	if _, err := eng.Destroy(infra); err != nil {
		t.Fatal(err)
	}
	nstest.AssertGone(t, infra)
}

// A failed apply of networks leaves the machine as it was: nothing after a
// first apply, the VM where it was after a move.
func TestNetworksApplyRollsBack(t *testing.T) {
	eng := nstest.Engine(t)
	infra := nstest.Infra("itnetroll")
	src := twoTenantsOneMachine(infra)
	moved := strings.Replace(src, "{name: a2, host: hv2", "{name: a2, host: hv3", 1)
	for _, tc := range []struct{ name, from, to string }{{"first apply", "", src}, {"a VM moves", src, moved}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.from != "" {
				nstest.Apply(t, eng, tc.from)
			}
			want := nstest.Snapshot(t, infra)
			p, err := eng.Plan(loadSpec(t, tc.to))
			if err != nil {
				t.Fatal(err)
			}
			n := len(p.Actions)
			if n == 0 {
				t.Fatal("nothing to roll back")
			}
			// Failing before each step would take minutes: the first, the
			// last, and some between.
			for _, step := range slices.Compact([]int{0, n / 4, n / 2, 3 * n / 4, n - 1}) {
				eng.FailBefore = func(i int, _ plan.Action) error {
					if i == step {
						return errInjected
					}
					return nil
				}
				_, err := eng.Apply(loadSpec(t, tc.to))
				eng.FailBefore = nil
				if !errors.Is(err, errInjected) || !errors.Is(err, reconcile.ErrRolledBack) {
					t.Fatalf("step %d: error %v", step, err)
				}
				if got := nstest.Snapshot(t, infra); !slices.Equal(want, got) {
					t.Fatalf("step %d (%s): the machine changed:\n%s", step, p.Actions[step], diffLines(want, got))
				}
				if p2, err := eng.Plan(loadSpec(t, tc.to)); err != nil || len(p2.Actions) != n {
					t.Fatalf("step %d: after the rollback the plan has %d actions, not %d (%v)", step, len(p2.Actions), n, err)
				}
			}
			if tc.from != "" {
				if _, err := eng.Destroy(infra); err != nil {
					t.Fatal(err)
				}
			}
			nstest.AssertGone(t, infra)
		})
	}
}

// A scoped apply of a change to one network VM (added, readdressed,
// removed, moved) plans what a full one plans: the entries of the other
// hosts' tunnels and bridges that the VM's change touches are in its scope.
func TestNetworksScopedApplyIsTheFullApply(t *testing.T) {
	eng := nstest.Engine(t)
	infra := nstest.Infra("itnetscope")
	base := twoTenantsOneMachine(infra)
	added := base + `  - {name: a5, host: hv1, nics: [{network: a-db, ip: 10.2.0.15/24, mac: "02:00:00:00:00:15"}]}` + "\n"
	readdressed := strings.Replace(added, "10.2.0.15/24", "10.2.0.25/24", 1)
	moved := strings.Replace(readdressed, "{name: a5, host: hv1", "{name: a5, host: hv2", 1)
	nstest.Apply(t, eng, base)
	for _, step := range []struct{ name, src string }{{"add", added}, {"change address", readdressed}, {"move", moved}, {"remove", base}} {
		t.Run(step.name, func(t *testing.T) {
			full, scoped := planOf(t, eng, step.src, true), planOf(t, eng, step.src, false)
			if full != scoped {
				t.Fatalf("scoped plan:\n%s\nfull plan:\n%s", scoped, full)
			}
			if scoped == "" {
				t.Fatal("nothing to do")
			}
			nstest.Apply(t, eng, step.src)
			if p := planOf(t, eng, step.src, true); p != "" {
				t.Errorf("a full apply after the scoped one would do:\n%s", p)
			}
		})
	}
}
