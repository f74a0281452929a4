package clustertest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store/registrytest"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := registrytest.Run(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// sharedBin builds vnet once for the fault tests of this run.
func sharedBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		root, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			binErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		if binDir, binErr = os.MkdirTemp("", "vnet-clustertest-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "vnet")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/vnet")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// faultCluster starts a cluster of the hosts with an agent on each, after
// the checks every test of a real cluster needs; the test's whole run is
// bounded by limit.
func faultCluster(t *testing.T, limit time.Duration, hosts ...string) *Cluster {
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
	c := New(t, bin, hosts...)
	for _, m := range c.Machines {
		m.StartAgent("--interval", "30s")
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range c.Machines {
				t.Logf("agent of %s:\n%s", m.Host, m.AgentLog())
			}
		}
	})
	return c
}

// specOn is a spec naming only the given machines (the cluster's Spec
// names them all).
func specOn(c *Cluster, name string, hosts []string, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nhosts:\n", name)
	for _, h := range hosts {
		fmt.Fprintf(&b, "  - {name: %s, underlay: %s}\n", h, c.Machine(h).IP)
	}
	b.WriteString(body)
	return b.String()
}

type hostState struct {
	Host   string `json:"host"`
	State  string `json:"state"`
	Report *struct {
		Generation int `json:"generation"`
	} `json:"report"`
}

type infraStatus struct {
	SpecFile   string      `json:"spec_file"`
	Generation int         `json:"generation"`
	Converged  bool        `json:"converged"`
	Hosts      []hostState `json:"hosts"`
}

// status is vnet status -o json of one infrastructure.
func status(t *testing.T, c *Cluster, infra string) (infraStatus, error) {
	t.Helper()
	out, err := c.Vnet("status", infra, "-o", "json")
	if err != nil {
		return infraStatus{}, fmt.Errorf("status: %v: %s", err, out)
	}
	var got []infraStatus
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
		return infraStatus{}, fmt.Errorf("status: %q: %v", out, err)
	}
	return got[0], nil
}

// states maps each host to its state in vnet status.
func (s infraStatus) states() map[string]string {
	m := map[string]string{}
	for _, h := range s.Hosts {
		m[h.Host] = h.State
	}
	return m
}

// waitFor polls cond every 50 ms until it holds, and returns how long that
// took; it fails the test after limit, with what cond said last.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < limit {
		var ok bool
		if ok, last = cond(); ok {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %s", what, limit, last)
	return 0
}

// vnetLinks lists the links of vnet in a machine's namespace, one line each.
func vnetLinks(m *Machine) []string {
	out, _ := exec.Command("ip", "-n", m.NS, "-o", "link", "show").Output()
	var links []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "alias vnet:") {
			links = append(links, line)
		}
	}
	return links
}

// nsInode tells namespaces of one name apart: 0 when there is none.
func nsInode(ns string) uint64 {
	fi, err := os.Stat(filepath.Join("/run/netns", ns))
	if err != nil {
		return 0
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func nsExists(ns string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	return err == nil
}

func applySpec(t *testing.T, c *Cluster, file, src string) {
	t.Helper()
	p := c.WriteSpec(file, src)
	if out, err := c.Vnet("apply", p); err != nil {
		t.Fatalf("apply %s: %v\n%s", file, err, out)
	}
}

// Two applies of one infrastructure at once: one is stored and the other
// refused with a conflict, or (when they do not overlap) both are, one
// after the other; the stored spec is always one of the two whole.
func TestClusterConcurrentApplies(t *testing.T) {
	c := faultCluster(t, 60*time.Second, "hv1", "hv2", "hv3")
	infra := c.Infra()
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs))
	gen := 1
	conflicts, serial := 0, 0
	for round := 0; round < 20 && conflicts < 3; round++ {
		a := c.WriteSpec(fmt.Sprintf("a%d", round), c.Spec(infra, switchAndVMs+
			fmt.Sprintf("  - {name: vm4, host: hv1, nics: [{portgroup: app, ip: 10.77.0.%d/24}]}\n", 10+round)))
		b := c.WriteSpec(fmt.Sprintf("b%d", round), c.Spec(infra, switchAndVMs+
			fmt.Sprintf("  - {name: vm5, host: hv3, nics: [{portgroup: app, ip: 10.77.0.%d/24}]}\n", 100+round)))
		type result struct {
			out string
			err error
		}
		var res [2]result
		var wg sync.WaitGroup
		for i, f := range []string{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i].out, res[i].err = c.Vnet("apply", f)
			}()
		}
		wg.Wait()
		st, err := status(t, c, infra)
		if err != nil {
			t.Fatal(err)
		}
		// Which spec is stored: the one whose dry run finds nothing to do.
		unchanged := func(f string) bool {
			out, err := c.Vnet("apply", "--dry-run", f)
			if err != nil {
				t.Fatalf("dry run of %s: %v\n%s", f, err, out)
			}
			return strings.Contains(out, "unchanged")
		}
		storedA, storedB := unchanged(a), unchanged(b)
		if storedA == storedB {
			t.Fatalf("round %d: stored spec is neither a nor b whole (a %v, b %v)", round, storedA, storedB)
		}
		winner := b
		if storedA {
			winner = a
		}
		if filepath.Base(st.SpecFile) != filepath.Base(winner) {
			t.Errorf("round %d: stored spec is %s but its file is recorded as %s", round, winner, st.SpecFile)
		}
		switch {
		case res[0].err == nil && res[1].err == nil:
			serial++
			gen += 2
		case res[0].err != nil && res[1].err != nil:
			t.Fatalf("round %d: both applies failed:\n%s\n%s", round, res[0].out, res[1].out)
		default:
			loser, won := 1, 0
			if res[0].err != nil {
				loser, won = 0, 1
			}
			if !strings.Contains(res[loser].out, "was changed by another apply") {
				t.Errorf("round %d: the losing apply's error does not say why:\n%s", round, res[loser].out)
			}
			if []string{a, b}[won] != winner {
				t.Errorf("round %d: %s succeeded but %s is stored", round, []string{a, b}[won], winner)
			}
			if conflicts == 0 {
				t.Logf("the losing apply said: %s", strings.TrimSpace(res[loser].out))
			}
			conflicts++
			gen++
		}
		if st.Generation != gen {
			t.Fatalf("round %d: generation %d, want %d", round, st.Generation, gen)
		}
	}
	t.Logf("%d rounds overlapped (one stored, one refused), %d ran one after the other", conflicts, serial)
	if conflicts == 0 {
		t.Errorf("no two applies overlapped in %d rounds", serial)
	}
}

// A machine cut off the underlay keeps what it has while the others take
// a change, shows as lagging and then gone, and catches up once healed.
func TestClusterPartitionAndHeal(t *testing.T) {
	c := faultCluster(t, 60*time.Second, "hv1", "hv2", "hv3")
	infra := c.Infra()
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs))
	waitConverged(t, c, infra, 1, 30*time.Second)
	for _, vm := range []string{"vm1", "vm2", "vm3"} {
		echo(t, plan.NSName(infra, vm))
	}
	ping(t, infra, "vm3", "10.77.0.1")

	hv3 := c.Machine("hv3")
	vtep := plan.VTEPName(infra, "dvs")
	before := hostIndexes(t, hv3.NS, infra, "vm3")
	linksBefore := vnetLinks(hv3)
	fdbBefore, _ := hv3.Exec("bridge", "fdb", "show", "dev", vtep)

	hv3.Cut()
	cut := time.Now()
	healed := false
	defer func() {
		if !healed {
			hv3.Heal()
		}
	}()
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs+addVM4))
	took := waitFor(t, 20*time.Second, "hv1 and hv2 current, hv3 behind", func() (bool, string) {
		st, err := status(t, c, infra)
		if err != nil {
			return false, err.Error()
		}
		s := st.states()
		return st.Generation == 2 && s["hv1"] == "current" && s["hv2"] == "current" &&
			(s["hv3"] == "lagging" || s["hv3"] == "gone"), fmt.Sprint(s)
	})
	t.Logf("generation 2 current on hv1 and hv2 %s after the apply, hv3 behind", took.Round(time.Millisecond))
	echo(t, plan.NSName(infra, "vm4"))
	ping(t, infra, "vm1", "10.77.0.4")

	// The report of the cut agent outlives the cut by its lease's TTL (5 s).
	took = waitFor(t, 20*time.Second, "hv3 gone", func() (bool, string) {
		st, err := status(t, c, infra)
		if err != nil {
			return false, err.Error()
		}
		return st.states()["hv3"] == "gone", fmt.Sprint(st.states())
	})
	t.Logf("hv3 shown gone %s after the cut", time.Since(cut).Round(time.Millisecond))

	// Meanwhile hv3 changed nothing.
	for _, what := range remade(before, hostIndexes(t, hv3.NS, infra, "vm3")) {
		t.Errorf("cut hv3's %s was made again", what)
	}
	if now := vnetLinks(hv3); strings.Join(now, "\n") != strings.Join(linksBefore, "\n") {
		t.Errorf("cut hv3's links changed:\nbefore\n%s\nafter\n%s", strings.Join(linksBefore, "\n"), strings.Join(now, "\n"))
	}
	if fdb, _ := hv3.Exec("bridge", "fdb", "show", "dev", vtep); fdb != fdbBefore {
		t.Errorf("cut hv3's tunnel entries changed:\nbefore\n%s\nafter\n%s", fdbBefore, fdb)
	}

	hv3.Heal()
	healed = true
	took = waitConverged(t, c, infra, 2, 30*time.Second)
	t.Logf("hv3 healed after %s cut: every host current at generation 2 %s after the heal", time.Since(cut).Round(time.Millisecond), took.Round(time.Millisecond))
	for what, idx := range before {
		if what == "vtep" && ifindex(t, hv3.NS, vtep) != idx {
			t.Errorf("healed hv3's tunnel endpoint was made again")
		}
	}
	ping(t, infra, "vm3", "10.77.0.4")
	if out, _ := hv3.Exec("bridge", "fdb", "show", "dev", vtep); !strings.Contains(out, plan.StableMAC(infra, "vnic/vm4/0")) {
		t.Errorf("healed hv3's tunnel has no entry for vm4:\n%s", out)
	}
}

// hostOf is the machine whose switch has the VM's vNIC as a port, or ""
// (several hosts listed with commas should one be left behind).
func hostOf(c *Cluster, infra, vm string) string {
	var on []string
	for _, m := range c.Machines {
		for _, l := range vnetLinks(m) {
			if strings.Contains(l, "alias "+plan.AliasPrefix+"peer="+plan.NSName(infra, vm)) {
				on = append(on, m.Host)
				break
			}
		}
	}
	return strings.Join(on, ",")
}

// A VM whose host changes in the spec leaves the old host and comes up on
// the new one, and the others reach it there.
func TestClusterVMMovesHost(t *testing.T) {
	c := faultCluster(t, 60*time.Second, "hv1", "hv2", "hv3")
	infra := c.Infra()
	hv3 := c.Machine("hv3")
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs+addVM4))
	waitConverged(t, c, infra, 1, 30*time.Second)
	if on := hostOf(c, infra, "vm4"); on != "hv2" {
		t.Fatalf("vm4 is on %q, want hv2", on)
	}
	echo(t, plan.NSName(infra, "vm1"))
	echo(t, plan.NSName(infra, "vm4"))
	ping(t, infra, "vm1", "10.77.0.4")

	// The machines of the harness share /run/netns, where a VM's namespace
	// has the same name on every host: hv3 making vm4's while hv2 still
	// removes its own would take each other's (on real hosts they are
	// apart). So hv3's agent is down until hv2 is done.
	hv3.KillAgent()
	moved := strings.Replace(addVM4, "host: hv2", "host: hv3", 1)
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs+moved))
	applied := time.Now()
	took := waitFor(t, 20*time.Second, "vm4 gone from hv2", func() (bool, string) {
		on := hostOf(c, infra, "vm4")
		return on == "" && !nsExists(plan.NSName(infra, "vm4")), "on " + on
	})
	t.Logf("vm4 gone from hv2 %s after the apply", took.Round(time.Millisecond))
	hv3.StartAgent("--interval", "30s")
	restarted := time.Now()
	// hv1 reconciles every 30 s: what it holds once it reports generation
	// 2 is what that change made.
	waitFor(t, 20*time.Second, "hv1 current", func() (bool, string) {
		st, err := status(t, c, infra)
		if err != nil {
			return false, err.Error()
		}
		return st.Generation == 2 && st.states()["hv1"] == "current", fmt.Sprint(st.states())
	})
	fdb, _ := c.Machine("hv1").Exec("bridge", "fdb", "show", "dev", plan.VTEPName(infra, "dvs"))
	mac := plan.StableMAC(infra, "vnic/vm4/0")
	if !strings.Contains(fdb, mac+" dst "+hv3.IP) {
		t.Errorf("hv1's tunnel does not send vm4's frames to hv3 after the move:\n%s", fdb)
	}
	took = waitFor(t, 20*time.Second, "vm4 on hv3", func() (bool, string) {
		on := hostOf(c, infra, "vm4")
		return on == "hv3" && nsExists(plan.NSName(infra, "vm4")), "on " + on
	})
	t.Logf("vm4 on hv3 %s after its agent started", took.Round(time.Millisecond))
	// The old namespace went with its echo; answer in the new one.
	echo(t, plan.NSName(infra, "vm4"))
	waitFor(t, 20*time.Second, "vm1 reaches vm4 on hv3", func() (bool, string) {
		_, got := udpPing(t, plan.NSName(infra, "vm1"), "10.77.0.4", 10*time.Millisecond, 5)
		return got > 0, "no answer"
	})
	t.Logf("vm1 (hv1) reaches vm4 on hv3 %s after hv3's agent started (%s after the apply)",
		time.Since(restarted).Round(time.Millisecond), time.Since(applied).Round(time.Millisecond))
	waitConverged(t, c, infra, 2, 30*time.Second)
	ping(t, infra, "vm2", "10.77.0.4")
	ping(t, infra, "vm4", "10.77.0.1")
	fdb, _ = c.Machine("hv1").Exec("bridge", "fdb", "show", "dev", plan.VTEPName(infra, "dvs"))
	for _, line := range strings.Split(fdb, "\n") {
		if strings.HasPrefix(line, mac) && strings.Contains(line, " self") && !strings.Contains(line, "dst "+c.Machine("hv3").IP) {
			t.Errorf("hv1 still sends vm4's frames elsewhere than hv3: %s", line)
		}
	}
	if len(vnetLinks(c.Machine("hv2"))) == 0 {
		t.Errorf("hv2 lost its own part with vm4's move")
	}
}

// A host the spec no longer names is emptied by its agent, and the others
// stop sending to it.
func TestClusterHostRemoved(t *testing.T) {
	c := faultCluster(t, 60*time.Second, "hv1", "hv2", "hv3")
	infra := c.Infra()
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs))
	waitConverged(t, c, infra, 1, 30*time.Second)
	hv3 := c.Machine("hv3")
	if len(vnetLinks(hv3)) == 0 {
		t.Fatal("hv3 holds nothing of the infrastructure before its removal")
	}

	applySpec(t, c, infra, specOn(c, infra, []string{"hv1", "hv2"}, switchOnTwo))
	took := waitFor(t, 30*time.Second, "hv3 emptied", func() (bool, string) {
		links := vnetLinks(hv3)
		if nsExists(plan.NSName(infra, "vm3")) {
			links = append(links, plan.NSName(infra, "vm3"))
		}
		return len(links) == 0, strings.Join(links, "\n")
	})
	t.Logf("hv3 emptied %s after the apply", took.Round(time.Millisecond))
	waitConverged(t, c, infra, 2, 30*time.Second)
	st, err := status(t, c, infra)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := st.states()["hv3"]; ok {
		t.Errorf("hv3 still in status as %s", s)
	}
	if out, _ := hv3.Exec("ip", "-o", "link", "show"); strings.Contains(out, "vnet:") {
		t.Errorf("links of vnet left on hv3:\n%s", out)
	}
	fdb, _ := c.Machine("hv1").Exec("bridge", "fdb", "show", "dev", plan.VTEPName(infra, "dvs"))
	if strings.Contains(fdb, "dst "+hv3.IP) {
		t.Errorf("hv1's tunnel still sends to hv3:\n%s", fdb)
	}
	echo(t, plan.NSName(infra, "vm2"))
	ping(t, infra, "vm1", "10.77.0.2")
	select {
	case <-hv3.waited:
		t.Errorf("hv3's agent ended:\n%s", hv3.AgentLog())
	default:
	}
}

// With etcd stopped, apply fails at once and traffic flows on; etcd
// started again on the same data, the agents report and take changes.
func TestClusterEtcdDown(t *testing.T) {
	c := faultCluster(t, 60*time.Second, "hv1", "hv2", "hv3")
	infra := c.Infra()
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs))
	waitConverged(t, c, infra, 1, 30*time.Second)
	for _, vm := range []string{"vm1", "vm2", "vm3"} {
		echo(t, plan.NSName(infra, vm))
	}
	ping(t, infra, "vm1", "10.77.0.3")

	type result struct{ sent, got int }
	pinged := make(chan result, 1)
	go func() {
		sent, got := udpPing(t, plan.NSName(infra, "vm1"), "10.77.0.3", 10*time.Millisecond, 800)
		pinged <- result{sent, got}
	}()
	time.Sleep(500 * time.Millisecond)
	c.StopServer()
	stopped := time.Now()
	specFile := c.WriteSpec(infra, c.Spec(infra, switchAndVMs+addVM4))
	start := time.Now()
	out, err := c.Vnet("apply", specFile)
	took := time.Since(start)
	t.Logf("apply with etcd down: %s after %s", strings.TrimSpace(out), took.Round(time.Millisecond))
	if err == nil {
		t.Errorf("apply with etcd down succeeded:\n%s", out)
	} else if !strings.Contains(out, "etcd unavailable") {
		t.Errorf("apply with etcd down does not say etcd is unavailable:\n%s", out)
	}
	if took > 10*time.Second {
		t.Errorf("apply with etcd down took %s to fail", took)
	}
	time.Sleep(time.Until(stopped.Add(4 * time.Second)))
	c.StartServer()
	t.Logf("etcd down %s", time.Since(stopped).Round(time.Millisecond))
	r := <-pinged
	t.Logf("datagram every 10 ms vm1 (hv1) -> vm3 (hv3) and back, across etcd's stop and start: %d sent, %d answered", r.sent, r.got)
	if r.sent != r.got {
		t.Errorf("lost %d of %d while etcd was down", r.sent-r.got, r.sent)
	}

	// Every agent reports again and takes a change.
	took = waitFor(t, 20*time.Second, "every host reporting again", func() (bool, string) {
		st, err := status(t, c, infra)
		if err != nil {
			return false, err.Error()
		}
		return st.Converged, fmt.Sprint(st.states())
	})
	t.Logf("every host current again %s after etcd came back", took.Round(time.Millisecond))
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs+addVM4))
	took = waitConverged(t, c, infra, 2, 20*time.Second)
	t.Logf("a change after the restart reached every host in %s", took.Round(time.Millisecond))
	echo(t, plan.NSName(infra, "vm4"))
	ping(t, infra, "vm3", "10.77.0.4")
}
