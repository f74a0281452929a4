package clustertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostPortsSpec is two machines whose data0 (a veth the test made, its far
// end a port of an emulated physical switch) is the one uplink of a
// distributed switch with Network I/O Control, and a vMotion host port on
// each, beside a management one on hv1. The hosts have no underlay
// address, so the switch is not tunneled: what crosses from one machine's
// host port to the other's goes over the physical switch.
const hostPortsSpec = `name: %s
hosts:
  - {name: hv1, nics: [{name: vmnic1, device: data0, speed: 1Gbit}]}
  - {name: hv2, nics: [{name: vmnic1, device: data0, speed: 1Gbit}]}
switches:
  - name: dvs
    uplinks: [{name: up1, nics: {hv1: vmnic1, hv2: vmnic1}}]
    ioc: {enabled: true, pools: {vmotion: {shares: high}}}
    portgroups:
      - {name: pg-mgmt, pool: management}
      - {name: pg-vmotion, pool: vmotion, security: {macChanges: false, forgedTransmits: false}}
hostports:
  - {host: hv1, portgroup: pg-mgmt, ip: 10.51.0.11/24, name: mgmt0}
  - {host: hv1, portgroup: pg-vmotion, ip: 10.50.0.11/24, name: vmotion0}
  - {host: hv2, portgroup: pg-vmotion, ip: 10.50.0.12/24, name: vmotion0}
`

// Host ports on real hosts under `vnet agent host`: each is a veth pair in
// the machine's namespace, the address on the host port's end, and TCP
// between the two machines' vMotion addresses leaves hv1 by its real
// uplink, counted in the vmotion pool's class there and not in
// management's. A restarted agent changes nothing; destroy removes the
// host ports and gives data0 back as it was.
func TestClusterHostPortsOnRealUplinks(t *testing.T) {
	c := faultCluster(t, 2*time.Minute, "hv1", "hv2")
	dataWire(t, c)
	hv1, hv2 := c.Machine("hv1"), c.Machine("hv2")
	infra := c.Infra()
	before := deviceState(t, hv1.NS, "data0")
	src := fmt.Sprintf(hostPortsSpec, infra)
	applySpec(t, c, infra, src)
	waitConverged(t, c, infra, 1, 30*time.Second)

	for m, addr := range map[*Machine]string{hv1: "10.50.0.11/24", hv2: "10.50.0.12/24"} {
		if out, _ := m.Exec("ip", "-o", "addr", "show", "dev", "vmotion0"); !strings.Contains(out, addr) {
			t.Fatalf("%s's vmotion0 in the machine's namespace has no %s:\n%s", m.Host, addr, out)
		}
	}
	index := ifindex(t, hv1.NS, "vmotion0")

	// A restarted agent reads the host ports back as planned.
	hv1.KillAgent()
	seen := len(hv1.AgentLog())
	hv1.StartAgent("--interval", "30s")
	time.Sleep(2 * time.Second)
	if after := hv1.AgentLog()[seen:]; strings.Contains(after, "applied") || strings.Contains(after, "error") {
		t.Errorf("the restarted agent changed something:\n%s", after)
	}
	if now := ifindex(t, hv1.NS, "vmotion0"); now != index {
		t.Errorf("vmotion0 was made again by the restarted agent (ifindex %d -> %d)", index, now)
	}

	vmotion, mgmt := poolClass(t, src, "vmotion"), poolClass(t, src, "management")
	wire := c.Prefix + "-data"
	port := "d" + strconv.Itoa(machineIndex(c, hv1))
	counters := func() (vm, mg, rx int64) {
		return tcBytes(t, hv1, "class", "show", "dev", "data0", "classid", vmotion),
			tcBytes(t, hv1, "class", "show", "dev", "data0", "classid", mgmt),
			int64(rxBytes(t, wire, port))
	}
	vm0, mg0, rx0 := counters()
	sent, took := bulkTCP(t, hv1.NS, hv2.NS, "10.50.0.12", 2*time.Second)
	vm1, mg1, rx1 := counters()
	t.Logf("vmotion0 hv1 -> hv2: %d bytes in %s; on hv1's data0 pool vmotion +%d, management +%d; the physical switch received +%d from hv1",
		sent, took.Round(time.Millisecond), vm1-vm0, mg1-mg0, rx1-rx0)
	if sent == 0 {
		t.Fatal("TCP between the vMotion host ports carried nothing")
	}
	if vm1-vm0 < sent {
		t.Errorf("pool vmotion on hv1's data0 sent %d bytes during a stream of %d: the host port's traffic is not in its pool", vm1-vm0, sent)
	}
	if mg1-mg0 > sent/10 {
		t.Errorf("pool management sent %d bytes during vmotion's stream of %d", mg1-mg0, sent)
	}
	if rx1-rx0 < sent {
		t.Errorf("the physical switch received %d bytes from hv1's data0 during a stream of %d: the traffic did not cross the real uplink", rx1-rx0, sent)
	}

	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "nothing left after destroy", func() (bool, string) {
		left := leftovers(t, c, infra)
		return len(left) == 0, strings.Join(left, ", ")
	})
	for _, m := range []*Machine{hv1, hv2} {
		for _, link := range []string{"vmotion0", "mgmt0"} {
			if out, err := m.Exec("ip", "-o", "link", "show", link); err == nil {
				t.Errorf("%s's host port %s is still there after destroy: %s", m.Host, link, out)
			}
		}
	}
	if s := deviceState(t, hv1.NS, "data0"); s != before {
		t.Errorf("data0 after destroy:\n%s\nwas:\n%s", s, before)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "state-hv1", "hostagent", "devices", "host", "data0.json")); !os.IsNotExist(err) {
		t.Errorf("data0's record is left after destroy (%v)", err)
	}
}

// machineIndex is a machine's place in the cluster, which names its port
// on dataWire's bridge.
func machineIndex(c *Cluster, m *Machine) int {
	for i, x := range c.Machines {
		if x == m {
			return i
		}
	}
	return -1
}

// A host port on a switch that teams two real NICs (eth1 active, eth2
// standby) is steered like a VM's port: its datagrams to the peer behind
// the physical switch leave by eth1, and when eth1 loses carrier the
// machine's teaming agent moves it to eth2.
func TestClusterHostPortTeamFailover(t *testing.T) {
	c := faultCluster(t, 2*time.Minute, "hv1")
	m := c.Machine("hv1")
	infra := c.Infra()
	phys, peer := realNICs(t, c, m)
	echo(t, peer)
	p1 := countFrames(t, phys, "p1", "hp-A", "hp-B")
	p2 := countFrames(t, phys, "p2", "hp-A", "hp-B")
	src := fmt.Sprintf(`name: %s
hosts:
  - name: hv1
    nics:
      - {name: vmnic0, device: eth1, speed: 1Gbit}
      - {name: vmnic1, device: eth2, speed: 1Gbit}
switches:
  - name: dvs0
    uplinks:
      - {name: up1, nics: {hv1: vmnic0}}
      - {name: up2, nics: {hv1: vmnic1}}
    teaming: {policy: failover, active: [up1], standby: [up2]}
    ioc: {enabled: true}
    portgroups:
      - {name: pg-vmotion, pool: vmotion}
hostports:
  - {host: hv1, portgroup: pg-vmotion, ip: 10.88.0.5/24, name: vmotion0}
`, infra)
	applySpec(t, c, infra, src)
	waitConverged(t, c, infra, 1, 30*time.Second)
	waitLog(t, m, "teaming agent started", 10*time.Second)
	if got := sendTagged(t, m.NS, "10.88.0.100", "hp-A", 50); got < 45 || p1.Tagged("hp-A") < got || p2.Tagged("hp-A") != 0 {
		t.Fatalf("host port on up1: %d of 50 answered, p1 saw %d, p2 %d", got, p1.Tagged("hp-A"), p2.Tagged("hp-A"))
	}
	c.ip("-n", phys, "link", "set", "p1", "down")
	waitLog(t, m, "port hv1/vmotion0 up1 -> up2", 10*time.Second)
	if got := sendTagged(t, m.NS, "10.88.0.100", "hp-B", 50); got < 45 || p2.Tagged("hp-B") < got || p1.Tagged("hp-B") != 0 {
		t.Fatalf("host port after eth1's cut: %d of 50 answered, p2 saw %d, p1 %d", got, p2.Tagged("hp-B"), p1.Tagged("hp-B"))
	}
	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "nothing left after destroy", func() (bool, string) {
		left := leftovers(t, c, infra)
		return len(left) == 0, strings.Join(left, ", ")
	})
}
