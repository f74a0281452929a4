package clustertest

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
)

// A VM paused over etcd stops sending and receiving, by the packet
// counters of its peer's vNIC, while everything stays configured; it stays
// paused across a restart of its host's agent and an apply of the same
// spec, and a resume brings its traffic back. vnet status over etcd says
// what is paused.
func TestClusterPauseSurvivesAgentRestart(t *testing.T) {
	c := faultCluster(t, 150*time.Second, "hv1", "hv2")
	infra := c.Infra()
	file := c.WriteSpec(infra, specOn(c, infra, []string{"hv1", "hv2"}, switchOnTwo))
	vnetOK(t, c, "apply", file, "--wait=60s")
	vm1, vm2 := plan.NSName(infra, "vm1"), plan.NSName(infra, "vm2")
	echo(t, vm2)
	ping(t, infra, "vm1", "10.77.0.2")

	out := vnetOK(t, c, "pause", infra, "--vm", "vm1", "--wait=60s")
	if !strings.Contains(out, "hv1 realized it after ") || !strings.Contains(out, "paused: VM vm1") {
		t.Errorf("pause --vm vm1 --wait says:\n%s", out)
	}
	stopped := func(when string) {
		t.Helper()
		before := nstest.LinkStats(t, vm2, "eth0")
		if sent, got := udpPing(t, vm1, "10.77.0.2", 10*time.Millisecond, 20); got != 0 {
			t.Errorf("%s: paused vm1 reached vm2 %d times of %d", when, got, sent)
		}
		if after := nstest.LinkStats(t, vm2, "eth0"); after.RxPackets != before.RxPackets {
			t.Errorf("%s: vm2's vNIC received %d packets while vm1 was paused", when, after.RxPackets-before.RxPackets)
		}
	}
	stopped("after the pause")

	// vnet exec on hv1 finds the VM its agent made there, by the agent's
	// state directory, and enters it: a paused VM is still there.
	carrier, err := c.command(c.Machine("hv1").NS, "--state-dir", filepath.Join(c.dir, "state-hv1"), "exec", "vm1", "--", "cat", "/sys/class/net/eth0/carrier").CombinedOutput()
	if err != nil || strings.TrimSpace(string(carrier)) != "0" {
		t.Errorf("vnet exec vm1 on hv1, where its agent made it, paused: %v, %q (want carrier 0)", err, carrier)
	}
	if out := vnetOK(t, c, "status", infra); !strings.Contains(out, "paused: VM vm1") {
		t.Errorf("status over etcd does not say vm1 is paused:\n%s", out)
	}
	if out := vnetOK(t, c, "history", infra); !regexp.MustCompile(`(?m)^2\s+1\s.*pause\s.*paused VM vm1$`).MatchString(out) {
		t.Errorf("history over etcd has no entry of the pause:\n%s", out)
	}

	hv1 := c.Machine("hv1")
	hv1.KillAgent()
	hv1.StartAgent("--interval", "30s")
	waitFor(t, 60*time.Second, "hv1's restarted agent current", func() (bool, string) {
		st, err := status(t, c, infra)
		if err != nil {
			return false, err.Error()
		}
		return st.states()["hv1"] == "current", st.states()["hv1"]
	})
	stopped("after hv1's agent restarted")
	vnetOK(t, c, "apply", file, "--wait=60s")
	stopped("after the same spec applied again")

	// A resume brings the traffic back within resumeBound of the command's
	// return (no --wait: the agent reacts to etcd's watch by itself). What
	// is timed is the path, not the VMs' ARP (nstest.Neighbour).
	nstest.Neighbour(t, vm1, "10.77.0.2", nstest.MAC(t, vm2))
	nstest.Neighbour(t, vm2, "10.77.0.1", nstest.MAC(t, vm1))
	var took []time.Duration
	for round := range resumeRounds {
		if round > 0 {
			vnetOK(t, c, "pause", infra, "--vm", "vm1", "--wait=60s")
		}
		var returned time.Time
		at := nstest.FirstEcho(t, vm1, "10.77.0.2", 10*time.Second, func() {
			if out := vnetOK(t, c, "resume", infra, "--vm", "vm1"); !strings.Contains(out, "nothing is paused") {
				t.Errorf("resume --vm vm1 says:\n%s", out)
			}
			returned = time.Now()
		})
		took = append(took, at.Sub(returned))
	}
	slices.Sort(took)
	t.Logf("first echo after resume returned, %d rounds: %v", resumeRounds, took)
	if median := took[len(took)/2]; median > resumeBound {
		t.Errorf("the median first echo came %s after vnet resume returned, more than %s (all: %v)", median, resumeBound, took)
	}
	if worst := took[len(took)-1]; worst > resumeWorst {
		t.Errorf("a first echo came %s after vnet resume returned, more than %s (all: %v)", worst, resumeWorst, took)
	}
	// resume --wait returns once hv1's agent reports it realized: the
	// traffic flows by then.
	vnetOK(t, c, "pause", infra, "--vm", "vm1", "--wait=60s")
	vnetOK(t, c, "resume", infra, "--vm", "vm1", "--wait=60s")
	if sent, got := udpPing(t, vm1, "10.77.0.2", time.Millisecond, 5); got != sent {
		t.Errorf("after resume --wait returned vm1 reached vm2 %d times of %d", got, sent)
	}
}

// Over etcd a resume is the command storing it and the host's agent
// realizing it on etcd's watch, with no debounce or poll between: its pass
// reads the record and applies only what changed (the paused port set up),
// a few milliseconds on an idle machine (VNET_TRACE=1 shows the agent's
// pass), so the traffic is often back before the command has exited. The test holds the median of resumeRounds resumes to the
// 100 ms promised, as on one machine; a single resume may wait longer
// when the machine is busy (two cores shared by the agents, etcd and
// other tests), so each is held only to resumeWorst.
const (
	resumeBound  = 100 * time.Millisecond
	resumeWorst  = 2 * time.Second
	resumeRounds = 5
)
