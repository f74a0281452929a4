package crashtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/teamagent"
)

func isPlainFile(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	return !strings.Contains(string(mounts), " "+path+" ")
}

func ipNetnsListClean(t *testing.T) {
	t.Helper()
	out, _ := exec.Command("ip", "netns", "list").CombinedOutput()
	if strings.Contains(string(out), "invalid") {
		t.Errorf("ip netns list complains:\n%s", out)
	}
}

// A command killed between naming a namespace entry and mounting it, or
// between unmounting and removing one, leaves a plain file. Status still
// works, and the next apply and destroy remove it.
func TestUnfinishedNamespaceEntryIsRepaired(t *testing.T) {
	nstest.RequireRoot(t)
	infra := uniqueInfra("cra")
	file := specFile(t, readExample(t, "demo.yaml"), infra)
	state := t.TempDir()
	cleanup(t, infra, state)
	entry := filepath.Join(dataplane.NetnsDir, nstest.NSName(infra, "esx1"))

	killed(t, state, []string{"VNET_KILL_ON=netns entry named, not yet mounted: " + nstest.NSName(infra, "esx1")}, "apply", file)
	if !isPlainFile(entry) {
		t.Fatalf("the kill did not leave an unfinished entry %s", entry)
	}
	if r := vnet(t, state, nil, "apply", "--dry-run", file); r.code != 0 {
		t.Errorf("plan with an unfinished entry: exit %d:\n%s", r.code, r.out)
	}
	converge(t, infra, state, file, 0)

	must(t, state, "apply", file)
	killed(t, state, []string{"VNET_KILL_ON=netns unmounted, not yet removed: " + nstest.NSName(infra, "esx1")}, "destroy", infra)
	if !isPlainFile(entry) {
		t.Fatalf("the kill did not leave an unmounted entry %s", entry)
	}
	if r := vnet(t, state, nil, "status", infra); r.code != 0 {
		t.Errorf("status with an unmounted entry: exit %d:\n%s", r.code, r.out)
	}
	converge(t, infra, state, file, 0)

	// An empty file, as `ip netns add` killed halfway or an older vnet leaves.
	must(t, state, "apply", file)
	must(t, state, "destroy", infra)
	if err := os.WriteFile(entry, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	converge(t, infra, state, file, 0)
	ipNetnsListClean(t)
}

// A kill during the feature probe leaves no namespace: the probe's has no
// name. One that earlier versions left is removed by vnet gc.
func TestKilledProbeLeavesNoNamespace(t *testing.T) {
	nstest.RequireRoot(t)
	infra := uniqueInfra("crb")
	file := specFile(t, readExample(t, "demo.yaml"), infra)
	state := t.TempDir()
	cleanup(t, infra, state)
	for _, at := range []string{"probe namespace made", "probe made bridge", "probe made filter"} {
		r := killed(t, state, []string{"VNET_KILL_ON=" + at}, "apply", file)
		if left := leftovers(t, infra, state, r.pid); len(left) > 0 {
			t.Errorf("killed at %q, left: %v", at, left)
		}
	}

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	legacy := fmt.Sprintf("%s%d", dataplane.ProbeNSPrefix, dead.Process.Pid)
	if out, err := exec.Command("ip", "netns", "add", legacy).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", legacy).Run() })
	if out := gc(t, state, nil, "--dry-run"); !strings.Contains(out, legacy) {
		t.Errorf("gc --dry-run does not list %s:\n%s", legacy, out)
	}
	if _, err := os.Stat(filepath.Join(dataplane.NetnsDir, legacy)); err != nil {
		t.Fatalf("gc --dry-run removed %s", legacy)
	}
	gc(t, state, nil)
	if _, err := os.Stat(filepath.Join(dataplane.NetnsDir, legacy)); err == nil {
		t.Errorf("gc left %s", legacy)
	}
}

// A destroy killed between the cpu and cpuset hierarchies leaves the VM's
// cpuset cgroup; the next destroy sees it and removes it.
func TestKilledCgroupRemovalIsFinished(t *testing.T) {
	nstest.RequireRoot(t)
	infra := uniqueInfra("crc")
	file := specFile(t, readExample(t, "demo.yaml"), infra)
	state := t.TempDir()
	cleanup(t, infra, state)
	must(t, state, "apply", file)
	killed(t, state, []string{"VNET_KILL_ON=cgroup removed: "}, "destroy", infra)
	var left []string
	for _, l := range leftovers(t, infra, state) {
		if strings.HasPrefix(l, "cgroup ") {
			left = append(left, l)
		}
	}
	if len(left) == 0 {
		t.Fatal("the kill left no cgroup to find")
	}
	destroyClean(t, infra, state, 0)

	must(t, state, "apply", file)
	killed(t, state, []string{"VNET_KILL_ON=cgroup removed: "}, "destroy", infra)
	converge(t, infra, state, file, 0)
}

// An apply killed after starting the agent, before anything recorded it,
// leaves an agent that the next apply finds (and does not double) and
// destroy stops; so does one whose pid file is lost.
func TestOrphanAgentIsFoundAndStopped(t *testing.T) {
	nstest.RequireRoot(t)
	infra := uniqueInfra("crt")
	file := specFile(t, readExample(t, "teaming.yaml"), infra)
	state := t.TempDir()
	cleanup(t, infra, state)

	killed(t, state, []string{"VNET_KILL_ON=agent started"}, "apply", file)
	first := waitAgents(t, state, infra, 1)
	must(t, state, "apply", file)
	if again := waitAgents(t, state, infra, 1); again[0] != first[0] {
		t.Errorf("apply replaced agent %d by %d", first[0], again[0])
	}
	os.Remove(teamagent.PIDFile(state, infra))
	must(t, state, "apply", file)
	waitAgents(t, state, infra, 1)
	destroyClean(t, infra, state, 0)

	// The agent itself killed before it recorded its pid: apply says so,
	// and the next one starts exactly one.
	r := vnet(t, state, []string{"VNET_KILL_AGENT_ON=agent holds its lock"}, "apply", file)
	if r.code == 0 || !strings.Contains(r.out, "exited at start") {
		t.Errorf("apply whose agent died at start: exit %d:\n%s", r.code, r.out)
	}
	must(t, state, "apply", file)
	waitAgents(t, state, infra, 1)
	destroyClean(t, infra, state, 0)
}

// waitAgents waits for exactly n agents of the infrastructure and returns them.
func waitAgents(t *testing.T, state, infra string, n int) []int {
	t.Helper()
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if pids = agentProcesses(t, state, infra); len(pids) == n {
			return pids
		}
	}
	t.Fatalf("%d agents of %s run, want %d: %v", len(pids), infra, n, pids)
	return nil
}

// vnet gc removes what belongs to no infrastructure in the store: cgroups,
// unfinished namespace entries and their temporary files, agents; with
// --dry-run it only lists them.
func TestGCRemovesWhatNoInfrastructureOwns(t *testing.T) {
	nstest.RequireRoot(t)
	state := t.TempDir()
	gone := uniqueInfra("crgone")
	team := uniqueInfra("crgt")
	file := specFile(t, readExample(t, "teaming.yaml"), team)
	cleanup(t, team, state)
	cleanup(t, gone, state)

	must(t, state, "apply", file)
	waitAgents(t, state, team, 1)
	st, err := store.OpenBolt(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(team); err != nil {
		t.Fatal(err)
	}
	st.Close()

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	made := makeCgroups(t, gone, state)
	unfinished := filepath.Join(dataplane.NetnsDir, nstest.NSName(gone, "esx1"))
	tmp := filepath.Join(dataplane.NetnsDir, fmt.Sprintf(".vnet-tmp.%s.%d", nstest.NSName(gone, "esx2"), dead.Process.Pid))
	for _, f := range []string{unfinished, tmp} {
		if err := os.WriteFile(f, nil, 0o444); err != nil {
			t.Fatal(err)
		}
		made = append(made, f)
	}
	t.Cleanup(func() {
		for _, f := range made {
			os.Remove(f)
		}
	})

	out := gc(t, state, []string{gone, team}, "--dry-run")
	for _, want := range append([]string{"agent of " + team}, made...) {
		if !strings.Contains(out, want) {
			t.Errorf("gc --dry-run does not list %s:\n%s", want, out)
		}
	}
	if len(leftovers(t, gone, state)) == 0 || len(agentProcesses(t, state, team)) != 1 {
		t.Fatal("gc --dry-run removed something")
	}
	out = gc(t, state, []string{gone, team})
	if left := leftovers(t, gone, state); len(left) > 0 {
		t.Errorf("gc left %v:\n%s", left, out)
	}
	if pids := agentProcesses(t, state, team); len(pids) > 0 {
		t.Errorf("gc left the agent %v of %s", pids, team)
	}
	if _, err := os.Stat(filepath.Join(dataplane.NetnsDir, nstest.NSName(team, "esx1"))); err != nil {
		t.Errorf("gc removed a namespace of %s, which it leaves to destroy", team)
	}
	if out := gc(t, state, []string{gone, team}); strings.Contains(out, "removed") {
		t.Errorf("a second gc:\n%s", out)
	}
	destroyClean(t, team, state, 0)
}

// A command killed with its state directory removed after it (a killed
// `vnet lab run` keeps its store in a temporary directory) leaves
// namespaces whose store cannot be found: that directory may as well have
// moved. gc leaves them, says why and how to remove them, and fails;
// told the store is gone for good, it removes them, and leaves alone
// those of a store that still exists.
func TestGCRemovesNamespacesOfAStoreGoneForGood(t *testing.T) {
	nstest.RequireRoot(t)
	gone, kept := t.TempDir(), t.TempDir()
	lost, live := uniqueInfra("crlost"), uniqueInfra("crlive")
	cleanup(t, live, kept)
	must(t, gone, "apply", specFile(t, readExample(t, "demo.yaml"), lost))
	goneID := store.IDAt(gone)
	t.Cleanup(func() {
		for _, ns := range nstest.Namespaces(lost) {
			vnet(t, kept, nil, "gc", "--store-gone", goneID)
			t.Errorf("left %s", ns)
		}
	})
	must(t, kept, "apply", specFile(t, readExample(t, "demo.yaml"), live))
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"gc", "--dry-run"}, {"gc"}} {
		r := vnet(t, kept, nil, args...)
		if r.code != 1 || !strings.Contains(r.out, "left namespace "+nstest.NSName(lost, "esx1")) ||
			!strings.Contains(r.out, "vnet gc --store-gone "+goneID) || !strings.Contains(r.out, "not certain") {
			t.Errorf("vnet %s with a store not found: exit %d:\n%s", strings.Join(args, " "), r.code, r.out)
		}
		if len(nstest.Namespaces(lost)) == 0 {
			t.Fatalf("vnet %s removed what a store not found made", strings.Join(args, " "))
		}
	}
	out := gc(t, kept, []string{lost, live}, "--store-gone", goneID, "--dry-run")
	if !strings.Contains(out, "would remove namespace "+nstest.NSName(lost, "esx1")) || len(nstest.Namespaces(lost)) == 0 {
		t.Errorf("gc --store-gone --dry-run:\n%s", out)
	}
	out = gc(t, kept, []string{lost, live}, "--store-gone", goneID)
	if left := nstest.Namespaces(lost); len(left) > 0 {
		t.Errorf("gc --store-gone left %v:\n%s", left, out)
	}
	if strings.Contains(out, live) || len(nstest.Namespaces(live)) == 0 {
		t.Errorf("gc touched %s, whose store exists:\n%s", live, out)
	}
}

// makeCgroups makes a VM cgroup of the infrastructure in the cpu and
// cpuset hierarchies, marked as the store in state makes them (as an apply
// killed before it recorded leaves them), removed at the end.
func makeCgroups(t *testing.T, infra, state string) []string {
	t.Helper()
	st, err := store.OpenBolt(state)
	if err != nil {
		t.Fatal(err)
	}
	mark := plan.Mark{Infra: infra, Store: st.ID(), Dir: st.Location()}.String()
	st.Close()
	return makeCgroupsMarked(t, infra, mark)
}

// makeCgroupsMarked makes a VM cgroup of the infrastructure in the cpu and
// cpuset hierarchies, and its infrastructure's level, with the mark ("":
// none, as made by hand), removed at the end.
func makeCgroupsMarked(t *testing.T, infra, mark string) []string {
	t.Helper()
	var made []string
	for _, root := range cgroupRoots(t) {
		if base := filepath.Base(root); base != "cpu" && base != "cpuset" && base != "cpu,cpuacct" {
			continue
		}
		dir := filepath.Join(root, "vnet", infra, "vm1")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if base := filepath.Base(root); base == "cpuset" {
			// A v1 cpuset starts empty, and takes no process until it has
			// CPUs and memory nodes: each level without them gets its
			// parent's, vnet/ included when this made it.
			for _, d := range []string{filepath.Join(root, "vnet"), filepath.Dir(dir), dir} {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if cur, _ := os.ReadFile(filepath.Join(d, f)); strings.TrimSpace(string(cur)) != "" {
						continue
					}
					v, _ := os.ReadFile(filepath.Join(filepath.Dir(d), f))
					os.WriteFile(filepath.Join(d, f), v, 0o644)
				}
			}
		}
		if mark != "" {
			for _, d := range []string{filepath.Dir(dir), dir} {
				if err := unix.Setxattr(d, "trusted.vnet.mark", []byte(mark), 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		made = append(made, dir)
	}
	t.Cleanup(func() {
		for _, dir := range made {
			os.Remove(dir)
			os.Remove(filepath.Dir(dir))
			os.Remove(filepath.Dir(filepath.Dir(dir))) // vnet/, when nothing else is in it
		}
	})
	return made
}

func allExist(paths []string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// vnet gc removes an infrastructure's leftovers under its lock: while a
// command holds it, gc waits, then gives up and removes nothing of it; and
// it leaves them when the infrastructure entered the store while it
// waited (an apply that began after gc looked).
func TestGCTakesEachInfrastructuresLock(t *testing.T) {
	nstest.RequireRoot(t)
	state := t.TempDir()
	infra := uniqueInfra("crgl")
	made := makeCgroups(t, infra, state)
	st, err := store.OpenBolt(state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	unlock, err := st.Lock(infra)
	if err != nil {
		t.Fatal(err)
	}
	r := vnet(t, state, nil, "gc")
	if r.code == 0 || !strings.Contains(r.out, "being changed by another vnet command") {
		t.Errorf("gc while another command holds %s: exit %d:\n%s", infra, r.code, r.out)
	}
	if !allExist(made) {
		t.Fatalf("gc removed cgroups of %s while it was locked", infra)
	}

	trace := filepath.Join(t.TempDir(), "trace")
	var out strings.Builder
	cmd := exec.Command(vnetBin, "--state-dir", state, "gc")
	cmd.Env = append(os.Environ(), "VNET_KILL_TRACE="+trace)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(trace); strings.Contains(string(b), "gc: leftovers listed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gc did not list the leftovers")
		}
	}
	if err := st.Put(&store.Record{Name: infra}); err != nil {
		t.Fatal(err)
	}
	unlock()
	if err := cmd.Wait(); err != nil && !strings.Contains(out.String(), "who made it is not certain") {
		t.Errorf("gc: %v:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "applied meanwhile") || !allExist(made) {
		t.Errorf("gc did not leave what %s left once it was in the store:\n%s", infra, out.String())
	}

	if err := st.Delete(infra); err != nil {
		t.Fatal(err)
	}
	gc(t, state, []string{infra})
	if left := leftovers(t, infra, state); len(left) > 0 {
		t.Errorf("gc left %v", left)
	}
}

// traceLines counts the points in a trace file.
func traceLines(path string) []string {
	b, _ := os.ReadFile(path)
	if s := strings.TrimSpace(string(b)); s != "" {
		return strings.Split(s, "\n")
	}
	return nil
}

// settledTrace waits until the trace has at least n points and has grown
// no further for quiet, and returns its points.
func settledTrace(t *testing.T, path string, n int, quiet time.Duration) []string {
	t.Helper()
	lines, since := traceLines(path), time.Now()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		now := traceLines(path)
		if len(now) != len(lines) {
			lines, since = now, time.Now()
		}
		if len(lines) >= n && time.Since(since) >= quiet {
			return lines
		}
	}
	t.Fatalf("the agent's trace did not settle at %d points or more: %v", n, lines)
	return nil
}

func setLink(t *testing.T, ns, link, state string) {
	t.Helper()
	if out, err := exec.Command("ip", "-n", ns, "link", "set", link, state).CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s link set %s %s: %v %s", ns, link, state, err, out)
	}
}

// The agent killed at each of its changes during a failover (an uplink of
// esx1 going down moves the ports on it to the other): the next apply
// starts one agent and converges, and destroy leaves nothing, no agent
// either.
func TestKillAgentAtEveryFailoverStep(t *testing.T) {
	nstest.RequireRoot(t)
	infra := uniqueInfra("crf")
	file := specFile(t, readExample(t, "teaming.yaml"), infra)
	state := t.TempDir()
	cleanup(t, infra, state)
	esx1 := nstest.NSName(infra, "esx1")
	// Ports are moved to vmnic0, and back when vmnic1 is up again.
	const uplink = "vmnic1"

	trace := filepath.Join(t.TempDir(), "trace")
	must(t, state, "apply", file)
	destroyClean(t, infra, state, 0)
	r := vnet(t, state, []string{"VNET_KILL_AGENT_TRACE=" + trace}, "apply", file)
	if r.code != 0 {
		t.Fatalf("apply: exit %d:\n%s", r.code, r.out)
	}
	startPoints := settledTrace(t, trace, 1, 1500*time.Millisecond)
	setLink(t, esx1, uplink, "down")
	failover := settledTrace(t, trace, len(startPoints)+1, 1500*time.Millisecond)[len(startPoints):]
	setLink(t, esx1, uplink, "up")
	destroyClean(t, infra, state, 0)
	t.Logf("the agent has %d kill points at start, %d in the failover: %v", len(startPoints), len(failover), failover)

	for i := range failover {
		n := len(startPoints) + i + 1
		ok := t.Run(fmt.Sprintf("agent@%d", n), func(t *testing.T) {
			trace := filepath.Join(t.TempDir(), "trace")
			r := vnet(t, state, []string{fmt.Sprintf("VNET_KILL_AGENT_AT=%d", n), "VNET_KILL_AGENT_TRACE=" + trace}, "apply", file)
			if r.code != 0 {
				t.Fatalf("apply: exit %d:\n%s", r.code, r.out)
			}
			waitAgents(t, state, infra, 1)
			settledTrace(t, trace, len(startPoints), 300*time.Millisecond) // the agent has made its start
			setLink(t, esx1, uplink, "down")
			// A killed agent leaves /proc, or shows there as a zombie
			// without a command line, which Find does not count.
			for deadline := time.Now().Add(5 * time.Second); len(agentProcesses(t, state, infra)) > 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the agent was not killed at point %d (%q)", n, failover[i])
				}
			}
			setLink(t, esx1, uplink, "up")
			must(t, state, "apply", file)
			waitAgents(t, state, infra, 1)
			// The new agent may still be moving ports back: what apply
			// would change must come to nothing within a few ticks.
			var out string
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				if out = must(t, state, "apply", "--dry-run", file); strings.Contains(out, "no changes") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the repairing apply, a further one would change:\n%s", out)
				}
			}
			destroyClean(t, infra, state, 0)
			if pids := agentProcesses(t, state, infra); len(pids) > 0 {
				t.Errorf("destroy left agents %v", pids)
			}
		})
		if !ok {
			return
		}
	}
}

// The agent needs no store lock: while another command holds the
// infrastructure's, it reloads the spec (SIGHUP, as apply sends) and fails
// ports over.
func TestAgentWorksWhileTheInfrastructureIsLocked(t *testing.T) {
	nstest.RequireRoot(t)
	infra := uniqueInfra("cral")
	file := specFile(t, readExample(t, "teaming.yaml"), infra)
	state := t.TempDir()
	cleanup(t, infra, state)
	must(t, state, "apply", file)
	pid := waitAgents(t, state, infra, 1)[0]
	logFile := teamagent.LogFile(state, infra)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(logFile); strings.Contains(string(b), "agent for "+infra) {
			break // it runs, and SIGHUP reloads it
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not start")
		}
	}
	st, err := store.OpenBolt(state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	unlock, err := st.Lock(infra)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the reload reads the store at once
	esx1 := nstest.NSName(infra, "esx1")
	before, _ := os.ReadFile(logFile)
	setLink(t, esx1, "vmnic1", "down")
	var log string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(logFile)
		if log = string(b[len(before):]); strings.Contains(log, "dvUplink2 -> dvUplink1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not fail over while %s was locked:\n%s", infra, log)
		}
	}
	if strings.Contains(log, "reload:") || strings.Contains(log, "locked") {
		t.Errorf("the agent's reload under the lock:\n%s", log)
	}
	if got := agentProcesses(t, state, infra); len(got) != 1 || got[0] != pid {
		t.Errorf("agents after the reload: %v, want %d", got, pid)
	}
	setLink(t, esx1, "vmnic1", "up")
}
