package clustertest

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
)

// twoTenants is nstest's two tenants, on the harness's three machines.
const twoTenants = nstest.TwoTenants

var tenantIP = nstest.TenantIP

// tcpTo sends a line from one namespace to an address over TCP, to a
// listener in another namespace, and reads it back.
func tcpTo(t *testing.T, fromNS, toNS, ip string) {
	t.Helper()
	var l net.Listener
	if err := inNS(toNS, func() (err error) { l, err = net.Listen("tcp", ":7777"); return }); err != nil {
		t.Fatalf("listen in %s: %v", toNS, err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, 64)
		n, _ := conn.Read(buf)
		_, _ = conn.Write(buf[:n])
	}()
	var conn net.Conn
	err := inNS(fromNS, func() (err error) {
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(ip, "7777"), 3*time.Second)
		return
	})
	if err != nil {
		t.Fatalf("tcp %s -> %s (%s): %v", fromNS, ip, toNS, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Write([]byte("hello tenant")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := conn.Read(buf); err != nil || string(buf[:n]) != "hello tenant" {
		t.Fatalf("tcp %s -> %s: read %q, %v", fromNS, ip, buf[:n], err)
	}
}

// unreachable checks that nothing answers a TCP connection from a
// namespace to an address within a short time.
func unreachable(t *testing.T, fromNS, addr string) {
	t.Helper()
	err := inNS(fromNS, func() error {
		conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err == nil {
			conn.Close()
		}
		return err
	})
	if err == nil {
		t.Errorf("%s reached %s", fromNS, addr)
	}
}

func TestClusterNetworksIsolation(t *testing.T) {
	c := faultCluster(t, 4*time.Minute, "hv1", "hv2", "hv3")
	infra := c.Infra()
	ns := func(vm string) string { return plan.NSName(infra, vm) }
	applySpec(t, c, infra, c.Spec(infra, twoTenants))
	waitConverged(t, c, infra, 1, 30*time.Second)

	// What the agents made reads back as what they wanted: a restarted
	// agent finds nothing to change (every neighbour, bridge and tunnel
	// entry, port setting and router namespace's setting as planned).
	hv1 := c.Machine("hv1")
	hv1.KillAgent()
	logBefore := len(hv1.AgentLog())
	hv1.StartAgent("--interval", "30s")
	time.Sleep(2 * time.Second)
	if after := hv1.AgentLog()[logBefore:]; strings.Contains(after, "applied") || strings.Contains(after, "error") {
		t.Errorf("restarted agent changed something:\n%s", after)
	}

	// Default routes through each network's gateway.
	for vm, gw := range map[string]string{"a1": "10.1.0.1", "a2": "10.1.0.1", "a3": "10.1.0.1", "a4": "10.2.0.1",
		"b1": "10.1.0.1", "b2": "10.1.0.1", "b3": "10.1.0.1"} {
		if out, err := exec.Command("ip", "-n", ns(vm), "route", "add", "default", "via", gw).CombinedOutput(); err != nil {
			t.Fatalf("route in %s: %v\n%s", vm, err, out)
		}
	}
	vms := []string{"a1", "a2", "a3", "a4", "b1", "b2", "b3"}
	counters := map[string]*frameCounter{}
	for _, vm := range vms {
		echo(t, ns(vm))
		counters[vm] = countFrames(t, ns(vm), "eth0", "TENANT-A-TAG", "TENANT-B-TAG", "VXLAN-INJECT", "SPOOF-TAG")
	}
	before := map[string]uint64{}
	for _, vm := range vms {
		before[vm] = linkStats(t, ns(vm), "eth0").RxPackets
	}

	// Every pair inside a tenant talks: UDP and TCP, on one network
	// across hosts and through the router between networks.
	pairs := [][2]string{{"a1", "a2"}, {"a1", "a3"}, {"a2", "a3"}, {"a1", "a4"}, {"a2", "a4"}, {"a3", "a4"},
		{"b1", "b2"}, {"b1", "b3"}, {"b2", "b3"}}
	for _, p := range pairs {
		for _, dir := range [][2]string{{p[0], p[1]}, {p[1], p[0]}} {
			if sent, got := udpPing(t, ns(dir[0]), tenantIP[dir[1]], 20*time.Millisecond, 5); got != sent {
				t.Errorf("udp %s -> %s: %d sent, %d answered", dir[0], dir[1], sent, got)
			}
		}
		tcpTo(t, ns(p[0]), ns(p[1]), tenantIP[p[1]])
	}
	// The twin answered each of its tenant's: b's echo never saw a's
	// datagrams, which carried the same addresses.

	// Broadcast and tagged unicast from a1: every a-web VM gets the
	// broadcast, no b VM gets anything tagged, and a4 (another network)
	// no broadcast.
	bcast := ethFrame("ff:ff:ff:ff:ff:ff", "02:00:00:00:00:11", unix.ETH_P_IP,
		ipv4UDP("10.1.0.11", "10.1.0.255", 4000, 4000, []byte("TENANT-A-TAG broadcast")))
	ucast := ethFrame("02:00:00:00:00:12", "02:00:00:00:00:11", unix.ETH_P_IP,
		ipv4UDP("10.1.0.11", "10.1.0.12", 4000, 4000, []byte("TENANT-A-TAG unicast")))
	mcast := ethFrame("01:00:5e:01:02:03", "02:00:00:00:00:11", unix.ETH_P_IP,
		ipv4UDP("10.1.0.11", "239.1.2.3", 4000, 4000, []byte("TENANT-A-TAG multicast")))
	sendFrames(t, ns("a1"), "eth0", 20, bcast, ucast, mcast)
	// A broadcast storm from b1 with a's MACs forged as source, and
	// unicast to the MAC b2 shares with a2.
	storm := ethFrame("ff:ff:ff:ff:ff:ff", "02:00:00:00:00:12", unix.ETH_P_IP,
		ipv4UDP("10.1.0.12", "10.1.0.255", 4000, 4000, []byte("TENANT-B-TAG storm")))
	spoof := ethFrame("02:00:00:00:00:13", "02:00:00:00:00:11", unix.ETH_P_IP,
		ipv4UDP("10.1.0.11", "10.1.0.13", 4000, 4000, []byte("SPOOF-TAG to the twin MAC")))
	sendFrames(t, ns("b1"), "eth0", 2000, storm, spoof)
	// VXLAN from inside a VM, with tenant a's VNI, to hv2's and hv3's
	// tunnel endpoints through b's gateway: the router has no route to the
	// underlay, so it must die there.
	inner := ethFrame("02:00:00:00:00:12", "02:00:00:00:00:11", unix.ETH_P_IP,
		ipv4UDP("10.1.0.11", "10.1.0.12", 4000, 4000, []byte("VXLAN-INJECT")))
	gwB := plan.GatewayMAC(infra, "tb", "b-web")
	for _, m := range c.Machines[1:] {
		for _, vni := range vniGuesses(t, c, infra) {
			pkt := ethFrame(gwB, "02:00:00:00:00:11", unix.ETH_P_IP,
				ipv4UDP("10.1.0.11", m.IP, 4789, 4789, append(vxlanHeader(vni), inner...)))
			sendFrames(t, ns("b1"), "eth0", 10, pkt)
		}
	}
	time.Sleep(time.Second)

	for _, vm := range []string{"a2", "a3"} {
		if got := counters[vm].Tagged("TENANT-A-TAG"); got < 20 {
			t.Errorf("%s got %d of a1's tagged broadcasts (sent 20)", vm, got)
		}
	}
	if got := counters["a2"].Tagged("TENANT-A-TAG"); got < 40 {
		t.Errorf("a2 got %d of a1's broadcasts and unicasts (sent 40)", got)
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
		for _, tag := range []string{"TENANT-B-TAG", "SPOOF-TAG", "VXLAN-INJECT"} {
			if got := counters[vm].Tagged(tag); got != 0 {
				t.Errorf("%s (tenant a) got %d frames tagged %s from tenant b", vm, got, tag)
			}
		}
	}
	// A storm loses frames on a busy host (half of them on a slow CI
	// machine, where the counter's socket falls behind); a tenth is
	// enough to show the path was open and the zeros above mean something.
	if got := counters["b3"].Tagged("SPOOF-TAG"); got < 200 {
		t.Errorf("b3 got %d of b1's 2000 unicasts to its MAC: the storm test proves nothing", got)
	}
	for _, vm := range vms {
		t.Logf("%s eth0: %d frames received during the test", vm, linkStats(t, ns(vm), "eth0").RxPackets-before[vm])
	}

	// Routed traffic is counted at the source host, on its router's leg.
	rns := plan.RouterNSName(infra, "ta", "hv1")
	leg := plan.RouterLegName("a-db")
	tx := linkStats(t, rns, leg).TxPackets
	if sent, got := udpPing(t, ns("a1"), tenantIP["a4"], 10*time.Millisecond, 50); got != sent {
		t.Errorf("a1 -> a4 through router ta: %d sent, %d answered", sent, got)
	}
	if d := linkStats(t, rns, leg).TxPackets - tx; d < 50 {
		t.Errorf("hv1's router ta sent %d packets into a-db for 50 datagrams a1 -> a4", d)
	}
	// Different routers share nothing: b has no network 10.2.0.0/24.
	if sent, got := udpPing(t, ns("b1"), "10.2.0.14", 20*time.Millisecond, 5); got != 0 {
		t.Errorf("b1 reached a4 across routers: %d of %d answered", got, sent)
	}

	// ARP is answered on the source host: a1 asks for a2 (on hv2), and a2
	// never sees the request.
	arps := counters["a2"].ARPFor("10.1.0.12")
	if out, err := exec.Command("ip", "-n", ns("a1"), "neigh", "flush", "all").CombinedOutput(); err != nil {
		t.Fatalf("neigh flush: %v\n%s", err, out)
	}
	sendFrames(t, ns("a1"), "eth0", 5, arpRequest("02:00:00:00:00:11", "10.1.0.11", "10.1.0.12"))
	if sent, got := udpPing(t, ns("a1"), "10.1.0.12", 20*time.Millisecond, 3); got != sent {
		t.Errorf("a1 -> a2 after flushing its neighbours: %d sent, %d answered", sent, got)
	}
	time.Sleep(200 * time.Millisecond)
	if got := counters["a2"].ARPFor("10.1.0.12") - arps; got != 0 {
		t.Errorf("a2 on hv2 received %d ARP requests for itself from a1 on hv1: they should be answered on hv1", got)
	}
	neigh, _ := exec.Command("ip", "-n", ns("a1"), "neigh", "show", "10.1.0.12").CombinedOutput()
	if !strings.Contains(string(neigh), "02:00:00:00:00:12") {
		t.Errorf("a1's neighbour entry for a2: %s", neigh)
	}

	// IPv6 neighbour discovery stays in its network: a1 reaches a2 at its
	// link-local address (the same as b2's: both derive from the MAC), a2
	// sees a1's solicitations, b2 none.
	ll := "fe80::ff:fe00:12"
	nsA, nsB := counters["a2"].SolicitationsFor(ll), counters["b2"].SolicitationsFor(ll)
	if out, err := exec.Command("ip", "-n", ns("a1"), "-6", "neigh", "flush", "all").CombinedOutput(); err != nil {
		t.Fatalf("neigh flush: %v\n%s", err, out)
	}
	if sent, got := udpPing(t, ns("a1"), ll+"%eth0", 20*time.Millisecond, 5); got != sent {
		t.Errorf("a1 -> a2 over IPv6 link-local: %d sent, %d answered", sent, got)
	}
	time.Sleep(200 * time.Millisecond)
	if counters["a2"].SolicitationsFor(ll) == nsA {
		t.Errorf("a2 saw no neighbour solicitation for %s: the test proves nothing", ll)
	}
	if got := counters["b2"].SolicitationsFor(ll) - nsB; got != 0 {
		t.Errorf("b2 (tenant b) received %d of tenant a's neighbour solicitations", got)
	}

	// A frame a VM addresses to its network's bridge itself, for the
	// host's underlay address, goes nowhere: the bridge has no address,
	// and the host's stack drops what comes in through it for others
	// (strict reverse-path filtering).
	var hostConn net.PacketConn
	if err := inNS(hv1.NS, func() (err error) { hostConn, err = net.ListenPacket("udp4", ":9999"); return }); err != nil {
		t.Fatal(err)
	}
	defer hostConn.Close()
	toHost := ethFrame(plan.StableMAC(infra, "netbridge/hv1/b-web"), "02:00:00:00:00:11", unix.ETH_P_IP,
		ipv4UDP("10.1.0.11", hv1.IP, 4000, 9999, []byte("TO-THE-HOST")))
	sendFrames(t, ns("b1"), "eth0", 20, toHost)
	_ = hostConn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, _, err := hostConn.ReadFrom(make([]byte, 64)); err == nil {
		t.Errorf("hv1's own socket at %s:9999 got %d bytes from b1 through b-web's bridge", hv1.IP, n)
	}

	// A VM reaches neither the underlay, nor its host's addresses, nor etcd.
	for _, addr := range []string{UnderlayNet + "1:2379", c.Machine("hv1").IP + ":22", UnderlayNet + "12:4789"} {
		unreachable(t, ns("a1"), addr)
		unreachable(t, ns("b1"), addr)
	}

	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := leftovers(t, c, infra)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after destroy, left: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// vniGuesses are the VNIs of tenant a's networks as hv1 has them: what an
// attacker who knew them would forge.
func vniGuesses(t *testing.T, c *Cluster, infra string) []int {
	t.Helper()
	var out []int
	for _, n := range []string{"a-web", "a-db"} {
		text, err := c.Machine("hv3").Exec("ip", "-d", "link", "show", plan.NetVTEPName(infra, n))
		if err != nil {
			t.Fatalf("tunnel of %s on hv3: %v\n%s", n, err, text)
		}
		f := strings.Fields(text)
		for i := range f {
			if f[i] == "id" && i+1 < len(f) {
				var v int
				for _, ch := range f[i+1] {
					v = v*10 + int(ch-'0')
				}
				out = append(out, v)
			}
		}
	}
	return out
}

// A VM of a network that moves to another host keeps its address and MAC,
// the other hosts' tunnels and bridges send its frames to the new host,
// and its peers reach it there.
func TestClusterNetworkVMMoves(t *testing.T) {
	c := faultCluster(t, 90*time.Second, "hv1", "hv2", "hv3")
	infra := c.Infra()
	ns := func(vm string) string { return plan.NSName(infra, vm) }
	hv3 := c.Machine("hv3")
	applySpec(t, c, infra, c.Spec(infra, twoTenants))
	waitConverged(t, c, infra, 1, 30*time.Second)
	echo(t, ns("a2"))
	if sent, got := udpPing(t, ns("a1"), "10.1.0.12", 20*time.Millisecond, 3); got != sent {
		t.Fatalf("a1 -> a2 before the move: %d of %d", got, sent)
	}

	// The harness's machines share /run/netns, where a VM's namespace has
	// one name on every host: hv3's agent waits until hv2 removed a2's.
	hv3.KillAgent()
	applySpec(t, c, infra, c.Spec(infra, strings.Replace(twoTenants, "{name: a2, host: hv2", "{name: a2, host: hv3", 1)))
	waitFor(t, 20*time.Second, "a2 gone from hv2", func() (bool, string) {
		return !nsExists(ns("a2")), "still there"
	})
	hv3.StartAgent("--interval", "30s")
	started := time.Now()
	waitFor(t, 20*time.Second, "a2 on hv3", func() (bool, string) {
		out, err := exec.Command("ip", "-n", ns("a2"), "-o", "addr", "show", "eth0").CombinedOutput()
		return err == nil && strings.Contains(string(out), "10.1.0.12/24"), string(out)
	})
	echo(t, ns("a2"))
	var first time.Duration
	waitFor(t, 20*time.Second, "a1 reaches a2 on hv3", func() (bool, string) {
		_, got := udpPing(t, ns("a1"), "10.1.0.12", 10*time.Millisecond, 3)
		first = time.Since(started)
		return got > 0, "no answer"
	})
	t.Logf("a1 (hv1) reaches a2 at its address on hv3 %s after hv3's agent started", first.Round(time.Millisecond))
	waitConverged(t, c, infra, 2, 30*time.Second)
	mac, _ := exec.Command("ip", "-n", ns("a2"), "-o", "link", "show", "eth0").CombinedOutput()
	if !strings.Contains(string(mac), "02:00:00:00:00:12") {
		t.Errorf("a2 lost its MAC in the move: %s", mac)
	}
	fdb, _ := c.Machine("hv1").Exec("bridge", "fdb", "show", "dev", plan.NetVTEPName(infra, "a-web"))
	if !strings.Contains(fdb, "02:00:00:00:00:12 dst "+hv3.IP) || strings.Contains(fdb, "02:00:00:00:00:12 dst "+c.Machine("hv2").IP) {
		t.Errorf("hv1's tunnel of a-web does not send a2's frames to hv3 only:\n%s", fdb)
	}
	// From a VM on its new host, and through the router from another network.
	if out, err := exec.Command("ip", "-n", ns("a2"), "route", "replace", "default", "via", "10.1.0.1").CombinedOutput(); err != nil {
		t.Fatalf("route in a2: %v\n%s", err, out)
	}
	for _, from := range []string{"a4", "a3"} {
		if out, err := exec.Command("ip", "-n", ns(from), "route", "replace", "default", "via", map[string]string{"a4": "10.2.0.1", "a3": "10.1.0.1"}[from]).CombinedOutput(); err != nil {
			t.Fatalf("route in %s: %v\n%s", from, err, out)
		}
		if sent, got := udpPing(t, ns(from), "10.1.0.12", 20*time.Millisecond, 5); got != sent {
			t.Errorf("%s -> a2 on hv3: %d of %d answered", from, got, sent)
		}
	}
}
