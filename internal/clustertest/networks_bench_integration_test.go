package clustertest

import (
	"fmt"
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
)

// networksSpec is n networks with two VMs each, network i on hosts
// hv(i%3+1) and hv((i+1)%3+1), every network on a router of its own pair
// of networks when routed is set. With taps, each VM is a hypervisor's
// guest whose vNIC is the TAP tapName(i, j) (see makeTaps), not a
// namespace.
func networksSpec(n int, routed, taps bool) string {
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
			fmt.Fprintf(&b, "  - {name: v%d-%d, host: hv%d, nics: [{network: n%d, ip: 10.%d.%d.%d/24%s}]}\n",
				i, j, (i+j)%3+1, i, i/256, i%256, 10+j, tapAttach(taps, i, j))
		}
	}
	return b.String()
}

// tapName is the TAP of VM j of network i when the VMs are guests.
func tapName(i, j int) string { return fmt.Sprintf("t%d-%d", i, j) }

// tapAttach is the vNIC's attachment to its TAP, with the guest's MAC, or
// nothing for a namespace VM.
func tapAttach(taps bool, i, j int) string {
	if !taps {
		return ""
	}
	return fmt.Sprintf(", attach: {tap: %s}, mac: \"52:54:00:%02x:%02x:%02x\"", tapName(i, j), i>>8&0xff, i&0xff, j)
}

// guestTap is the TAP of VM j of network i, on host.
type guestTap struct {
	host string
	i, j int
}

// networksTaps are the TAPs of networksSpec(n)'s VMs.
func networksTaps(n int) []guestTap {
	var out []guestTap
	for i := 0; i < n; i++ {
		for j := 0; j < 2; j++ {
			out = append(out, guestTap{fmt.Sprintf("hv%d", (i+j)%3+1), i, j})
		}
	}
	return out
}

// makeTaps makes TAPs on their machines as QEMU's host set-up does (ip
// tuntap add NAME mode tap; ip link set NAME up), one ip -batch per
// machine. The machines' namespaces take them with them.
func makeTaps(t *testing.T, c *Cluster, taps []guestTap) {
	t.Helper()
	batches := map[string]*strings.Builder{}
	for _, m := range c.Machines {
		batches[m.Host] = &strings.Builder{}
	}
	for _, g := range taps {
		name := tapName(g.i, g.j)
		fmt.Fprintf(batches[g.host], "tuntap add %s mode tap\nlink set %s up\n", name, name)
	}
	for _, m := range c.Machines {
		if batches[m.Host].Len() == 0 {
			continue
		}
		path := filepath.Join(t.TempDir(), m.Host+".batch")
		if err := os.WriteFile(path, []byte(batches[m.Host].String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := m.Exec("ip", "-batch", path); err != nil {
			t.Fatalf("TAPs on %s: %v\n%s", m.Host, err, out)
		}
	}
}

// networksCluster is three machines with an agent each that traces its
// passes (VNET_TRACE), reconciling in full every interval.
func networksCluster(t *testing.T, limit, interval time.Duration) *Cluster {
	t.Helper()
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds vnet and runs a cluster of machines")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("SKIPPED: needs nsenter (util-linux)")
	}
	bin := sharedBin(t)
	start := time.Now()
	t.Cleanup(func() {
		if took := time.Since(start); took > limit {
			t.Errorf("took %s, more than %s", took.Round(time.Millisecond), limit)
		}
	})
	t.Setenv("VNET_TRACE", "1")
	c := New(t, bin, "hv1", "hv2", "hv3")
	for _, m := range c.Machines {
		m.StartAgent("--interval", interval.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range c.Machines {
				t.Logf("agent of %s:\n%s", m.Host, lastLines(m.AgentLog(), 60))
			}
		}
	})
	return c
}

// memInfo reads fields of /proc/meminfo, in KiB.
func memInfo(t *testing.T) map[string]int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 {
			v, _ := strconv.Atoi(f[1])
			out[strings.TrimSuffix(f[0], ":")] = v
		}
	}
	return out
}

// agentRSS is the resident memory of a machine's agent, in KiB.
func agentRSS(m *Machine) int {
	if m.agent == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.agent.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// withExtraNetwork is networksSpec(n) with network n added, its VMs on
// hv1 and hv2 (with taps, the TAPs extraTaps(n)).
func withExtraNetwork(n int, routed, taps bool) string {
	extra := fmt.Sprintf("  - {name: v%d-0, host: hv1, nics: [{network: n%d, ip: 10.250.0.10/24%s}]}\n  - {name: v%d-1, host: hv2, nics: [{network: n%d, ip: 10.250.0.11/24%s}]}\n",
		n, n, tapAttach(taps, n, 0), n, n, tapAttach(taps, n, 1))
	src := networksSpec(n, routed, taps)
	return strings.Replace(src, "vms:\n", fmt.Sprintf("  - {name: n%d, subnet: 10.250.0.0/24}\nvms:\n", n), 1) + extra
}

func extraTaps(n int) []guestTap { return []guestTap{{"hv1", n, 0}, {"hv2", n, 1}} }

// applyWait applies src with vnet apply --wait, which returns once every
// host reports the new generation current, and returns the command's wall
// time (the store and every host current) and what it printed: each host
// as it became current, and how long the store took.
func applyWait(t *testing.T, c *Cluster, infra, src string, limit time.Duration) (time.Duration, string) {
	t.Helper()
	p := c.WriteSpec(infra, src)
	start := time.Now()
	out, err := c.Vnet("apply", p, "--wait="+limit.String())
	took := time.Since(start)
	if err != nil {
		t.Fatalf("apply --wait=%s: %v\n%s", limit, err, out)
	}
	return took, strings.TrimSpace(out)
}

// confirmCurrent checks, with one vnet status, that every host reports
// generation gen, and returns how long the status took.
func confirmCurrent(t *testing.T, c *Cluster, infra string, gen int) time.Duration {
	t.Helper()
	start := time.Now()
	st, err := status(t, c, infra)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if st.Generation != gen || !st.Converged {
		t.Fatalf("status after apply --wait: generation %d, hosts %v; want every host current at %d", st.Generation, st.states(), gen)
	}
	return took
}

// kernelBusy is the share of every CPU's time that the kernel spent in
// system, irq and softirq work over interval (/proc/stat).
func kernelBusy(t *testing.T, interval time.Duration) float64 {
	sample := func() (kernel, total uint64) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			t.Fatal(err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		for i, f := range strings.Fields(line)[1:] {
			v, _ := strconv.ParseUint(f, 10, 64)
			total += v
			if i == 2 || i == 5 || i == 6 { // system, irq, softirq
				kernel += v
			}
		}
		return kernel, total
	}
	k0, t0 := sample()
	time.Sleep(interval)
	k1, t1 := sample()
	return float64(k1-k0) / float64(max(t1-t0, 1))
}

// waitQuiet waits, untimed and at most limit, until the kernel spends under
// 10% of the CPUs on system, irq and softirq work for a second: after
// thousands of new links it is busy for a while (address configuration,
// notifications), and a change timed meanwhile would be timed against that.
func waitQuiet(t *testing.T, limit time.Duration) {
	t.Helper()
	start := time.Now()
	busy := 1.0
	for time.Since(start) < limit {
		if busy = kernelBusy(t, time.Second); busy < 0.10 {
			t.Logf("kernel quiet (%.0f%% system, irq and softirq) after %s", 100*busy, time.Since(start).Round(time.Second))
			return
		}
	}
	t.Logf("kernel still busy (%.0f%% system, irq and softirq) after %s; timing anyway", 100*busy, limit)
}

// TestClusterNetworksScale measures VNET_NETWORKS_BENCH networks with two
// VMs each over three machines: the apply from empty until every agent
// reports it, adding one network to them (each timed as vnet apply --wait,
// which watches the agents' reports and returns once every host reports
// the generation current; the change starts on a quiet kernel), a full pass of one agent (what
// it does on start and every --interval to repair drift), the kernel
// objects and memory a host holds per network it carries, and destroy.
// VNET_NETWORKS_ROUTED=1 puts the networks on routers, two to a router;
// VNET_NETWORKS_PORTS=tap makes each VM a guest on a TAP made before the
// apply, rather than a namespace (netns, the default).
// VNET_NETWORKS_ONLY_APPLY=1 ends the test after the apply from empty.
// VNET_NETWORKS_APPLY_WAIT and VNET_NETWORKS_DESTROY_WAIT bound the waits
// for the apply from empty (default 20 minutes) and for destroy (25).
// The agents' periodic full pass is kept out of the way (--interval 1h),
// so that the change's pass is measured alone. Skipped unless
// VNET_NETWORKS_BENCH is set.
func TestClusterNetworksScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VNET_NETWORKS_BENCH"))
	if n <= 0 {
		t.Skip("set VNET_NETWORKS_BENCH=<networks> to measure")
	}
	routed := os.Getenv("VNET_NETWORKS_ROUTED") == "1"
	taps := false
	switch ports := os.Getenv("VNET_NETWORKS_PORTS"); ports {
	case "", "netns":
	case "tap":
		taps = true
	default:
		t.Fatalf("VNET_NETWORKS_PORTS=%q: want netns or tap", ports)
	}
	before := memInfo(t)
	c := networksCluster(t, 30*time.Minute, time.Hour)
	infra := c.Infra()
	if taps {
		start := time.Now()
		makeTaps(t, c, append(networksTaps(n), extraTaps(n)...))
		t.Logf("%d TAPs made (as QEMU would hold them) in %s, before the apply", 2*n+2, time.Since(start).Round(time.Millisecond))
	}
	took, out := applyWait(t, c, infra, c.Spec(infra, networksSpec(n, routed, taps)), envDuration(t, "VNET_NETWORKS_APPLY_WAIT", 20*time.Minute))
	vmKind := "namespaces"
	if taps {
		vmKind = "TAPs"
	}
	t.Logf("%d networks, %d VMs (%s), routed %v: apply --wait %s (stored, and every host current); it printed:\n%s",
		n, 2*n, vmKind, routed, took.Round(time.Millisecond), out)
	t.Logf("one vnet status (every host current at generation 1): %s", confirmCurrent(t, c, infra, 1).Round(time.Millisecond))

	hv1 := c.Machine("hv1")
	count := func(args ...string) int {
		out, _ := hv1.Exec(args...)
		return len(strings.Split(strings.TrimSpace(out), "\n"))
	}
	carried := count("ip", "-o", "link", "show", "type", "vxlan")
	links := count("ip", "-o", "link", "show")
	fdb := 0
	out, _ = hv1.Exec("bridge", "fdb", "show")
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "dst ") || (strings.Contains(l, "static") && !strings.Contains(l, "permanent")) {
			fdb++
		}
	}
	neigh := count("ip", "neigh", "show", "nud", "permanent")
	t.Logf("hv1 carries %d networks: %d links (%.1f per network, VM ports included), %d static fdb entries (%.1f), %d neighbour entries (%.1f)",
		carried, links, float64(links)/float64(carried), fdb, float64(fdb)/float64(carried), neigh, float64(neigh)/float64(carried))
	after := memInfo(t)
	used := before["MemAvailable"] - after["MemAvailable"]
	slab := after["Slab"] - before["Slab"]
	t.Logf("memory: MemAvailable %d MiB less (%.0f KiB per network, %.0f KiB per VM), slab %d MiB more (%.0f KiB per network); agents' RSS %d, %d, %d MiB",
		used>>10, float64(used)/float64(n), float64(used)/float64(2*n), slab>>10, float64(slab)/float64(n),
		agentRSS(c.Machines[0])>>10, agentRSS(c.Machines[1])>>10, agentRSS(c.Machines[2])>>10)

	for _, m := range c.Machines {
		t.Logf("agent of %s, its first pass:\n%s", m.Host, firstPassTrace(m.AgentLog()))
	}
	if os.Getenv("VNET_NETWORKS_ONLY_APPLY") == "1" {
		return
	}

	// One more network, on hv1 and hv2: hv3 has no part in it.
	waitQuiet(t, 2*time.Minute)
	logs := map[string]int{}
	for _, m := range c.Machines {
		logs[m.Host] = len(m.AgentLog())
	}
	took, out = applyWait(t, c, infra, c.Spec(infra, withExtraNetwork(n, routed, taps)), 5*time.Minute)
	t.Logf("one network added to %d: apply --wait %s (stored, and every host current); it printed:\n%s", n, took.Round(time.Millisecond), out)
	confirmCurrent(t, c, infra, 2)
	for _, m := range c.Machines {
		t.Logf("agent of %s on the change:\n%s", m.Host, m.AgentLog()[logs[m.Host]:])
	}
	if _, err := c.Machine("hv3").Exec("ip", "link", "show", plan.NetBridgeName(infra, fmt.Sprintf("n%d", n))); err == nil {
		t.Errorf("hv3 made a bridge for a network it has no VM of")
	}

	// A full pass, as on start and every --interval: hv1's agent again.
	hv1.KillAgent()
	logs["hv1"] = len(hv1.AgentLog())
	start := time.Now()
	hv1.StartAgent("--interval", time.Hour.String())
	for !strings.Contains(hv1.AgentLog()[logs["hv1"]:], "remove what is gone") {
		if time.Since(start) > 10*time.Minute {
			t.Fatalf("hv1's agent made no full pass in 10 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("a full pass of hv1's agent (start, or every --interval): %s; its trace:\n%s",
		time.Since(start).Round(time.Millisecond), hv1.AgentLog()[logs["hv1"]:])

	// When the wait for destroy runs out, the test says how much was
	// left, and the harness removes the rest.
	wait := envDuration(t, "VNET_NETWORKS_DESTROY_WAIT", 25*time.Minute)
	all := len(leftovers(t, c, infra))
	for _, m := range c.Machines {
		logs[m.Host] = len(m.AgentLog())
	}
	t.Cleanup(func() {
		for _, m := range c.Machines {
			t.Logf("agent of %s on the destroy:\n%s", m.Host, lastLines(m.AgentLog()[logs[m.Host]:], 80))
		}
	})
	start = time.Now()
	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	for {
		left := len(leftovers(t, c, infra))
		if left == 0 {
			break
		}
		if time.Since(start) > wait {
			t.Fatalf("destroy: %d of %d namespaces and links left after %s", left, all, wait)
		}
		time.Sleep(time.Second)
	}
	t.Logf("destroy: every host empty after %s (%d namespaces and links)", time.Since(start).Round(time.Millisecond), all)
}

// firstPassTrace is the trace of the agent's pass that applied something
// first, without the list of changes it printed.
func firstPassTrace(log string) string {
	lines := strings.Split(log, "\n")
	end := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, ": applied ") })
	if end < 0 {
		return lastLines(log, 40)
	}
	start := max(0, end-40)
	return strings.Join(lines[start:end+1], "\n")
}

// envDuration is the duration an environment variable gives, else def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// Adding a network to an infrastructure, or a VM to one network, reads
// and changes only that network's objects on each host: the agents' traces
// show a scoped observation whose size does not depend on how many other
// networks the host carries, and their plans name no other network.
func TestClusterNetworkChangeIsScoped(t *testing.T) {
	networkChangeIsScoped(t, false)
}

// With the VMs as guests on TAPs, a change reads the TAPs it touches by
// their names, and the others not at all.
func TestClusterNetworkChangeOnTapsIsScoped(t *testing.T) {
	networkChangeIsScoped(t, true)
}

func networkChangeIsScoped(t *testing.T, taps bool) {
	const n = 24
	c := networksCluster(t, 3*time.Minute, time.Hour)
	infra := c.Infra()
	if taps {
		makeTaps(t, c, append(append(networksTaps(n), extraTaps(n)...), guestTap{"hv3", 3, 2}))
	}
	applySpec(t, c, infra, c.Spec(infra, networksSpec(n, false, taps)))
	waitConverged(t, c, infra, 1, time.Minute)

	changes := []struct {
		name, src string
		network   string // the network the change is to
		hosts     []string
	}{
		{"add network n24 on hv1 and hv2", withExtraNetwork(n, false, taps), fmt.Sprintf("n%d", n), []string{"hv1", "hv2"}},
		// network 3 is on hv1 and hv2; its third VM goes to hv3
		{"add a VM of n3 on hv3", withExtraNetwork(n, false, taps) + "  - {name: v3-2, host: hv3, nics: [{network: n3, ip: 10.0.3.12/24" + tapAttach(taps, 3, 2) + "}]}\n", "n3", []string{"hv1", "hv2", "hv3"}},
	}
	for i, ch := range changes {
		logs := map[string]int{}
		for _, m := range c.Machines {
			logs[m.Host] = len(m.AgentLog())
		}
		applySpec(t, c, infra, c.Spec(infra, ch.src))
		waitConverged(t, c, infra, i+2, time.Minute)
		for _, m := range c.Machines {
			log := m.AgentLog()[logs[m.Host]:]
			if strings.Contains(log, "full observation") {
				t.Errorf("%s: %s's agent read everything:\n%s", ch.name, m.Host, log)
				continue
			}
			read := observedCount(t, log)
			// A network's objects on a host: bridge, tunnel, a port per
			// VM, flood, tunnel and bridge entries per remote VM, a
			// neighbour entry per address, and the VMs' namespaces with
			// their vNICs and addresses: a few dozen at most, where a
			// full read of the host finds hundreds.
			if read > 40 {
				t.Errorf("%s: %s's agent read %d objects:\n%s", ch.name, m.Host, read, log)
			}
			for j := 0; j <= n; j++ {
				other := fmt.Sprintf("n%d", j)
				if other != ch.network && strings.Contains(log, "network "+other+" on") {
					t.Errorf("%s: %s's agent touched network %s:\n%s", ch.name, m.Host, other, log)
				}
			}
			changed := strings.Contains(log, "applied ")
			if want := slices.Contains(ch.hosts, m.Host); changed != want {
				t.Errorf("%s: %s's agent changed something: %v, want %v:\n%s", ch.name, m.Host, changed, want, log)
			}
			t.Logf("%s: %s read %d objects", ch.name, m.Host, read)
		}
	}
	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	start := time.Now()
	for len(leftovers(t, c, infra)) > 0 {
		if time.Since(start) > time.Minute {
			t.Fatalf("destroy not done in a minute: %v", leftovers(t, c, infra))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// observedCount sums what the passes in an agent's trace observed
// ("observe (N resources)").
func observedCount(t *testing.T, log string) int {
	t.Helper()
	total, seen := 0, false
	for _, l := range strings.Split(log, "\n") {
		_, rest, ok := strings.Cut(l, "observe (")
		if !ok {
			continue
		}
		k, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " resources)"))
		if err != nil {
			t.Fatalf("trace line %q: %v", l, err)
		}
		total += k
		seen = true
	}
	if !seen {
		t.Fatalf("no observation in the agent's trace:\n%s", log)
	}
	return total
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
