package clustertest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// pgTeamTunnels is a network whose tunnels a port group carries, on a
// switch that teams each machine's two real NICs: eth1 active, eth2
// standby, and the port group's pool "tunnels" with a limit shared by both.
const pgTeamTunnels = `name: %s
hosts:
  - name: hv1
    nics:
      - {name: vmnic0, device: eth1, speed: 1Gbit}
      - {name: vmnic1, device: eth2, speed: 1Gbit}
  - name: hv2
    nics:
      - {name: vmnic0, device: eth1, speed: 1Gbit}
      - {name: vmnic1, device: eth2, speed: 1Gbit}
switches:
  - name: dvs
    uplinks:
      - {name: up1, nics: {hv1: vmnic0, hv2: vmnic0}}
      - {name: up2, nics: {hv1: vmnic1, hv2: vmnic1}}
    teaming: {policy: failover, active: [up1], standby: [up2]}
    ioc: {enabled: true, pools: {tunnels: {shares: high, limit: 800Mbit}}}
    portgroups:
      - {name: pg-tun, pool: tunnels}
hostports:
  - {host: hv1, portgroup: pg-tun, ip: 10.9.0.11/24, name: vtep0}
  - {host: hv2, portgroup: pg-tun, ip: 10.9.0.12/24, name: vtep0}
networks:
  - {name: web, subnet: 10.1.0.0/24, portgroup: pg-tun}
vms:
  - {name: w1, host: hv1, nics: [{network: web, ip: 10.1.0.11/24}]}
  - {name: w2, host: hv2, nics: [{network: web, ip: 10.1.0.12/24}]}
`

// teamWire gives each machine eth1 and eth2, veths whose far ends are
// ports of one emulated physical switch (bridge pbr in namespace phys):
// machine i's are p1-i and p2-i. All of it goes when the test ends.
func teamWire(t *testing.T, c *Cluster) (phys string) {
	t.Helper()
	phys = c.Prefix + "-phys"
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", phys).Run() })
	c.ip("netns", "add", phys)
	c.ip("-n", phys, "link", "add", "pbr", "type", "bridge")
	c.ip("-n", phys, "link", "set", "pbr", "up")
	for i, m := range c.Machines {
		for _, nic := range []string{"1", "2"} {
			port := fmt.Sprintf("p%s-%d", nic, i)
			c.ip("-n", m.NS, "link", "add", "eth"+nic, "type", "veth", "peer", "name", port, "netns", phys)
			c.ip("-n", phys, "link", "set", port, "master", "pbr", "up")
			c.ip("-n", m.NS, "link", "set", "eth"+nic, "up")
		}
	}
	return phys
}

// poolClassOn is the HTB class of a pool on one of hv1's devices, as the
// plan numbers it.
func poolClassOn(t *testing.T, src, pool, dev string) string {
	t.Helper()
	doc, err := spec.Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range plan.Model(doc.Spec, plan.Options{Host: "hv1"}) {
		if r.Kind == plan.KindPool && r.Link == dev && strings.Contains(r.Owner, "pool "+pool+" ") {
			return fmt.Sprintf("1:%x", r.Class)
		}
	}
	t.Fatalf("no class of pool %s on hv1's %s", pool, dev)
	return ""
}

// A network's tunnels on a port group of a switch that teams two real NICs:
// its traffic between the machines leaves hv1 by the active NIC, counted in
// the port group's pool there; when that NIC loses carrier the host port,
// and with it the tunnel, fails over to the standby NIC, where the traffic
// resumes within a few seconds and is counted in the same pool; destroy
// leaves nothing.
func TestClusterNetworkPortGroupTeam(t *testing.T) {
	c := faultCluster(t, 3*time.Minute, "hv1", "hv2")
	phys := teamWire(t, c)
	hv1 := c.Machine("hv1")
	infra := c.Infra()
	ns := func(vm string) string { return plan.NSName(infra, vm) }
	eth1, eth2 := "p1-0", "p2-0" // hv1's NICs as the physical switch sees them
	p1 := countFrames(t, phys, eth1, "pt-A", "pt-B")
	p2 := countFrames(t, phys, eth2, "pt-A", "pt-B")
	before := map[string]string{}
	for _, m := range c.Machines {
		for _, dev := range []string{"eth1", "eth2"} {
			before[m.Host+" "+dev] = deviceState(t, m.NS, dev)
		}
	}

	src := fmt.Sprintf(pgTeamTunnels, infra)
	applySpec(t, c, infra, src)
	waitConverged(t, c, infra, 1, 30*time.Second)
	waitLog(t, hv1, "teaming agent started", 10*time.Second)
	if out, _ := hv1.Exec("ip", "-d", "link", "show", plan.NetVTEPName(infra, "web")); !strings.Contains(out, "local 10.9.0.11") {
		t.Fatalf("web's tunnel on hv1 does not start at its host port:\n%s", out)
	}
	echo(t, ns("w2"))
	waitFor(t, 10*time.Second, "w1 reaches w2", func() (bool, string) {
		_, got := udpPing(t, ns("w1"), "10.1.0.12", 20*time.Millisecond, 3)
		return got > 0, "no answer"
	})

	// Teamed, up1 active: the tunnel's datagrams leave hv1 by eth1 only.
	if got := sendTagged(t, ns("w1"), "10.1.0.12", "pt-A", 50); got < 45 || p1.Tagged("pt-A") < got || p2.Tagged("pt-A") != 0 {
		t.Fatalf("up1 active: %d of 50 answered, the physical switch saw %d from eth1, %d from eth2",
			got, p1.Tagged("pt-A"), p2.Tagged("pt-A"))
	}
	class1, class2 := poolClassOn(t, src, "tunnels", "eth1"), poolClassOn(t, src, "tunnels", "eth2")
	counters := func() (pool1, pool2, rx1, rx2 int64) {
		return tcBytes(t, hv1, "class", "show", "dev", "eth1", "classid", class1),
			tcBytes(t, hv1, "class", "show", "dev", "eth2", "classid", class2),
			int64(rxBytes(t, phys, eth1)), int64(rxBytes(t, phys, eth2))
	}
	// A stream's bytes, encapsulated, are at least what arrived: in the
	// pool's class on the NIC it leaves by and on the physical switch's
	// port of that NIC; the other NIC carries at most a tenth of it.
	stream := func(phase, via string) {
		t.Helper()
		a1, a2, r1, r2 := counters()
		sent, took := bulkTCP(t, ns("w1"), ns("w2"), "10.1.0.12", 2*time.Second)
		b1, b2, s1, s2 := counters()
		t.Logf("%s: %d bytes in %s; pool tunnels on eth1 +%d, on eth2 +%d; the physical switch received +%d from eth1, +%d from eth2",
			phase, sent, took.Round(time.Millisecond), b1-a1, b2-a2, s1-r1, s2-r2)
		if sent == 0 {
			t.Fatalf("%s: the stream carried nothing", phase)
		}
		pool, other, rx, otherRx := b1-a1, b2-a2, s1-r1, s2-r2
		if via == "eth2" {
			pool, other, rx, otherRx = other, pool, otherRx, rx
		}
		if pool < sent {
			t.Errorf("%s: pool tunnels on %s sent %d bytes during a stream of %d: the tunnel is not in its port group's pool", phase, via, pool, sent)
		}
		if rx < sent {
			t.Errorf("%s: the physical switch received %d bytes from %s during a stream of %d", phase, rx, via, sent)
		}
		if other > sent/10 || otherRx > sent/10 {
			t.Errorf("%s: the other NIC carried %d bytes in the pool (%d on the wire) of a stream of %d", phase, other, otherRx, sent)
		}
	}
	stream("up1 active", "eth1")

	// The physical switch's port of eth1 goes down: eth1 loses carrier and
	// the teaming agent moves the host port to up2. A datagram every 10 ms
	// crosses the cut; the tunnel's traffic resumes over eth2.
	pg := startPinger(t, ns("w1"), "10.1.0.12", 10*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	cut := time.Now()
	c.ip("-n", phys, "link", "set", eth1, "down")
	waitLog(t, hv1, "port hv1/vtep0 up1 -> up2", 10*time.Second)
	t.Logf("failover logged %s after the cut", time.Since(cut).Round(time.Millisecond))
	// Rounds of 50 until most are answered, each through eth2 only: on a
	// loaded machine the first answers may take a moment.
	var got int
	for round := 0; got < 45 && time.Since(cut) < 10*time.Second; round++ {
		got = sendTagged(t, ns("w1"), "10.1.0.12", "pt-B", 50)
		t.Logf("after the cut, round %d at %s: %d of 50 answered", round, time.Since(cut).Round(time.Millisecond), got)
	}
	resumed := time.Since(cut)
	sent, answered := pg.Stop()
	t.Logf("across the cut: %d datagrams sent, %d answered; most answered again %s after the cut",
		sent, answered, resumed.Round(time.Millisecond))
	if got < 45 {
		t.Fatalf("10 s after eth1's cut only %d of 50 datagrams are answered", got)
	}
	if p2.Tagged("pt-B") < got || p1.Tagged("pt-B") != 0 {
		t.Fatalf("after eth1's cut the physical switch saw %d from eth2 and %d from eth1, %d answered", p2.Tagged("pt-B"), p1.Tagged("pt-B"), got)
	}
	if answered == 0 || sent-answered > 500 {
		t.Errorf("across the cut %d of %d datagrams were lost: more than 5 s of traffic", sent-answered, sent)
	}
	stream("up2 after the failover", "eth2")

	// eth1 back: the host port fails back to up1.
	c.ip("-n", phys, "link", "set", eth1, "up")
	waitLog(t, hv1, "port hv1/vtep0 up2 -> up1", 10*time.Second)

	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "nothing left after destroy", func() (bool, string) {
		left := leftovers(t, c, infra)
		return len(left) == 0, strings.Join(left, ", ")
	})
	waitLog(t, hv1, "teaming agent stopped", 10*time.Second)
	for _, m := range c.Machines {
		if out, err := m.Exec("ip", "-o", "link", "show", "vtep0"); err == nil {
			t.Errorf("%s's host port vtep0 is still there after destroy: %s", m.Host, out)
		}
		for _, dev := range []string{"eth1", "eth2"} {
			if s := deviceState(t, m.NS, dev); s != before[m.Host+" "+dev] {
				t.Errorf("%s's %s after destroy:\n%s\nwas:\n%s", m.Host, dev, s, before[m.Host+" "+dev])
			}
		}
	}
}
