package clustertest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
)

// networksSpec is n networks with two VMs each, network i on hosts
// hv(i%3+1) and hv((i+1)%3+1), every network on a router of its own pair
// of networks when routed is set.
func networksSpec(n int, routed bool) string {
	var b strings.Builder
	b.WriteString("networks:\n")
	for i := 0; i < n; i++ {
		if routed {
			fmt.Fprintf(&b, "  - {name: n%d, subnet: 10.%d.%d.0/24, gateway: 10.%d.%d.1, router: r%d}\n", i, i/256, i%256, i/256, i%256, i/2)
		} else {
			fmt.Fprintf(&b, "  - {name: n%d, subnet: 10.%d.%d.0/24}\n", i, i/256, i%256)
		}
	}
	b.WriteString("vms:\n")
	for i := 0; i < n; i++ {
		for j := 0; j < 2; j++ {
			fmt.Fprintf(&b, "  - {name: v%d-%d, host: hv%d, nics: [{network: n%d, ip: 10.%d.%d.%d/24}]}\n",
				i, j, (i+j)%3+1, i, i/256, i%256, 10+j)
		}
	}
	return b.String()
}

// TestClusterNetworksScale measures VNET_NETWORKS_BENCH networks with two
// VMs each over three machines: the apply from empty until every agent
// reports it, adding one network to them, and the kernel objects a host
// holds per network it carries. VNET_NETWORKS_ROUTED=1 puts the networks
// on routers, two to a router. Skipped unless VNET_NETWORKS_BENCH is set.
func TestClusterNetworksScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VNET_NETWORKS_BENCH"))
	if n <= 0 {
		t.Skip("set VNET_NETWORKS_BENCH=<networks> to measure")
	}
	routed := os.Getenv("VNET_NETWORKS_ROUTED") == "1"
	c := faultCluster(t, 8*time.Minute, "hv1", "hv2", "hv3")
	infra := c.Infra()
	start := time.Now()
	applySpec(t, c, infra, c.Spec(infra, networksSpec(n, routed)))
	stored := time.Since(start)
	took := waitConverged(t, c, infra, 1, 6*time.Minute)
	t.Logf("%d networks, %d VMs, routed %v: apply stored in %s, every host current %s later (%s in all)",
		n, 2*n, routed, stored.Round(time.Millisecond), took.Round(time.Millisecond), (stored + took).Round(time.Millisecond))

	hv1 := c.Machine("hv1")
	count := func(args ...string) int {
		out, _ := hv1.Exec(args...)
		return len(strings.Split(strings.TrimSpace(out), "\n"))
	}
	carried := count("ip", "-o", "link", "show", "type", "vxlan")
	links := count("ip", "-o", "link", "show")
	fdb := 0
	out, _ := hv1.Exec("bridge", "fdb", "show")
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "dst ") || (strings.Contains(l, "static") && !strings.Contains(l, "permanent")) {
			fdb++
		}
	}
	neigh := count("ip", "neigh", "show", "nud", "permanent")
	t.Logf("hv1 carries %d networks: %d links (%.1f per network, VM ports included), %d static fdb entries (%.1f), %d neighbour entries (%.1f)",
		carried, links, float64(links)/float64(carried), fdb, float64(fdb)/float64(carried), neigh, float64(neigh)/float64(carried))

	// One more network, on hv1 and hv2: hv3 has no part in it.
	logs := map[string]int{}
	for _, m := range c.Machines {
		logs[m.Host] = len(m.AgentLog())
	}
	extra := fmt.Sprintf("  - {name: v%d-0, host: hv1, nics: [{network: n%d, ip: 10.250.0.10/24}]}\n  - {name: v%d-1, host: hv2, nics: [{network: n%d, ip: 10.250.0.11/24}]}\n", n, n, n, n)
	src := networksSpec(n, routed)
	src = strings.Replace(src, "vms:\n", fmt.Sprintf("  - {name: n%d, subnet: 10.250.0.0/24}\nvms:\n", n), 1) + extra
	start = time.Now()
	applySpec(t, c, infra, c.Spec(infra, src))
	stored = time.Since(start)
	took = waitConverged(t, c, infra, 2, 2*time.Minute)
	t.Logf("one network added to %d: stored in %s, every host current %s later", n, stored.Round(time.Millisecond), took.Round(time.Millisecond))
	for _, m := range c.Machines {
		t.Logf("agent of %s on the change:\n%s", m.Host, firstLines(m.AgentLog()[logs[m.Host]:], 4))
	}
	if _, err := c.Machine("hv3").Exec("ip", "link", "show", plan.NetBridgeName(infra, fmt.Sprintf("n%d", n))); err == nil {
		t.Errorf("hv3 made a bridge for a network it has no VM of")
	}

	start = time.Now()
	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	for len(leftovers(t, c, infra)) > 0 {
		if time.Since(start) > 6*time.Minute {
			t.Fatalf("destroy not done in 6 minutes")
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("destroy: every host empty after %s", time.Since(start).Round(time.Millisecond))
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
