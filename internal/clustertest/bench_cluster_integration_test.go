package clustertest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
)

// benchOnly skips unless VNET_CLUSTER_BENCH is set: these measure, they
// do not test, and take a minute or more each.
func benchOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("VNET_CLUSTER_BENCH") == "" {
		t.Skip("set VNET_CLUSTER_BENCH to measure the cluster")
	}
}

// iperf3 runs a TCP test of secs seconds from one namespace to a server it
// starts in another, and returns what the server received in bit/s.
func iperf3(t *testing.T, fromNS, toNS, toIP string, secs int) float64 {
	t.Helper()
	srv := exec.Command("nsenter", "--net=/run/netns/"+toNS, "iperf3", "-s", "-1", "-p", "5211")
	if err := srv.Start(); err != nil {
		t.Fatalf("iperf3 server in %s: %v", toNS, err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	var out []byte
	var err error
	for try := 0; try < 20; try++ {
		time.Sleep(100 * time.Millisecond)
		out, err = exec.Command("nsenter", "--net=/run/netns/"+fromNS, "iperf3", "-c", toIP, "-p", "5211",
			"-t", fmt.Sprint(secs), "-J").Output()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("iperf3 %s -> %s: %v\n%s", fromNS, toIP, err, out)
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("iperf3 output: %v", err)
	}
	return r.End.SumReceived.BitsPerSecond
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// TestClusterThroughputOverlay measures TCP from a VM on hv1 to a VM on
// hv2 over the VXLAN overlay, between the two machines themselves over the
// underlay it is carried on (veth to a bridge to veth), and over a plain
// veth pair between two namespaces with the overlay's MTU (the least any
// path between namespaces costs on this machine), taking turns, three runs
// of 5 s each; it prints the medians and their ratios to the veth pair's.
func TestClusterThroughputOverlay(t *testing.T) {
	benchOnly(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("SKIPPED: needs iperf3")
	}
	c := faultCluster(t, 5*time.Minute, "hv1", "hv2", "hv3")
	infra := c.Infra()
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs))
	waitConverged(t, c, infra, 1, 30*time.Second)
	hv1, hv2 := c.Machine("hv1"), c.Machine("hv2")
	va, vb := vethPair(t, c, 1450)
	var under, over, veth []float64
	for i := 0; i < 3; i++ {
		veth = append(veth, iperf3(t, va, vb, "10.99.0.2", 5))
		under = append(under, iperf3(t, hv1.NS, hv2.NS, hv2.IP, 5))
		over = append(over, iperf3(t, plan.NSName(infra, "vm1"), plan.NSName(infra, "vm2"), "10.77.0.2", 5))
	}
	gbit := func(xs []float64) string {
		var s []string
		for _, x := range xs {
			s = append(s, fmt.Sprintf("%.2f", x/1e9))
		}
		return strings.Join(s, " ")
	}
	t.Logf("veth pair between two namespaces (MTU 1450): %s Gbit/s, median %.2f", gbit(veth), median(veth)/1e9)
	t.Logf("underlay hv1 -> hv2 (MTU 1500): %s Gbit/s, median %.2f", gbit(under), median(under)/1e9)
	t.Logf("overlay vm1 (hv1) -> vm2 (hv2) over VXLAN (MTU 1450): %s Gbit/s, median %.2f", gbit(over), median(over)/1e9)
	t.Logf("underlay / veth pair: %.2f; overlay / veth pair: %.2f; overlay / underlay: %.2f",
		median(under)/median(veth), median(over)/median(veth), median(over)/median(under))
}

// vethPair makes two namespaces joined by one veth pair with the MTU,
// 10.99.0.1 and 10.99.0.2, removed when the test ends.
func vethPair(t *testing.T, c *Cluster, mtu int) (a, b string) {
	t.Helper()
	a, b = c.Prefix+"-va", c.Prefix+"-vb"
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", a).Run()
		_ = exec.Command("ip", "netns", "del", b).Run()
	})
	c.ip("netns", "add", a)
	c.ip("netns", "add", b)
	c.ip("-n", a, "link", "add", "eth0", "mtu", fmt.Sprint(mtu), "type", "veth", "peer", "name", "eth0", "netns", b, "mtu", fmt.Sprint(mtu))
	for i, ns := range []string{a, b} {
		c.ip("-n", ns, "link", "set", "lo", "up")
		c.ip("-n", ns, "addr", "add", fmt.Sprintf("10.99.0.%d/24", i+1), "dev", "eth0")
		c.ip("-n", ns, "link", "set", "eth0", "up")
	}
	return a, b
}

// vmsOn is a spec body of one switch over the hosts with perHost[h] VMs
// on each host h: VM j of h is named h+"v"+j (hv1v0, ...), so that adding
// one leaves the others' names as they were.
func vmsOn(hosts []string, perHost map[string]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "switches:\n  - name: dvs\n    hosts: [%s]\n    mtu: 1450\n    portgroups:\n      - name: app\nvms:\n", strings.Join(hosts, ", "))
	for i, h := range hosts {
		for j := 0; j < perHost[h]; j++ {
			fmt.Fprintf(&b, "  - {name: %sv%d, host: %s, nics: [{portgroup: app, ip: %s/16}]}\n", h, j, h, vmIP(i, j))
		}
	}
	return b.String()
}

// vmIP is the address of VM j of the i-th host in vmsOn.
func vmIP(i, j int) string {
	n := i*1000 + j
	return fmt.Sprintf("10.77.%d.%d", n/200, n%200+1)
}

// convergedIn runs an apply and returns how long the apply took and how
// long from its return until every host reports the generation.
func convergedIn(t *testing.T, c *Cluster, infra, src string, gen int, limit time.Duration) (apply, converge time.Duration) {
	t.Helper()
	p := c.WriteSpec(infra, src)
	start := time.Now()
	if out, err := c.Vnet("apply", p); err != nil {
		t.Fatalf("apply generation %d: %v\n%s", gen, err, out)
	}
	apply = time.Since(start)
	return apply, waitConverged(t, c, infra, gen, limit)
}

// TestClusterScale measures an apply of 3 hosts x 100 VMs from empty, and
// then of a one-VM change on it: the apply itself, and from its return
// until every agent reports the generation.
func TestClusterScale(t *testing.T) {
	benchOnly(t)
	c := faultCluster(t, 8*time.Minute, "hv1", "hv2", "hv3")
	infra := c.Infra()
	hosts := []string{"hv1", "hv2", "hv3"}
	per := map[string]int{"hv1": 100, "hv2": 100, "hv3": 100}
	apply, conv := convergedIn(t, c, infra, c.Spec(infra, vmsOn(hosts, per)), 1, 5*time.Minute)
	t.Logf("3 hosts x 100 VMs from empty: apply %s, then every host current %s later (%s in all)",
		apply.Round(time.Millisecond), conv.Round(time.Millisecond), (apply + conv).Round(time.Millisecond))
	echo(t, plan.NSName(infra, "hv2v49"))
	ping(t, infra, "hv1v0", vmIP(1, 49))
	for i, h := range hosts {
		per[h]++
		apply, conv = convergedIn(t, c, infra, c.Spec(infra, vmsOn(hosts, per)), 2+i, time.Minute)
		t.Logf("one more VM on %s: apply %s, then every host current %s later (%s in all)", h,
			apply.Round(time.Millisecond), conv.Round(time.Millisecond), (apply + conv).Round(time.Millisecond))
	}
}

// TestClusterAgentRestart300 kills the agent of a host with 300 VM ports
// with SIGKILL under a datagram every 10 ms from one of them to a VM on
// another host, starts it again, and measures how long until it reports
// (its first pass over the host done), what was lost, and what was made
// again.
func TestClusterAgentRestart300(t *testing.T) {
	benchOnly(t)
	c := faultCluster(t, 8*time.Minute, "hv1", "hv2")
	infra := c.Infra()
	hosts := []string{"hv1", "hv2"}
	apply, conv := convergedIn(t, c, infra, specOn(c, infra, hosts, vmsOn(hosts, map[string]int{"hv1": 300, "hv2": 1})), 1, 5*time.Minute)
	t.Logf("hv1 with 300 VMs, hv2 with 1: apply %s, every host current %s later", apply.Round(time.Millisecond), conv.Round(time.Millisecond))
	hv1 := c.Machine("hv1")
	echo(t, plan.NSName(infra, "hv2v0"))
	ping(t, infra, "hv1v0", vmIP(1, 0))
	before := hostIndexes(t, hv1.NS, infra, "hv1v0")
	linksBefore := strings.Join(vnetLinks(hv1), "\n")
	for round := 0; round < 3; round++ {
		p := startPinger(t, plan.NSName(infra, "hv1v0"), vmIP(1, 0), 10*time.Millisecond)
		time.Sleep(500 * time.Millisecond)
		logBefore := len(hv1.AgentLog())
		hv1.KillAgent()
		restart := time.Now()
		hv1.StartAgent("--interval", "30s")
		took := waitFor(t, 2*time.Minute, "a report of the restarted agent", func() (bool, string) {
			at, err := reportedAt(c, infra, "hv1")
			return err == nil && at.After(restart), fmt.Sprint(at, err)
		})
		time.Sleep(500 * time.Millisecond)
		sent, got := p.Stop()
		t.Logf("restart %d: reported %s after its start; datagrams %d sent, %d answered", round+1, took.Round(time.Millisecond), sent, got)
		if sent != got {
			t.Errorf("lost %d of %d datagrams", sent-got, sent)
		}
		if after := hv1.AgentLog()[logBefore:]; strings.Contains(after, "applied") {
			t.Errorf("restarted agent changed something:\n%s", after)
		}
	}
	for _, what := range remade(before, hostIndexes(t, hv1.NS, infra, "hv1v0")) {
		t.Errorf("%s was made again by a restarted agent", what)
	}
	if now := strings.Join(vnetLinks(hv1), "\n"); now != linksBefore {
		t.Errorf("hv1's links changed across the restarts")
	}
}
