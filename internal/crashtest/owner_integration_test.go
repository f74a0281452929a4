package crashtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
)

// sleeper starts a process that lives until the test ends and returns its
// pid.
func sleeper(t *testing.T, argv ...string) int {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// gc runs vnet gc, which must succeed but for what it leaves of others
// (the machine is shared: another run's leftovers may be there, which gc
// rightly leaves and fails over); nothing it leaves may be of the
// infrastructures named.
func gc(t *testing.T, state string, mine []string, args ...string) string {
	t.Helper()
	return gcBy(t, nil, state, mine, args...)
}

// gcBy is gc run through the command wrap (vnetBy).
func gcBy(t *testing.T, wrap []string, state string, mine []string, args ...string) string {
	t.Helper()
	r := vnetBy(t, wrap, state, nil, append([]string{"gc"}, args...)...)
	if r.code != 0 && (r.code != 1 || !strings.Contains(r.out, "who made it is not certain")) {
		t.Fatalf("vnet gc %s: exit %d:\n%s", strings.Join(args, " "), r.code, r.out)
	}
	for _, line := range strings.Split(r.out, "\n") {
		if !strings.HasPrefix(line, "left ") && !strings.HasPrefix(line, "would be left ") {
			continue
		}
		for _, infra := range mine {
			if strings.Contains(line, "."+infra+".") || strings.Contains(line, "vnet/"+infra+"/") || strings.HasSuffix(line, "vnet/"+infra) {
				t.Errorf("vnet gc %s left what is %s's: %s", strings.Join(args, " "), infra, line)
			}
		}
	}
	return r.out
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// inNamespace waits until a process is in the namespace, as ip netns exec
// puts it there once started.
func inNamespace(t *testing.T, pid int, ns string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, err1 := os.Stat("/proc/" + strconv.Itoa(pid) + "/ns/net")
		mnt, err2 := os.Stat(filepath.Join("/run/netns", ns))
		if err1 == nil && err2 == nil && os.SameFile(got, mnt) {
			return
		}
	}
	t.Fatalf("process %d never entered %s", pid, ns)
}

// A live infrastructure whose state directory was moved (and not opened
// since) is not another store's garbage: gc from a new, unrelated state
// directory leaves it, with what runs in it, says why and how to remove it
// were its store gone, and fails. Once the moved directory is opened, gc
// finds the store there and says so; moved back, the next apply changes
// nothing and status shows everything.
func TestGCLeavesAnInfrastructureWhoseDirectoryMoved(t *testing.T) {
	nstest.RequireRoot(t)
	base := t.TempDir()
	home, away, other := filepath.Join(base, "home"), filepath.Join(base, "away"), t.TempDir()
	infra := uniqueInfra("crmove")
	file := specFile(t, readExample(t, "demo.yaml"), infra)
	cleanup(t, infra, home)
	t.Cleanup(func() { os.Rename(away, home) }) // a failure with the directory away: back before the cleanup's destroy
	must(t, home, "apply", file)
	id := store.IDAt(home)
	pid := sleeper(t, vnetBin, "--state-dir", home, "exec", infra+"/web1", "--", "sleep", "600")
	inNamespace(t, pid, nstest.NSName(infra, "web1"))
	if err := os.Rename(home, away); err != nil {
		t.Fatal(err)
	}
	before := nstest.Namespaces(infra)
	r := vnet(t, other, nil, "gc")
	if r.code != 1 || !strings.Contains(r.out, "left namespace "+nstest.NSName(infra, "web1")) || !strings.Contains(r.out, "may have moved") ||
		!strings.Contains(r.out, "vnet gc --store-gone "+id) {
		t.Errorf("gc from another directory, the store moved: exit %d:\n%s", r.code, r.out)
	}
	if after := nstest.Namespaces(infra); len(after) != len(before) || !alive(pid) {
		t.Fatalf("gc removed a live infrastructure whose directory moved: %v -> %v, the process alive: %v", before, after, alive(pid))
	}
	// Opened where it is now, the store is found there.
	must(t, away, "status", infra)
	out := vnet(t, other, nil, "gc").out
	if !strings.Contains(out, "made by the store now at "+away) || !strings.Contains(out, "moved from "+home) {
		t.Errorf("gc with the moved store opened:\n%s", out)
	}
	if len(nstest.Namespaces(infra)) != len(before) || !alive(pid) {
		t.Fatal("gc removed what a moved store made")
	}
	if err := os.Rename(away, home); err != nil {
		t.Fatal(err)
	}
	if out := must(t, home, "apply", file); !strings.Contains(out, "no changes") {
		t.Errorf("apply after moving back:\n%s", out)
	}
	if out := must(t, home, "status", infra); strings.Contains(out, "missing") {
		t.Errorf("status after moving back:\n%s", out)
	}
}

// An apply whose change touches nothing still sees that the host no
// longer holds what the record names (namespaces removed behind vnet's
// back, or marked for another directory of the store, which was moved and
// back): it reads the whole infrastructure and makes them again, or marks
// them anew, rather than say "no changes".
func TestApplySeesWhatTheRecordNamesIsGone(t *testing.T) {
	nstest.RequireRoot(t)
	base := t.TempDir()
	state, away := filepath.Join(base, "home"), filepath.Join(base, "away")
	infra := uniqueInfra("crgone")
	file := specFile(t, readExample(t, "demo.yaml"), infra)
	cleanup(t, infra, state)
	t.Cleanup(func() { os.Rename(away, state) }) // a failure with the directory away: back before the cleanup's destroy
	must(t, state, "apply", file)
	all := nstest.Namespaces(infra)
	for _, ns := range all {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns del %s: %v %s", ns, err, out)
		}
	}
	out := must(t, state, "apply", file)
	if strings.Contains(out, "no changes") || !strings.Contains(out, "no longer holds what the record names") {
		t.Errorf("apply with every namespace gone:\n%s", out)
	}
	if got := nstest.Namespaces(infra); len(got) != len(all) {
		t.Errorf("apply made %v again, want %v", got, all)
	}
	// The store moved, applied there, and moved back: its namespaces,
	// marked for the other directory, are marked anew.
	if err := os.Rename(state, away); err != nil {
		t.Fatal(err)
	}
	must(t, away, "apply", file)
	if err := os.Rename(away, state); err != nil {
		t.Fatal(err)
	}
	elsewhere := plan.Mark{Infra: infra, Store: store.IDAt(state), Dir: away}.String()
	out = must(t, state, "apply", file)
	if !strings.Contains(out, "mark "+elsewhere+" -> ") {
		t.Errorf("apply with the namespaces marked for another directory:\n%s", out)
	}
	// A mark changed by hand inside a namespace the record names, which
	// is still the one it names (the same namespace ID), is seen by an
	// apply that reads everything.
	ns := nstest.NSName(infra, "web1")
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "alias", elsewhere).CombinedOutput(); err != nil {
		t.Fatalf("mark %s: %v %s", ns, err, out)
	}
	out = must(t, state, "apply", "--full", file)
	if !strings.Contains(out, "mark "+elsewhere+" -> ") {
		t.Errorf("apply --full with a namespace marked for another directory:\n%s", out)
	}
	if out := must(t, state, "apply", file); !strings.Contains(out, "no changes") {
		t.Errorf("a further apply:\n%s", out)
	}
}

// What merely looks like vnet's is not gc's: a namespace made by hand with
// a mark naming a missing directory, and a cgroup made by hand under vnet/,
// each with a process in it. gc leaves both, with the process, says why,
// and fails.
func TestGCLeavesHandMadeLookalikes(t *testing.T) {
	nstest.RequireRoot(t)
	state := t.TempDir()
	mine := uniqueInfra("crhand")
	ns := nstest.NSName(mine, "x")
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	forged := plan.Mark{Infra: mine, Store: "00000000deadbeef", Dir: "/nowhere/vnet"}.String()
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "alias", forged).CombinedOutput(); err != nil {
		t.Fatalf("mark: %v %s", err, out)
	}
	inNS := sleeper(t, "ip", "netns", "exec", ns, "sleep", "600")
	inNamespace(t, inNS, ns)
	dirs := makeCgroupsMarked(t, mine, "")
	inCgroup := sleeper(t, "sleep", "600")
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(inCgroup)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { syscall.Kill(inCgroup, syscall.SIGKILL); time.Sleep(50 * time.Millisecond) })
	r := vnet(t, state, nil, "gc")
	for _, want := range []string{"left namespace " + ns, "/nowhere/vnet", "--store-gone 00000000deadbeef", "left cgroup vnet/" + mine + "/vm1", "no vnet mark", "vnet gc --unmarked " + mine} {
		if !strings.Contains(r.out, want) {
			t.Errorf("gc does not say %q:\n%s", want, r.out)
		}
	}
	if r.code != 1 {
		t.Errorf("gc leaving what it cannot be sure of: exit %d", r.code)
	}
	if !alive(inNS) || !alive(inCgroup) || !allExist(dirs) || len(nstest.Namespaces(mine)) != 1 {
		t.Fatalf("gc killed or removed a hand-made lookalike: in the namespace alive %v, in the cgroup alive %v, cgroups %v", alive(inNS), alive(inCgroup), allExist(dirs))
	}
}

// recover --adopt does not take an unmarked namespace of an infrastructure
// another live store holds: it says whose it may be and adopts nothing, so
// a later destroy from this store leaves it.
func TestAdoptRefusesALiveStoresName(t *testing.T) {
	nstest.RequireRoot(t)
	owner, other := t.TempDir(), t.TempDir()
	infra := uniqueInfra("cradopt")
	cleanup(t, infra, owner)
	must(t, owner, "apply", specFile(t, readExample(t, "demo.yaml"), infra))
	extra := nstest.NSName(infra, "extra")
	if out, err := exec.Command("ip", "netns", "add", extra).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", extra).Run() })
	r := vnet(t, other, nil, "recover", "--adopt", infra)
	if r.code == 0 || !strings.Contains(r.out, "adopted nothing") || !strings.Contains(r.out, owner) ||
		!strings.Contains(r.out, "vnet --state-dir "+owner+" recover --adopt "+infra) {
		t.Errorf("adopt of a live store's name: exit %d:\n%s", r.code, r.out)
	}
	vnet(t, other, nil, "destroy", infra)
	if _, err := os.Stat(filepath.Join("/run/netns", extra)); err != nil {
		t.Errorf("destroy from the other store removed %s", extra)
	}
	// Nor when the live store has nothing on the host, only a record.
	must(t, owner, "destroy", infra)
	st, err := store.OpenBolt(owner)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(&store.Record{Name: infra}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	r = vnet(t, other, nil, "recover", "--adopt", infra)
	if r.code == 0 || !strings.Contains(r.out, owner) {
		t.Errorf("adopt of a name a live store records: exit %d:\n%s", r.code, r.out)
	}
	st, _ = store.OpenBolt(owner)
	st.Delete(infra)
	st.Close()
	// With no live store holding it, the unmarked namespace is adopted.
	if out := must(t, other, "recover", "--adopt", infra); !strings.Contains(out, "adopted 1 namespace of "+infra) {
		t.Errorf("adopt of an unmarked namespace nobody holds:\n%s", out)
	}
	must(t, other, "destroy", infra)
}

// Two stores naming one infrastructure: each one's gc leaves the other's
// namespaces and cgroups.
func TestGCLeavesAnotherLiveStoresInfrastructure(t *testing.T) {
	nstest.RequireRoot(t)
	first, second := t.TempDir(), t.TempDir()
	infra := uniqueInfra("crtwo")
	cleanup(t, infra, first)
	must(t, first, "apply", specFile(t, readExample(t, "demo.yaml"), infra))
	dirs := makeCgroups(t, infra+"x", first) // this store's, of an infrastructure it does not record
	before := nstest.Snapshot(t, infra)
	r := vnet(t, second, nil, "apply", specFile(t, readExample(t, "demo.yaml"), infra))
	if r.code == 0 || !strings.Contains(r.out, "--state-dir "+first) {
		t.Errorf("the second store's apply: exit %d:\n%s", r.code, r.out)
	}
	if out := gc(t, second, []string{infra, infra + "x"}); strings.Contains(out, infra) {
		t.Errorf("the second store's gc spoke of the first's infrastructure:\n%s", out)
	}
	if !allExist(dirs) {
		t.Error("the second store's gc removed the first's cgroups")
	}
	if after := nstest.Snapshot(t, infra); strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Error("the second store's gc changed the first's infrastructure")
	}
	gc(t, first, []string{infra, infra + "x"})
	if allExist(dirs) {
		t.Error("the first store's gc left its own cgroups of an infrastructure it does not record")
	}
}
