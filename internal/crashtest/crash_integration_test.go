package crashtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/rundir/rundirtest"
)

var vnetBin string

func TestMain(m *testing.M) {
	code := func() int {
		if os.Geteuid() != 0 {
			return m.Run() // every test here skips, loudly
		}
		dir, err := os.MkdirTemp("", "vnet-crash-bin")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		vnetBin = filepath.Join(dir, "vnet")
		build := exec.Command("go", "build", "-tags", "vnetkill", "-o", vnetBin, "../../cmd/vnet")
		if out, err := build.CombinedOutput(); err != nil {
			panic(string(out))
		}
		return rundirtest.Run(m)
	}()
	os.Exit(code)
}

// result is how one vnet command ended.
type result struct {
	out    string
	code   int
	killed bool
	pid    int
}

// vnet runs the binary with the state dir and extra environment.
func vnet(t *testing.T, state string, env []string, args ...string) result {
	t.Helper()
	return vnetBy(t, nil, state, env, args...)
}

// vnetBy runs the binary as vnet does, through the command wrap (such as
// nsenter into a namespace) when it is not nil, which must exec it in its
// own process so that a kill takes the binary.
func vnetBy(t *testing.T, wrap []string, state string, env []string, args ...string) result {
	t.Helper()
	argv := append(append(append([]string(nil), wrap...), vnetBin, "--state-dir", state), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	r := result{out: string(out), pid: cmd.Process.Pid}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		r.killed = ws.Signaled() && ws.Signal() == syscall.SIGKILL
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("vnet %v: %v", args, err)
	}
	return r
}

// must runs a command that has to succeed.
func must(t *testing.T, state string, args ...string) string {
	t.Helper()
	r := vnet(t, state, nil, args...)
	if r.code != 0 || r.killed {
		t.Fatalf("vnet %s: exit %d:\n%s", strings.Join(args, " "), r.code, r.out)
	}
	return r.out
}

// killed runs a command that has to die at its kill point.
func killed(t *testing.T, state string, env []string, args ...string) result {
	t.Helper()
	r := vnet(t, state, env, args...)
	if !r.killed {
		t.Fatalf("vnet %s with %v was not killed (exit %d):\n%s", strings.Join(args, " "), env, r.code, r.out)
	}
	return r
}

// specFile writes src with the infrastructure renamed, unique per run.
func specFile(t *testing.T, src, infra string) string {
	t.Helper()
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "name: ") {
			lines[i] = "name: " + infra
			break
		}
	}
	f := filepath.Join(t.TempDir(), infra+".yaml")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func uniqueInfra(prefix string) string {
	return fmt.Sprintf("%s%x", prefix, time.Now().UnixNano()&0xffffff)
}

// cgroupRoots are the mounted hierarchies: v2 and every v1 one.
func cgroupRoots(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && (fields[2] == "cgroup" || fields[2] == "cgroup2") {
			out = append(out, fields[1])
		}
	}
	return out
}

// leftovers lists everything of the infrastructure on the host: its
// namespace entries (mounted or not) and their temporary files, cgroups in
// every hierarchy, the agents of the state dir, and the probe namespaces
// of the given (killed) processes.
func leftovers(t *testing.T, infra, state string, pids ...int) []string {
	t.Helper()
	var out []string
	entries, _ := os.ReadDir(dataplane.NetnsDir)
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, plan.InfraNSPrefix(infra)) || strings.HasPrefix(name, ".vnet-tmp."+plan.InfraNSPrefix(infra)) {
			out = append(out, "namespace entry "+name)
		}
		for _, pid := range pids {
			if name == fmt.Sprintf("%s%d", dataplane.ProbeNSPrefix, pid) {
				out = append(out, "probe namespace "+name)
			}
		}
	}
	for _, root := range cgroupRoots(t) {
		if _, err := os.Stat(filepath.Join(root, "vnet", infra)); err == nil {
			out = append(out, "cgroup "+filepath.Join(root, "vnet", infra))
		}
	}
	if pids := agentProcesses(t, state, infra); len(pids) > 0 {
		out = append(out, fmt.Sprintf("agent %v", pids))
	}
	return out
}

// converge proves the next apply repairs the host, a further one changes
// nothing, and destroy then leaves nothing.
func converge(t *testing.T, infra, state, file string, killedPID int) {
	t.Helper()
	repaired(t, infra, state, file)
	destroyClean(t, infra, state, killedPID)
}

// repaired proves the next apply repairs the host: it succeeds, a further
// one reading the whole host (--full, not only what a change would touch)
// would change nothing, the port programs hold exactly the ports that run
// them, and one agent at most runs.
func repaired(t *testing.T, infra, state, file string) {
	t.Helper()
	must(t, state, "apply", file)
	if out := must(t, state, "apply", "--dry-run", "--full", file); !strings.Contains(out, "no changes") {
		t.Errorf("after the repairing apply, a further one would change:\n%s", out)
	}
	portProgramsHoldTheirPorts(t, infra)
	agents := agentProcesses(t, state, infra)
	if len(agents) > 1 {
		t.Errorf("%d agents run for %s: %v", len(agents), infra, agents)
	}
}

func destroyClean(t *testing.T, infra, state string, killedPID int) {
	t.Helper()
	must(t, state, "destroy", infra)
	if left := leftovers(t, infra, state, killedPID); len(left) > 0 {
		t.Errorf("destroy left: %v", left)
	}
}

// cleanup removes whatever a failed case left, so that one failure does
// not spill onto the machine.
func cleanup(t *testing.T, infra, state string) {
	t.Cleanup(func() {
		vnet(t, state, nil, "destroy", infra)
		if left := leftovers(t, infra, state); len(left) > 0 {
			t.Errorf("left after cleanup: %v", left)
		}
	})
}

// points counts the kill points of a command by tracing a run of it.
func points(t *testing.T, state string, args ...string) []string {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace")
	r := vnet(t, state, []string{"VNET_KILL_TRACE=" + trace}, args...)
	if r.code != 0 {
		t.Fatalf("vnet %v: exit %d:\n%s", args, r.code, r.out)
	}
	b, _ := os.ReadFile(trace)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// workers is how many infrastructures a suite kills in at once, each with
// its own state directory: much of a cycle is the kernel waiting (namespace
// teardown, grace periods), which several share. VNET_CRASH_WORKERS
// overrides it.
func workers() int {
	if n, err := strconv.Atoi(os.Getenv("VNET_CRASH_WORKERS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// rig is one infrastructure a suite kills commands of.
type rig struct {
	infra, state string
	files        []string // its spec files, by the caller's order
}

// rigs makes n rigs for the sources, each with a unique infrastructure and
// state directory, cleaned up at the end.
func rigs(t *testing.T, n int, prefix string, srcs ...string) []rig {
	t.Helper()
	out := make([]rig, n)
	for i := range out {
		r := rig{infra: uniqueInfra(fmt.Sprintf("%s%d", prefix, i)), state: t.TempDir()}
		for _, src := range srcs {
			r.files = append(r.files, specFile(t, src, r.infra))
		}
		cleanup(t, r.infra, r.state)
		out[i] = r
	}
	return out
}

// atEveryPoint runs kill for every point 1..n, spread over the rigs, one
// subtest per point, and stops all at the first failure.
func atEveryPoint(t *testing.T, rs []rig, what string, n int, kill func(t *testing.T, r rig, n int)) bool {
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w + 1; i <= n && !failed.Load(); i += len(rs) {
				if !t.Run(fmt.Sprintf("%s@%d", what, i), func(t *testing.T) { kill(t, r, i) }) {
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	return !failed.Load()
}

// killEverywhere kills a first apply, and a destroy, at every one of their
// kill points, and after each proves that the next apply converges and the
// next destroy leaves nothing. One case kills both an apply and a destroy:
// the apply that repairs the first kill makes what the second destroys.
func killEverywhere(t *testing.T, src, prefix string) {
	rs := rigs(t, workers(), prefix, src)
	r0 := rs[0]
	start := time.Now()
	applyPoints := points(t, r0.state, "apply", r0.files[0])
	destroyPoints := points(t, r0.state, "destroy", r0.infra)
	if left := leftovers(t, r0.infra, r0.state); len(left) > 0 {
		t.Fatalf("a clean destroy left: %v", left)
	}
	defer func() {
		t.Logf("apply has %d kill points, destroy %d; killed at each, %d infrastructures at once, in %s",
			len(applyPoints), len(destroyPoints), len(rs), time.Since(start).Round(time.Second))
	}()
	atEveryPoint(t, rs, "kill", max(len(applyPoints), len(destroyPoints)), func(t *testing.T, r rig, n int) {
		killedPID := 0
		if n <= len(applyPoints) {
			t.Logf("apply killed after %q", applyPoints[n-1])
			killedPID = killed(t, r.state, []string{fmt.Sprintf("VNET_KILL_AT=%d", n)}, "apply", r.files[0]).pid
			repaired(t, r.infra, r.state, r.files[0])
		} else {
			must(t, r.state, "apply", r.files[0])
		}
		if n <= len(destroyPoints) {
			t.Logf("destroy killed after point %d (destroy deletes namespaces in parallel: its order varies; once %q)", n, destroyPoints[n-1])
			killed(t, r.state, []string{fmt.Sprintf("VNET_KILL_AT=%d", n)}, "destroy", r.infra)
			if res := vnet(t, r.state, nil, "status", r.infra); res.code != 0 {
				t.Errorf("status after a killed destroy: exit %d:\n%s", res.code, res.out)
			}
			repaired(t, r.infra, r.state, r.files[0])
		}
		destroyClean(t, r.infra, r.state, killedPID)
	})
}

func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every kill point of the demo's first apply and of its destroy.
func TestKillDemoAtEveryStep(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED in -short: kills apply and destroy at every step")
	}
	killEverywhere(t, readExample(t, "demo.yaml"), "crd")
}

// twentyVMs is a spec with 20 VMs on two hosts, half of them with a CPU limit.
func twentyVMs() string {
	var b strings.Builder
	b.WriteString(`name: vm20
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}]
  - name: esx2
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: dvs0
    uplinks: [{name: up, nics: {esx1: vmnic0, esx2: vmnic0}}]
    portgroups: [{name: pg}]
vms:
`)
	for i := range 20 {
		cpus := ""
		if i%2 == 0 {
			cpus = ", cpus: 0.5"
		}
		fmt.Fprintf(&b, "  - {name: vm%d, host: esx%d%s, nics: [{portgroup: pg, ip: 10.77.0.%d/24}]}\n", i, i%2+1, cpus, i+10)
	}
	return b.String()
}

// Every kill point of a 20-VM infrastructure's first apply and destroy.
func TestKillTwentyVMsAtEveryStep(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED in -short: kills apply and destroy of 20 VMs at every step")
	}
	killEverywhere(t, twentyVMs(), "crv")
}

// changedDemo is the demo with a VM added (with a CPU limit), a port
// group's shaping changed and a VM removed.
func changedDemo(t *testing.T, demo string) string {
	t.Helper()
	out := demo
	for _, r := range []struct{ old, new string }{
		{"      - {name: pg-vm, pool: vm}\n",
			"      - {name: pg-vm, pool: vm, shaping: {egress: {average: 100Mbit, peak: 200Mbit, burst: 1MiB}}}\n"},
		{"  - name: db1\n    host: esx1\n    nics:\n      - {portgroup: pg-private, ip: 10.0.0.2/24}\n", ""},
		{"hostports:\n",
			"  - {name: app1, host: esx2, cpus: 0.5, nics: [{portgroup: pg-vm, ip: 192.168.50.13/24}]}\nhostports:\n"},
	} {
		if !strings.Contains(out, r.old) {
			t.Fatalf("the demo no longer holds %q", r.old)
		}
		out = strings.Replace(out, r.old, r.new, 1)
	}
	return out
}

// Every kill point of an incremental apply (a VM added, a port group's
// shaping changed, a VM removed): the next apply converges to the new spec
// and destroy then leaves nothing.
func TestKillIncrementalApplyAtEveryStep(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED in -short: kills an incremental apply at every step")
	}
	demo := readExample(t, "demo.yaml")
	killChangeEverywhere(t, "cri", "the incremental apply", demo, changedDemo(t, demo))
}

// lbSpec is a network over two hosts with a load balancer of two backends,
// and a client: programs on the three VMs' ports.
const lbSpec = `name: lb
hosts:
  - {name: hv1, underlay: 192.0.2.11}
  - {name: hv2, underlay: 192.0.2.12}
networks:
  - name: net
    subnet: 10.1.0.0/24
    gateway: 10.1.0.1
    router: r
    loadBalancers:
      - {name: web, vip: 10.1.0.100, listeners: [{protocol: tcp, port: 80, backendPort: 8080}], backends: [{vm: web1}, {vm: web2}]}
vms:
  - {name: web1, host: hv1, nics: [{network: net, ip: 10.1.0.11/24}]}
  - {name: web2, host: hv2, nics: [{network: net, ip: 10.1.0.12/24}]}
  - {name: client, host: hv1, nics: [{network: net, ip: 10.1.0.21/24}]}
`

// Every kill point of the first apply and of the destroy of a network with
// a load balancer: each port's programs go in with two filters.
func TestKillLoadBalancerAtEveryStep(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED in -short: kills apply and destroy at every step")
	}
	killEverywhere(t, lbSpec, "crl")
}

// Every kill point of a change of the load balancer (a listener added and
// a backend dropped: new programs on every port, taking the old ones'
// connections over): the next apply converges and destroy leaves nothing.
func TestKillLoadBalancerChangeAtEveryStep(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED in -short: kills an apply at every step")
	}
	changed := strings.Replace(lbSpec, "listeners: [{protocol: tcp, port: 80, backendPort: 8080}], backends: [{vm: web1}, {vm: web2}]",
		"listeners: [{protocol: tcp, port: 80, backendPort: 8080}, {protocol: udp, port: 53}], backends: [{vm: web1}]", 1)
	killChangeEverywhere(t, "crm", "the change", lbSpec, changed)
}

// killChangeEverywhere kills the apply of to, over from applied, at each of
// its kill points: the next apply converges to to and destroy then leaves
// nothing. what names the apply in the log.
func killChangeEverywhere(t *testing.T, prefix, what, from, to string) {
	rs := rigs(t, workers(), prefix, from, to)
	r0 := rs[0]
	start := time.Now()
	must(t, r0.state, "apply", r0.files[0])
	changePoints := points(t, r0.state, "apply", r0.files[1])
	destroyClean(t, r0.infra, r0.state, 0)
	defer func() {
		t.Logf("%s has %d kill points; killed at each, %d infrastructures at once, in %s",
			what, len(changePoints), len(rs), time.Since(start).Round(time.Second))
	}()
	atEveryPoint(t, rs, "change", len(changePoints), func(t *testing.T, r rig, n int) {
		must(t, r.state, "apply", r.files[0])
		t.Logf("apply killed after %q", changePoints[n-1])
		k := killed(t, r.state, []string{fmt.Sprintf("VNET_KILL_AT=%d", n)}, "apply", r.files[1])
		converge(t, r.infra, r.state, r.files[1], k.pid)
	})
}
