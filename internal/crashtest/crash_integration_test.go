package crashtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/agent"
	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
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
		return m.Run()
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
	cmd := exec.Command(vnetBin, append([]string{"--state-dir", state}, args...)...)
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
	for name, pids := range agent.All(state) {
		if name == infra {
			out = append(out, fmt.Sprintf("agent %v", pids))
		}
	}
	return out
}

// converge proves the next apply repairs the host, a further one changes
// nothing, and destroy then leaves nothing.
func converge(t *testing.T, infra, state, file string, killedPID int) {
	t.Helper()
	must(t, state, "apply", file)
	if out := must(t, state, "apply", "--dry-run", file); !strings.Contains(out, "no changes") {
		t.Errorf("after the repairing apply, a further one would change:\n%s", out)
	}
	agents := agent.All(state)[infra]
	if len(agents) > 1 {
		t.Errorf("%d agents run for %s: %v", len(agents), infra, agents)
	}
	destroyClean(t, infra, state, killedPID)
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

// sample picks the steps to kill at: every step when every is 1.
func sample(n, every int) []int {
	var out []int
	for i := 1; i <= n; i += every {
		out = append(out, i)
	}
	if len(out) > 0 && out[len(out)-1] != n {
		out = append(out, n)
	}
	return out
}

// killEverywhere kills a first apply, then a destroy, at the sampled
// steps, and after each proves the next apply and destroy repair it.
func killEverywhere(t *testing.T, src, prefix string, applyEvery, destroyEvery int) {
	infra := uniqueInfra(prefix)
	file := specFile(t, src, infra)
	state := t.TempDir()
	cleanup(t, infra, state)
	applyPoints := points(t, state, "apply", file)
	destroyPoints := points(t, state, "destroy", infra)
	if left := leftovers(t, infra, state); len(left) > 0 {
		t.Fatalf("a clean destroy left: %v", left)
	}
	t.Logf("%s: apply has %d kill points, destroy %d; killing apply at every %d, destroy at every %d",
		infra, len(applyPoints), len(destroyPoints), applyEvery, destroyEvery)
	for _, n := range sample(len(applyPoints), applyEvery) {
		ok := t.Run(fmt.Sprintf("apply@%d", n), func(t *testing.T) {
			r := killed(t, state, []string{fmt.Sprintf("VNET_KILL_AT=%d", n)}, "apply", file)
			converge(t, infra, state, file, r.pid)
		})
		if !ok {
			t.Logf("apply killed after %q", applyPoints[n-1])
			return
		}
	}
	for _, n := range sample(len(destroyPoints), destroyEvery) {
		ok := t.Run(fmt.Sprintf("destroy@%d", n), func(t *testing.T) {
			must(t, state, "apply", file)
			killed(t, state, []string{fmt.Sprintf("VNET_KILL_AT=%d", n)}, "destroy", infra)
			if r := vnet(t, state, nil, "status", infra); r.code != 0 {
				t.Errorf("status after a killed destroy: exit %d:\n%s", r.code, r.out)
			}
			converge(t, infra, state, file, 0)
		})
		if !ok {
			t.Logf("destroy killed after %q", destroyPoints[n-1])
			return
		}
	}
}

func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every kill point of the demo's first apply, and every second one of its
// destroy (deletes repeat: the 20-VM run samples others).
func TestKillDemoAtEveryStep(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED in -short: kills apply and destroy at every step (about a minute)")
	}
	killEverywhere(t, readExample(t, "demo.yaml"), "crd", 1, 2)
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

// A sample of the kill points of a 20-VM infrastructure's apply and
// destroy: every 30th (the demo covers every kind of step), about a dozen
// cases, to keep the suite within CI's time.
func TestKillTwentyVMsAtSampledSteps(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED in -short: kills apply and destroy of 20 VMs at sampled steps")
	}
	killEverywhere(t, twentyVMs(), "crv", 30, 30)
}
