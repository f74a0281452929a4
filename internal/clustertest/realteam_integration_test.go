package clustertest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// Real NICs under `vnet agent host`: a machine's eth1 and eth2 are veths
// the test made (vnet neither creates nor deletes them) whose far ends are
// ports p1 and p2 of an emulated physical switch, with a peer behind it.
// Generation 1 makes eth1 the switch's one uplink; generation 2 teams eth1
// and eth2 (eth1 active, eth2 standby, a pool limit shared by both). The
// traffic of a VM to the peer is counted on the physical switch's ports,
// per phase, by a tag in each datagram.
func TestClusterRealUplinkTeam(t *testing.T) {
	c := faultCluster(t, 2*time.Minute, "hv1")
	m := c.Machine("hv1")
	infra := c.Infra()
	phys, peer := realNICs(t, c, m)
	// Each device as a machine has it: eth1 with an alias and a root
	// qdisc of its own, eth2 with jumbo frames, both up.
	c.ip("-n", m.NS, "link", "set", "eth1", "alias", "uplink A", "up")
	c.ip("-n", m.NS, "link", "set", "eth2", "mtu", "9000", "up")
	tcCmd(t, "-n", m.NS, "qdisc", "replace", "dev", "eth1", "root", "handle", "5:", "pfifo_fast")
	before := map[string]string{"eth1": deviceState(t, m.NS, "eth1"), "eth2": deviceState(t, m.NS, "eth2")}
	echo(t, peer)
	vm := plan.NSName(infra, "vm1")
	p1 := countFrames(t, phys, "p1", "rt-A", "rt-B", "rt-C", "rt-D", "rt-E")
	p2 := countFrames(t, phys, "p2", "rt-A", "rt-B", "rt-C", "rt-D", "rt-E")

	// Generation 1: one real NIC, end to end through the binary.
	one := fmt.Sprintf(`name: %s
hosts:
  - name: hv1
    underlay: %s
    nics:
      - {name: vmnic0, device: eth1, speed: 1Gbit}
switches:
  - name: dvs0
    uplinks:
      - {name: up1, nics: {hv1: vmnic0}}
    portgroups:
      - {name: pg}
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: pg, ip: 10.88.0.1/24}]}
`, infra, m.IP)
	if out, err := c.Vnet("apply", c.WriteSpec("one", one)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitConverged(t, c, infra, 1, 30*time.Second)
	if got := sendTagged(t, vm, "10.88.0.100", "rt-A", 50); got < 45 || p1.Tagged("rt-A") < got || p2.Tagged("rt-A") != 0 {
		t.Fatalf("one real uplink: %d of 50 answered, p1 saw %d, p2 %d", got, p1.Tagged("rt-A"), p2.Tagged("rt-A"))
	}
	if s := deviceState(t, m.NS, "eth2"); s != before["eth2"] {
		t.Errorf("eth2, not in the spec, changed:\n%s\nwas:\n%s", s, before["eth2"])
	}

	// Generation 2: both teamed, eth1 active and eth2 standby.
	two := strings.Replace(one, "      - {name: vmnic0, device: eth1, speed: 1Gbit}\n",
		"      - {name: vmnic0, device: eth1, speed: 1Gbit}\n      - {name: vmnic1, device: eth2, speed: 1Gbit, mtu: 1500}\n", 1)
	two = strings.Replace(two, `      - {name: up1, nics: {hv1: vmnic0}}
    portgroups:
      - {name: pg}`, `      - {name: up1, nics: {hv1: vmnic0}}
      - {name: up2, nics: {hv1: vmnic1}}
    teaming: {policy: failover, active: [up1], standby: [up2]}
    ioc:
      enabled: true
      pools: {vm: {shares: high, limit: 400Mbit}}
    portgroups:
      - {name: pg, pool: vm}`, 1)
	if out, err := c.Vnet("apply", c.WriteSpec("two", two)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitConverged(t, c, infra, 2, 30*time.Second)
	waitLog(t, m, "teaming agent started", 10*time.Second)
	if mtu := linkMTU(t, m.NS, "eth2"); mtu != 1500 {
		t.Errorf("eth2's MTU in the team: %d, want the spec's 1500", mtu)
	}
	if got := sendTagged(t, vm, "10.88.0.100", "rt-B", 50); got < 45 || p1.Tagged("rt-B") < got || p2.Tagged("rt-B") != 0 {
		t.Fatalf("teamed, up1 active: %d of 50 answered, p1 saw %d, p2 %d", got, p1.Tagged("rt-B"), p2.Tagged("rt-B"))
	}
	ceils := poolCeils(t, m.NS, "eth1", "eth2")
	if sum := ceils[0] + ceils[1]; ceils[0] == 0 || ceils[1] == 0 || sum < 396e6 || sum > 404e6 {
		t.Errorf("the pool's limit over eth1 and eth2: %v bit/s, want parts adding up to 400 Mbit/s", ceils)
	}

	// The physical switch's port of eth1 goes down: eth1 loses carrier and
	// the VM's traffic continues over eth2, with a datagram every 10 ms
	// across the cut.
	pg := startPinger(t, vm, "10.88.0.100", 10*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	cut := time.Now()
	c.ip("-n", phys, "link", "set", "p1", "down")
	waitLog(t, m, "port vm1/eth0 up1 -> up2", 10*time.Second)
	t.Logf("failover logged %s after the cut", time.Since(cut).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	sent, got := pg.Stop()
	t.Logf("across the cut: %d datagrams sent, %d answered", sent, got)
	if sent-got > 200 {
		t.Errorf("across the cut %d of %d datagrams were lost: more than 2 s of traffic", sent-got, sent)
	}
	if got := sendTagged(t, vm, "10.88.0.100", "rt-C", 100); got < 90 || p2.Tagged("rt-C") < got || p1.Tagged("rt-C") != 0 {
		t.Fatalf("eth1 without carrier: %d of 100 answered, p2 saw %d, p1 %d", got, p2.Tagged("rt-C"), p1.Tagged("rt-C"))
	}

	// Back up: the port fails back to up1.
	c.ip("-n", phys, "link", "set", "p1", "up")
	waitLog(t, m, "port vm1/eth0 up2 -> up1", 10*time.Second)
	// On a loaded machine the answers may take a moment to find their way
	// back after the failback: rounds of 50 for up to 5 s, each through
	// eth1 only.
	back := time.Now()
	got = 0
	for round := 0; got < 45 && time.Since(back) < 5*time.Second; round++ {
		if got = sendTagged(t, vm, "10.88.0.100", "rt-D", 50); round > 0 || got < 45 {
			t.Logf("failed back, round %d after %s: %d of 50 answered", round, time.Since(back).Round(time.Millisecond), got)
		}
	}
	if got < 45 || p1.Tagged("rt-D") < got || p2.Tagged("rt-D") != 0 {
		t.Fatalf("failed back: %d of 50 answered, p1 saw %d, p2 %d", got, p1.Tagged("rt-D"), p2.Tagged("rt-D"))
	}
	st, err := status(t, c, infra)
	if err != nil || !st.Converged {
		t.Errorf("status after failover and failback: %+v (%v)", st, err)
	}

	// A host agent killed and started again finds the team as it is and
	// changes nothing: no apply, no move.
	m.KillAgent()
	seen := len(m.AgentLog())
	m.StartAgent("--interval", "30s")
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(m.AgentLog()[seen:], "teaming agent started") {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted host agent started no teaming agent:\n%s", m.AgentLog()[seen:])
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	if after := m.AgentLog()[seen:]; strings.Contains(after, "applied") || strings.Contains(after, "port vm1/eth0") {
		t.Errorf("the restarted agent changed something:\n%s", after)
	}
	if got := sendTagged(t, vm, "10.88.0.100", "rt-E", 50); got < 45 || p1.Tagged("rt-E") < got || p2.Tagged("rt-E") != 0 {
		t.Fatalf("after the restart: %d of 50 answered, p1 saw %d, p2 %d", got, p1.Tagged("rt-E"), p2.Tagged("rt-E"))
	}

	// Destroy gives both devices back exactly as they were.
	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	deadline = time.Now().Add(30 * time.Second)
	for left := leftovers(t, c, infra); len(left) > 0; left = leftovers(t, c, infra) {
		if time.Now().After(deadline) {
			t.Fatalf("30 s after destroy, left: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitLog(t, m, "teaming agent stopped", 10*time.Second)
	for _, dev := range []string{"eth1", "eth2"} {
		if s := deviceState(t, m.NS, dev); s != before[dev] {
			t.Errorf("%s after destroy:\n%s\nwas:\n%s", dev, s, before[dev])
		}
		if _, err := os.Stat(filepath.Join(c.dir, "state-hv1", "hostagent", "devices", "host", dev+".json")); !os.IsNotExist(err) {
			t.Errorf("%s's record is left after destroy (%v)", dev, err)
		}
	}
}

// realNICs gives the machine eth1 and eth2, veths whose far ends p1 and p2
// are ports of an emulated physical switch (bridge pbr in namespace phys),
// with a peer behind it at 10.88.0.100 (namespace peer), up and as a
// machine would have them; all of it goes when the test ends.
func realNICs(t *testing.T, c *Cluster, m *Machine) (phys, peer string) {
	t.Helper()
	phys, peer = c.Prefix+"-phys", c.Prefix+"-peer"
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", peer).Run()
		_ = exec.Command("ip", "netns", "del", phys).Run()
	})
	c.ip("netns", "add", phys)
	c.ip("netns", "add", peer)
	c.ip("-n", phys, "link", "add", "pbr", "type", "bridge")
	c.ip("-n", phys, "link", "set", "pbr", "up")
	for _, l := range [][2]string{{"eth1", "p1"}, {"eth2", "p2"}} {
		c.ip("-n", m.NS, "link", "add", l[0], "type", "veth", "peer", "name", l[1], "netns", phys)
		c.ip("-n", phys, "link", "set", l[1], "master", "pbr", "up")
		c.ip("-n", m.NS, "link", "set", l[0], "up")
	}
	c.ip("-n", phys, "link", "add", "pp", "type", "veth", "peer", "name", "eth0", "netns", peer)
	c.ip("-n", phys, "link", "set", "pp", "master", "pbr", "up")
	c.ip("-n", peer, "link", "set", "lo", "up")
	c.ip("-n", peer, "addr", "add", "10.88.0.100/24", "dev", "eth0")
	c.ip("-n", peer, "link", "set", "eth0", "up")
	return phys, peer
}

// sendTagged sends n datagrams, 10 ms apart, from a namespace to an echo,
// each carrying tag, and returns how many were answered.
func sendTagged(t *testing.T, ns, to, tag string, n int) int {
	t.Helper()
	var conn net.Conn
	if err := inNS(ns, func() (err error) { conn, err = net.Dial("udp", net.JoinHostPort(to, "7")); return }); err != nil {
		t.Fatalf("send to %s from %s: %v", to, ns, err)
	}
	defer conn.Close()
	answered := collectEchoes(conn)
	buf := make([]byte, 4+len(tag))
	copy(buf[4:], tag)
	for i := range n {
		binary.BigEndian.PutUint32(buf, uint32(i))
		_, _ = conn.Write(buf)
		time.Sleep(10 * time.Millisecond)
	}
	return answered()
}

// deviceState is what vnet must give back of a device: its link as `ip -d
// link show` has it (index, master, MTU, alias, flags, promiscuity) and its
// qdiscs with their handles and settings.
func deviceState(t *testing.T, ns, dev string) string {
	t.Helper()
	link, err := exec.Command("ip", "-n", ns, "-d", "link", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show %s: %v\n%s", dev, err, link)
	}
	return string(link) + tcCmd(t, "-n", ns, "qdisc", "show", "dev", dev)
}

func tcCmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("tc", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("tc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func linkMTU(t *testing.T, ns, dev string) int {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-j", "link", "show", "dev", dev).Output()
	if err != nil {
		t.Fatalf("ip link show %s: %v", dev, err)
	}
	var links []struct {
		MTU int `json:"mtu"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link show %s: %q: %v", dev, out, err)
	}
	return links[0].MTU
}

// poolCeils reads, on each device, the ceiling of the one HTB class below
// the wire class whose ceiling is under the line rate: the pool's part of
// its limit, in bit/s.
func poolCeils(t *testing.T, ns string, devs ...string) []float64 {
	t.Helper()
	out := make([]float64, len(devs))
	for i, dev := range devs {
		for _, line := range strings.Split(tcCmd(t, "-n", ns, "class", "show", "dev", dev), "\n") {
			f := strings.Fields(line)
			if !slices.Contains(f, "parent") || f[slices.Index(f, "parent")+1] != "1:1" {
				continue
			}
			if j := slices.Index(f, "ceil"); j > 0 && j+1 < len(f) {
				if ceil := tcRate(f[j+1]); ceil > 0 && ceil < 900e6 {
					out[i] = ceil
				}
			}
		}
	}
	return out
}

// tcRate reads a rate as tc prints it (200Mbit, 1Gbit, 999Kbit, 64bit).
func tcRate(s string) float64 {
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"Gbit", 1e9}, {"Mbit", 1e6}, {"Kbit", 1e3}, {"bit", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0
			}
			return x * u.mult
		}
	}
	return 0
}

// waitLog waits for a line in the machine's agent log.
func waitLog(t *testing.T, m *Machine, text string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(m.AgentLog(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("%q not in the agent's log within %s", text, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// realLBT is a machine's two 100 Mbit real NICs teamed with load-based
// teaming, and two VMs whose names portid pins to the same uplink.
const realLBT = `name: INFRA
hosts:
  - name: hv1
    underlay: UNDERLAY
    nics:
      - {name: vmnic0, device: eth1, speed: 100Mbit}
      - {name: vmnic1, device: eth2, speed: 100Mbit}
switches:
  - name: dvs0
    uplinks:
      - {name: up1, nics: {hv1: vmnic0}}
      - {name: up2, nics: {hv1: vmnic1}}
    teaming: {policy: loadbased, lbt: {threshold: 75%, window: 2s, interval: 2s}}
    portgroups: [{name: pg}]
vms:
  - {name: VM1, host: hv1, nics: [{portgroup: pg, ip: 10.88.0.1/24}]}
  - {name: VM2, host: hv1, nics: [{portgroup: pg, ip: 10.88.0.2/24}]}
`

// Load-based teaming over real NICs under `vnet agent host`: two VMs
// streaming TCP to the peer start on one uplink, and the host's teaming
// agent moves one of them to the other, after which the physical switch
// takes traffic from both NICs. The threshold is set at three quarters of
// what a bare path shaped to the line rate carries on this machine.
func TestClusterRealUplinkLBT(t *testing.T) {
	c := faultCluster(t, 2*time.Minute, "hv1")
	m := c.Machine("hv1")
	infra := c.Infra()
	phys, peer := realNICs(t, c, m)
	lineCap := nstest.RequireCapacity(t, 100e6, 0.2, "a port busy against its line rate")
	var src, vm1, vm2, uplink string
	for i := 0; i < 50 && vm1 == ""; i++ {
		a, b := fmt.Sprintf("vm%da", i), fmt.Sprintf("vm%db", i)
		text := strings.NewReplacer("INFRA", infra, "UNDERLAY", m.IP, "VM1", a, "VM2", b,
			"threshold: 75%", fmt.Sprintf("threshold: %d%%", int(75*lineCap/100e6))).Replace(realLBT)
		doc, err := spec.Load("lbt.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		as := plan.Assignments(plan.Model(doc.Spec, plan.Options{Host: "hv1"}))
		if as[a+"/eth0"].Uplink == as[b+"/eth0"].Uplink {
			src, vm1, vm2, uplink = text, a, b, as[a+"/eth0"].Uplink
		}
	}
	if vm1 == "" {
		t.Fatal("no two VM names pinned to one uplink")
	}
	if out, err := c.Vnet("apply", c.WriteSpec("lbt", src)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitConverged(t, c, infra, 1, 30*time.Second)
	waitLog(t, m, "teaming agent started", 10*time.Second)

	stop := make(chan struct{})
	defer close(stop)
	nstest.Stream(t, plan.NSName(infra, vm1), peer, "10.88.0.100:0", stop)
	nstest.Stream(t, plan.NSName(infra, vm2), peer, "10.88.0.100:0", stop)
	waitLog(t, m, "LBT on hv1: port", 20*time.Second)
	t.Logf("both started on %s; the agent moved one:\n%s", uplink, grepLines(m.AgentLog(), "LBT on hv1"))
	time.Sleep(time.Second)
	r1, r2 := rxBytes(t, phys, "p1"), rxBytes(t, phys, "p2")
	time.Sleep(2 * time.Second)
	d1, d2 := rxBytes(t, phys, "p1")-r1, rxBytes(t, phys, "p2")-r2
	t.Logf("after the move, over 2 s: %.1f Mbit/s from eth1, %.1f Mbit/s from eth2", float64(d1)*8/2e6, float64(d2)*8/2e6)
	if d1 < 1e6 || d2 < 1e6 {
		t.Errorf("after the move the physical switch got %d bytes from eth1 and %d from eth2 in 2 s: want both NICs busy", d1, d2)
	}
}

// rxBytes is what a link has received so far.
func rxBytes(t *testing.T, ns, link string) uint64 {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-j", "-s", "link", "show", "dev", link).Output()
	if err != nil {
		t.Fatalf("ip -s link show %s: %v", link, err)
	}
	var links []struct {
		Stats struct {
			RX struct {
				Bytes uint64 `json:"bytes"`
			} `json:"rx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j -s link show %s: %q: %v", link, out, err)
	}
	return links[0].Stats.RX.Bytes
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
