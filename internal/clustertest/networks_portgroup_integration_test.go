package clustertest

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// Two networks over the same two machines, each with its tunnels on a port
// group of one distributed switch whose uplinks are the machines' data0
// (a second wire between them, not the underlay): "slow" on pg-tun, whose
// pool has a limit and whose host ports are shaped, "fast" on pg-fast, in
// the vm pool and unshaped. The hosts have no underlay address: the host
// ports are the tunnels' only addresses.
const pgTunnels = `switches:
  - name: dvs
    uplinks: [{name: up1, nics: {hv1: vmnic1, hv2: vmnic1}}]
    ioc: {enabled: true, pools: {tunnels: {shares: low, limit: 30Mbit}}}
    portgroups:
      - {name: pg-tun, pool: tunnels, shaping: {egress: {average: 20Mbit, peak: 20Mbit, burst: 64KiB}}}
      - {name: pg-fast}
hostports:
  - {host: hv1, portgroup: pg-tun, ip: 10.9.0.11/24, name: vtep0}
  - {host: hv2, portgroup: pg-tun, ip: 10.9.0.12/24, name: vtep0}
  - {host: hv1, portgroup: pg-fast, ip: 10.9.1.11/24, name: vtep1}
  - {host: hv2, portgroup: pg-fast, ip: 10.9.1.12/24, name: vtep1}
networks:
  - {name: slow, subnet: 10.1.0.0/24, portgroup: pg-tun}
  - {name: fast, subnet: 10.2.0.0/24, portgroup: pg-fast}
vms:
  - {name: s1, host: hv1, nics: [{network: slow, ip: 10.1.0.11/24}]}
  - {name: s2, host: hv2, nics: [{network: slow, ip: 10.1.0.12/24}]}
  - {name: f1, host: hv1, nics: [{network: fast, ip: 10.2.0.11/24}]}
  - {name: f2, host: hv2, nics: [{network: fast, ip: 10.2.0.12/24}]}
`

// dataWire joins the machines' data0 links on a bridge of its own, as a
// second physical network beside the underlay.
func dataWire(t *testing.T, c *Cluster) {
	t.Helper()
	ns := c.Prefix + "-data"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("-n", ns, "link", "add", "dn", "type", "bridge")
	run("-n", ns, "link", "set", "dn", "up")
	for i, m := range c.Machines {
		port := "d" + strconv.Itoa(i)
		run("-n", ns, "link", "add", port, "type", "veth", "peer", "name", "data0", "netns", m.NS)
		run("-n", ns, "link", "set", port, "master", "dn", "up")
		run("-n", m.NS, "link", "set", "data0", "up")
	}
}

// bulkTCP sends as fast as it can from one namespace to a listener in
// another for d, and returns the bytes that arrived and how long the
// receiver took from accepting to the end (what the sockets held when the
// sender stopped arrives after d).
func bulkTCP(t *testing.T, fromNS, toNS, ip string, d time.Duration) (int64, time.Duration) {
	t.Helper()
	var l net.Listener
	if err := inNS(toNS, func() (err error) { l, err = net.Listen("tcp", ":7778"); return }); err != nil {
		t.Fatalf("listen in %s: %v", toNS, err)
	}
	defer l.Close()
	type result struct {
		n    int64
		took time.Duration
	}
	got := make(chan result, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			got <- result{}
			return
		}
		defer conn.Close()
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(d + 10*time.Second))
		n, _ := io.Copy(io.Discard, conn)
		got <- result{n, time.Since(start)}
	}()
	var conn net.Conn
	if err := inNS(fromNS, func() (err error) {
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(ip, "7778"), 3*time.Second)
		return
	}); err != nil {
		t.Fatalf("tcp %s -> %s: %v", fromNS, ip, err)
	}
	buf := make([]byte, 64<<10)
	end := time.Now().Add(d)
	_ = conn.SetWriteDeadline(end)
	for time.Now().Before(end) {
		if _, err := conn.Write(buf); err != nil {
			break
		}
	}
	conn.Close()
	r := <-got
	return r.n, r.took
}

var sentBytes = regexp.MustCompile(`Sent (\d+) bytes`)

// tcBytes is what tc reports a class or qdisc sent ("Sent N bytes").
func tcBytes(t *testing.T, m *Machine, args ...string) int64 {
	t.Helper()
	out, err := m.Exec(append([]string{"tc", "-s"}, args...)...)
	match := sentBytes.FindStringSubmatch(out)
	if err != nil || match == nil {
		t.Fatalf("tc -s %s on %s: %v\n%s", strings.Join(args, " "), m.Host, err, out)
	}
	n, _ := strconv.ParseInt(match[1], 10, 64)
	return n
}

// poolClass is the class of a pool on hv1's data0, as the plan numbers it.
func poolClass(t *testing.T, src, pool string) string {
	t.Helper()
	doc, err := spec.Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range plan.Model(doc.Spec, plan.Options{Host: "hv1"}) {
		if r.Kind == plan.KindPool && r.Link == "data0" && strings.Contains(r.Owner, "pool "+pool+" ") {
			return fmt.Sprintf("1:%x", r.Class)
		}
	}
	t.Fatalf("no class of pool %s on hv1's data0", pool)
	return ""
}

func TestClusterNetworkPortGroup(t *testing.T) {
	c := faultCluster(t, 2*time.Minute, "hv1", "hv2")
	dataWire(t, c)
	infra := c.Infra()
	ns := func(vm string) string { return plan.NSName(infra, vm) }
	src := fmt.Sprintf("name: %s\nhosts:\n", infra)
	for _, h := range []string{"hv1", "hv2"} {
		src += fmt.Sprintf("  - {name: %s, nics: [{name: vmnic1, device: data0, speed: 1Gbit}]}\n", h)
	}
	src += pgTunnels
	applySpec(t, c, infra, src)
	waitConverged(t, c, infra, 1, 30*time.Second)
	hv1 := c.Machine("hv1")
	// The host ports, their shapers and the uplink's pools read back as
	// planned: a restarted agent changes nothing.
	hv1.KillAgent()
	logBefore := len(hv1.AgentLog())
	hv1.StartAgent("--interval", "30s")
	time.Sleep(2 * time.Second)
	if after := hv1.AgentLog()[logBefore:]; strings.Contains(after, "applied") || strings.Contains(after, "error") {
		t.Errorf("restarted agent changed something:\n%s", after)
	}
	if out, _ := hv1.Exec("ip", "-d", "link", "show", plan.NetVTEPName(infra, "slow")); !strings.Contains(out, "local 10.9.0.11") {
		t.Fatalf("slow's tunnel on hv1 does not start at its host port:\n%s", out)
	}
	for _, vm := range []string{"s2", "f2"} {
		echo(t, ns(vm))
	}
	for from, to := range map[string]string{"s1": "10.1.0.12", "f1": "10.2.0.12"} {
		waitFor(t, 10*time.Second, from+" reaches "+to, func() (bool, string) {
			_, got := udpPing(t, ns(from), to, 20*time.Millisecond, 3)
			return got > 0, "no answer"
		})
	}

	tunnels, vm := poolClass(t, src, "tunnels"), poolClass(t, src, "vm")
	counters := func() (tun, vmPool, shaper int64) {
		return tcBytes(t, hv1, "class", "show", "dev", "data0", "classid", tunnels),
			tcBytes(t, hv1, "class", "show", "dev", "data0", "classid", vm),
			tcBytes(t, hv1, "qdisc", "show", "dev", "vtep0")
	}
	const secs = 3
	tun0, vm0, sh0 := counters()
	slow, slowTook := bulkTCP(t, ns("s1"), ns("s2"), "10.1.0.12", secs*time.Second)
	tun1, vm1, sh1 := counters()
	fast, fastTook := bulkTCP(t, ns("f1"), ns("f2"), "10.2.0.12", secs*time.Second)
	tun2, vm2, _ := counters()
	rate := func(n int64, took time.Duration) float64 { return float64(n) * 8 / took.Seconds() }
	slowRate, fastRate := rate(slow, slowTook), rate(fast, fastTook)
	t.Logf("slow (pg-tun): %d bytes in %s (%.1f Mbit/s): pool tunnels +%d, vm +%d, vtep0's shaper +%d",
		slow, slowTook.Round(time.Millisecond), slowRate/1e6, tun1-tun0, vm1-vm0, sh1-sh0)
	t.Logf("fast (pg-fast): %d bytes in %s (%.1f Mbit/s): pool tunnels +%d, vm +%d",
		fast, fastTook.Round(time.Millisecond), fastRate/1e6, tun2-tun1, vm2-vm1)

	// The counters put each network's tunnel traffic in its port group's
	// pool on the uplink (encapsulated, so at least what arrived), and the
	// slow network's through its port group's shaper.
	if slow == 0 || fast == 0 {
		t.Fatalf("a stream carried nothing: slow %d, fast %d bytes", slow, fast)
	}
	if tun1-tun0 < slow {
		t.Errorf("pool tunnels on hv1's uplink sent %d bytes during slow's stream of %d: the tunnel is not in its port group's pool", tun1-tun0, slow)
	}
	if sh1-sh0 < slow {
		t.Errorf("vtep0's shaper sent %d bytes during slow's stream of %d", sh1-sh0, slow)
	}
	if vm2-vm1 < fast {
		t.Errorf("pool vm on hv1's uplink sent %d bytes during fast's stream of %d", vm2-vm1, fast)
	}
	if d := tun2 - tun1; d > fast/10 {
		t.Errorf("pool tunnels sent %d bytes during fast's stream of %d: fast's tunnel leaked into it", d, fast)
	}
	// Held to the port group's shaping: 20 Mbit/s on average, bar one
	// burst (a slow host only sends less), and below the unshaped
	// network's rate measured alongside.
	if limit := 20e6*1.1 + float64(128<<10)*8/slowTook.Seconds(); slowRate > limit {
		t.Errorf("slow carried %.1f Mbit/s, more than its port group's 20 Mbit/s allows (%.1f with slack)", slowRate/1e6, limit/1e6)
	}
	if fastRate < 2*slowRate {
		t.Errorf("the unshaped network carried %.1f Mbit/s, not twice the shaped one's %.1f", fastRate/1e6, slowRate/1e6)
	}

	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "nothing left after destroy", func() (bool, string) {
		left := leftovers(t, c, infra)
		return len(left) == 0, strings.Join(left, ", ")
	})
	if out, err := hv1.Exec("ip", "-o", "link", "show", "vtep0"); err == nil {
		t.Errorf("hv1's host port vtep0 is still there after destroy: %s", out)
	}
}
