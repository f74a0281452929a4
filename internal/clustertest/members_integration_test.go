package clustertest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
)

// memberCluster is faultCluster on a 3-member etcd cluster of the etcd
// binary; it skips loudly when there is none.
func memberCluster(t *testing.T, limit time.Duration, hosts ...string) (*Cluster, Members) {
	t.Helper()
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds vnet and runs a cluster of machines on a 3-member etcd")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("SKIPPED: needs nsenter (util-linux)")
	}
	etcdBin := EtcdBinary()
	if etcdBin == "" {
		t.Skip("SKIPPED LOUDLY: no etcd binary on PATH, so the etcd member loss test did not run (apt-get install etcd-server)")
	}
	bin := sharedBin(t)
	start := time.Now()
	t.Cleanup(func() {
		if took := time.Since(start); took > limit {
			t.Errorf("took %s, more than %s", took.Round(time.Millisecond), limit)
		}
	})
	c, ms := NewWithMembers(t, bin, etcdBin, 3, hosts...)
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
	return c, ms
}

// The loss of one etcd member of three changes nothing: an apply goes
// through and reaches every host. The loss of a second (no quorum) makes
// apply fail soon with an error that says so, while the hosts keep what
// they have and traffic flows. Both members back, a change converges. A
// datagram every 10 ms between VMs on two hosts runs throughout.
func TestClusterEtcdMemberLoss(t *testing.T) {
	c, ms := memberCluster(t, 120*time.Second, "hv1", "hv2", "hv3")
	infra := c.Infra()
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs))
	waitConverged(t, c, infra, 1, 30*time.Second)
	for _, vm := range []string{"vm1", "vm2", "vm3"} {
		echo(t, plan.NSName(infra, vm))
	}
	ping(t, infra, "vm1", "10.77.0.3")
	p := startPinger(t, plan.NSName(infra, "vm1"), "10.77.0.3", 10*time.Millisecond)
	time.Sleep(500 * time.Millisecond)

	// One member down, the leader so that an election follows.
	first := ms.Leader()
	first.Stop()
	t.Logf("stopped %s, the leader", first.Name)
	start := time.Now()
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs+addVM4))
	t.Logf("apply with 2 of 3 members took %s", time.Since(start).Round(time.Millisecond))
	took := waitConverged(t, c, infra, 2, 30*time.Second)
	t.Logf("generation 2 on every host %s after the apply", took.Round(time.Millisecond))
	echo(t, plan.NSName(infra, "vm4"))
	ping(t, infra, "vm1", "10.77.0.4")

	// A second member down: no quorum.
	var second *Member
	for _, m := range ms {
		if m != first {
			second = m
			break
		}
	}
	hv1 := c.Machine("hv1")
	before := hostIndexes(t, hv1.NS, infra, "vm1")
	linksBefore := map[string]string{}
	for _, m := range c.Machines {
		linksBefore[m.Host] = strings.Join(vnetLinks(m), "\n")
	}
	second.Stop()
	t.Logf("stopped %s: 1 of 3 members left", second.Name)
	bad := c.WriteSpec(infra, c.Spec(infra, switchAndVMs+addVM4+
		"  - {name: vm5, host: hv3, nics: [{portgroup: app, ip: 10.77.0.5/24}]}\n"))
	start = time.Now()
	out, err := c.Vnet("apply", bad)
	took = time.Since(start)
	t.Logf("apply without quorum: %s after %s", strings.TrimSpace(out), took.Round(time.Millisecond))
	switch {
	case err == nil:
		t.Errorf("apply without quorum succeeded:\n%s", out)
	case !strings.Contains(out, "no quorum"):
		t.Errorf("apply without quorum does not say there is no quorum:\n%s", out)
	}
	// The store's 5 s per call, a few calls, and slack for a slow host; a
	// hang would blow it.
	if took > 20*time.Second {
		t.Errorf("apply without quorum took %s to fail", took)
	}
	ping(t, infra, "vm2", "10.77.0.4")
	time.Sleep(2 * time.Second) // let the agents notice, and not act
	for _, what := range remade(before, hostIndexes(t, hv1.NS, infra, "vm1")) {
		t.Errorf("hv1's %s was made again without quorum", what)
	}
	for _, m := range c.Machines {
		if now := strings.Join(vnetLinks(m), "\n"); now != linksBefore[m.Host] {
			t.Errorf("%s's links changed without quorum:\nbefore\n%s\nafter\n%s", m.Host, linksBefore[m.Host], now)
		}
		select {
		case <-m.waited:
			t.Errorf("%s's agent ended without quorum:\n%s", m.Host, m.AgentLog())
		default:
		}
	}
	if nsExists(plan.NSName(infra, "vm5")) {
		t.Errorf("vm5 was made though its apply failed")
	}

	// Both back: the agents report again and a change converges.
	down := time.Now()
	second.Start()
	first.Start()
	took = waitFor(t, 30*time.Second, "every host current at generation 2 again", func() (bool, string) {
		st, err := status(t, c, infra)
		if err != nil {
			return false, err.Error()
		}
		return st.Generation == 2 && st.Converged, fmt.Sprint(st.states())
	})
	t.Logf("members back: status current again %s after", took.Round(time.Millisecond))
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs+addVM4+
		"  - {name: vm5, host: hv3, nics: [{portgroup: app, ip: 10.77.0.5/24}]}\n"))
	took = waitConverged(t, c, infra, 3, 30*time.Second)
	t.Logf("a change with every member back reached every host in %s (%s after the restart)",
		took.Round(time.Millisecond), time.Since(down).Round(time.Millisecond))
	echo(t, plan.NSName(infra, "vm5"))
	ping(t, infra, "vm1", "10.77.0.5")

	sent, got := p.Stop()
	t.Logf("datagram every 10 ms vm1 (hv1) -> vm3 (hv3) and back, across the loss of one member, of quorum, and the restart: %d sent, %d answered", sent, got)
	if sent != got {
		t.Errorf("lost %d of %d", sent-got, sent)
	}
}

// kill -9 of an agent under a TCP stream and a 10 ms datagram stream
// between VMs on two hosts: the stream neither breaks nor resends a
// segment, no datagram is lost, and the restarted agent makes nothing
// again.
func TestClusterAgentKillUnderTCP(t *testing.T) {
	c := faultCluster(t, 60*time.Second, "hv1", "hv2", "hv3")
	infra := c.Infra()
	applySpec(t, c, infra, c.Spec(infra, switchAndVMs))
	waitConverged(t, c, infra, 1, 30*time.Second)
	for _, vm := range []string{"vm1", "vm2", "vm3"} {
		echo(t, plan.NSName(infra, vm))
	}
	ping(t, infra, "vm1", "10.77.0.2")
	tcp(t, infra, "vm1", "vm2")

	hv1 := c.Machine("hv1")
	before := hostIndexes(t, hv1.NS, infra, "vm1")
	vm1 := plan.NSName(infra, "vm1")
	resentBefore, dupBefore := tcpResent(t, vm1)
	p := startPinger(t, vm1, "10.77.0.2", 10*time.Millisecond)
	// 16 KiB every 10 ms: 13 Mbit/s, well below what the tunnel carries
	// on a slow host, so a segment resent that the receiver did not
	// already have means a lost one.
	s := startTCPStream(t, vm1, plan.NSName(infra, "vm2"), "10.77.0.2", 16<<10, 10*time.Millisecond)
	time.Sleep(time.Second)
	logBefore := len(hv1.AgentLog())
	hv1.KillAgent()
	time.Sleep(time.Second)
	restart := time.Now()
	hv1.StartAgent("--interval", "30s")
	// Its first report comes after its first pass.
	waitFor(t, 20*time.Second, "a report of the restarted agent", func() (bool, string) {
		at, err := reportedAt(c, infra, "hv1")
		return err == nil && at.After(restart), fmt.Sprint(at, err)
	})
	t.Logf("restarted agent reported %s after its start", time.Since(restart).Round(time.Millisecond))
	time.Sleep(time.Second)
	sent, got := p.Stop()
	bytes, gap, err := s.Stop()
	resent, dup := tcpResent(t, vm1)
	resent, dup = resent-resentBefore, dup-dupBefore
	t.Logf("across the kill and restart: datagrams %d sent, %d answered; TCP %d bytes in order, longest pause %s, %d segments resent, %d of them duplicates the receiver already had",
		sent, got, bytes, gap.Round(time.Millisecond), resent, dup)
	if err != nil {
		t.Errorf("TCP stream broke: %v", err)
	}
	if sent != got {
		t.Errorf("lost %d of %d datagrams", sent-got, sent)
	}
	if lost := resent - dup; lost > 0 {
		t.Errorf("%d TCP segments resent that the receiver did not have: they were lost", lost)
	}
	for _, what := range remade(before, hostIndexes(t, hv1.NS, infra, "vm1")) {
		t.Errorf("%s was made again by the restarted agent", what)
	}
	if after := hv1.AgentLog()[logBefore:]; strings.Contains(after, "applied") {
		t.Errorf("restarted agent changed something:\n%s", after)
	}
}

// reportedAt is when the host's agent last reported on the infrastructure.
func reportedAt(c *Cluster, infra, host string) (time.Time, error) {
	out, err := c.Vnet("status", infra, "-o", "json")
	if err != nil {
		return time.Time{}, fmt.Errorf("status: %v: %s", err, out)
	}
	var got []struct {
		Hosts []struct {
			Host   string `json:"host"`
			Report *struct {
				At time.Time `json:"at"`
			} `json:"report"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
		return time.Time{}, fmt.Errorf("status: %q: %v", out, err)
	}
	for _, h := range got[0].Hosts {
		if h.Host == host && h.Report != nil {
			return h.Report.At, nil
		}
	}
	return time.Time{}, fmt.Errorf("no report of %s", host)
}
