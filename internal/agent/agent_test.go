package agent_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/agent"
	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/teaming"
)

// teamLab has two hosts with two 200 Mbit uplinks each and a peer whose
// 1 Gbit NIC is never the bottleneck. VM names are filled in so that the
// test knows which uplink portid pins them to.
const teamLab = `
name: INFRA
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 200Mbit}, {name: vmnic1, speed: 200Mbit}]
  - name: esx2
    nics: [{name: vmnic0, speed: 200Mbit}, {name: vmnic1, speed: 200Mbit}]
  - name: peer
    native: true
    nics: [{name: eth0, speed: 1Gbit, ip: 10.11.0.100/24}]
switches:
  - name: dvs0
    uplinks:
      - {name: u1, nics: {esx1: vmnic0, esx2: vmnic0}}
      - {name: u2, nics: {esx1: vmnic1, esx2: vmnic1}}
    teaming: {policy: loadbased, lbt: {threshold: 75%, window: 2s, interval: 2s}}
    portgroups: [{name: pg-vm}]
vms:
  - {name: VM1, host: esx1, nics: [{portgroup: pg-vm, ip: 10.11.0.1/24}]}
  - {name: VM2, host: esx1, nics: [{portgroup: pg-vm, ip: 10.11.0.2/24}]}
  - {name: vm3, host: esx2, nics: [{portgroup: pg-vm, ip: 10.11.0.3/24}]}
`

const (
	peerIP   = "10.11.0.100"
	lineRate = 200e6
)

// labWithTwinVMs fills in two esx1 VM names that portid pins to the same
// uplink, so that LBT has something to do, and returns that uplink.
func labWithTwinVMs(t *testing.T, infra string) (src, vm1, vm2, uplink string) {
	return pickVMs(t, teamLab, infra, true)
}

// pickVMs fills in the template's two esx1 VM names so that portid pins
// them to the same uplink or to different ones; uplink is the first's.
func pickVMs(t *testing.T, template, infra string, same bool) (src, vm1, vm2, uplink string) {
	t.Helper()
	for i := 0; i < 50; i++ {
		a, b := fmt.Sprintf("vm%da", i), fmt.Sprintf("vm%db", i)
		src = strings.NewReplacer("INFRA", infra, "VM1", a, "VM2", b).Replace(template)
		doc, err := spec.Load("test.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		as := plan.Assignments(plan.Model(doc.Spec, plan.Options{}))
		if (as[a+"/eth0"].Uplink == as[b+"/eth0"].Uplink) == same {
			return src, a, b, as[a+"/eth0"].Uplink
		}
	}
	t.Fatal("no two VM names pinned as wanted")
	return
}

// startAgent runs an agent for the infra until the test ends.
func startAgent(t *testing.T, doc *spec.Document) *logBuffer {
	t.Helper()
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	log := &logBuffer{}
	a := &agent.Agent{Infra: doc.Spec.Name, DP: dp, Log: log, Tick: 200 * time.Millisecond,
		Spec: func() (*spec.Spec, error) { return doc.Spec, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		dp.Close()
		t.Logf("agent log:\n%s", log)
	})
	return log
}

type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stream runs a TCP stream from a namespace to the peer until stop closes.
func stream(t *testing.T, infra, fromNS string, stop <-chan struct{}) *nstest.Receiver {
	t.Helper()
	return nstest.Stream(t, fromNS, nstest.NSName(infra, "peer"), peerIP+":0", stop)
}

func assignments(t *testing.T, eng *reconcile.Engine, infra string) map[string]teaming.Assignment {
	t.Helper()
	observed, err := eng.DP.Observe(infra, nil)
	if err != nil {
		t.Fatal(err)
	}
	return plan.Assignments(observed)
}

// setLink brings a link up or down inside a namespace, as `ip link set`
// run by a user there would.
func setLink(t *testing.T, ns, name string, up bool) {
	t.Helper()
	if err := nstest.Do(t, ns, func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		if up {
			return netlink.LinkSetUp(l)
		}
		return netlink.LinkSetDown(l)
	}); err != nil {
		t.Fatal(err)
	}
}

func other(u string) string {
	if u == "u1" {
		return "u2"
	}
	return "u1"
}

func nicOf(u string) string { return map[string]string{"u1": "vmnic0", "u2": "vmnic1"}[u] }

func TestFailoverKeepsTCPAndFailsBack(t *testing.T) {
	const infra = "itfail"
	src, vm1, _, uplink := labWithTwinVMs(t, infra)
	eng := nstest.Engine(t)
	doc, _ := nstest.Apply(t, eng, src)
	startAgent(t, doc)
	esx1 := nstest.NSName(infra, "esx1")

	stop := make(chan struct{})
	defer close(stop)
	r := stream(t, infra, nstest.NSName(infra, vm1), stop)
	time.Sleep(time.Second)
	cut := r.Since()
	setLink(t, esx1, nicOf(uplink), false) // the cable is pulled
	time.Sleep(2 * time.Second)

	if a := assignments(t, eng, infra)[vm1+"/eth0"]; a.Uplink != other(uplink) || a.Reason != teaming.FailedTo {
		t.Errorf("after the cut %s is on %s (%s), want %s by failover", vm1, a.Uplink, a.Reason, other(uplink))
	}
	gap := r.LongestGap(cut, cut+1500*time.Millisecond)
	after := r.Rate(cut+time.Second, cut+2*time.Second)
	t.Logf("uplink %s cut at %v: longest stall %v, then %.0f Mbit/s", uplink, cut.Round(time.Millisecond), gap, after/1e6)
	if gap > time.Second {
		t.Errorf("traffic stalled for %v after the cut, want at most 1s", gap)
	}
	if after < 0.5*lineRate {
		t.Errorf("%.0f Mbit/s a second after the cut: traffic did not resume on %s", after/1e6, other(uplink))
	}

	setLink(t, esx1, nicOf(uplink), true) // failback: the cable is back
	time.Sleep(time.Second)
	if a := assignments(t, eng, infra)[vm1+"/eth0"]; a.Uplink != uplink || a.Reason != teaming.Pinned {
		t.Errorf("after failback %s is on %s (%s), want %s pinned", vm1, a.Uplink, a.Reason, uplink)
	}
	if err := r.Err(); err != nil {
		t.Errorf("the TCP connection broke: %v", err)
	}

	// The physical switch's side going away is a cut too.
	phys := nstest.NSName(infra, plan.PhysSwitch)
	peerPort := physPort(t, eng, infra, "esx1", nicOf(uplink))
	setLink(t, phys, peerPort, false)
	time.Sleep(time.Second)
	if a := assignments(t, eng, infra)[vm1+"/eth0"]; a.Uplink != other(uplink) {
		t.Errorf("with the switch port of %s down, %s is still on it", uplink, vm1)
	}
	setLink(t, phys, peerPort, true)
}

// physPort finds the physical switch's port for a host's NIC.
func physPort(t *testing.T, eng *reconcile.Engine, infra, host, nic string) string {
	t.Helper()
	observed, err := eng.DP.Observe(infra, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range observed {
		if r.Kind == plan.KindVeth && r.A.NS == nstest.NSName(infra, host) && r.A.Name == nic {
			return r.B.Name
		}
	}
	t.Fatalf("no physical switch port for %s/%s", host, nic)
	return ""
}

func TestLBTSpreadsTwoBusyPorts(t *testing.T) {
	const infra = "itlbt"
	src, vm1, vm2, uplink := labWithTwinVMs(t, infra)
	eng := nstest.Engine(t)
	doc, _ := nstest.Apply(t, eng, src)
	startAgent(t, doc)

	stop := make(chan struct{})
	defer close(stop)
	r1 := stream(t, infra, nstest.NSName(infra, vm1), stop)
	r2 := stream(t, infra, nstest.NSName(infra, vm2), stop)
	// Window 2 s and interval 2 s: a move is due after about 2-3 s.
	time.Sleep(7 * time.Second)
	as := assignments(t, eng, infra)
	a1, a2 := as[vm1+"/eth0"], as[vm2+"/eth0"]
	t.Logf("both started on %s; now %s on %s (%s), %s on %s (%s)", uplink, vm1, a1.Uplink, a1.Reason, vm2, a2.Uplink, a2.Reason)
	if a1.Uplink == a2.Uplink {
		t.Fatalf("both busy ports still on %s", a1.Uplink)
	}
	if a1.Reason != teaming.Moved && a2.Reason != teaming.Moved {
		t.Errorf("neither port says it was moved by LBT")
	}
	agg := r1.Rate(4*time.Second, 7*time.Second) + r2.Rate(4*time.Second, 7*time.Second)
	t.Logf("aggregate after rebalancing: %.0f Mbit/s = %.2fx one uplink", agg/1e6, agg/lineRate)
	if agg < 1.8*lineRate {
		t.Errorf("aggregate %.0f Mbit/s, want at least 1.8x one %.0f Mbit uplink", agg/1e6, lineRate/1e6)
	}
}

// A pool's limit holds across the uplinks of a team: two VMs of a limited
// pool on different uplinks make the limit together, not twice it, and one
// alone gets all of it once the agent has moved the split.
func TestTeamWideLimit(t *testing.T) {
	const infra = "itlim"
	const limit = 100e6
	lab := strings.NewReplacer(
		"    teaming: {policy: loadbased, lbt: {threshold: 75%, window: 2s, interval: 2s}}\n    portgroups: [{name: pg-vm}]",
		"    ioc: {enabled: true, pools: {backup: {shares: low, limit: 100Mbit}}}\n    portgroups: [{name: pg-vm, pool: backup}]",
	).Replace(teamLab)
	src, vm1, vm2, _ := pickVMs(t, lab, infra, false)
	if !strings.Contains(src, "limit: 100Mbit") {
		t.Fatal("the lab has no limited pool")
	}
	eng := nstest.Engine(t)
	doc, _ := nstest.Apply(t, eng, src)
	startAgent(t, doc)

	stop1, stop2 := make(chan struct{}), make(chan struct{})
	r1 := stream(t, infra, nstest.NSName(infra, vm1), stop1)
	r2 := stream(t, infra, nstest.NSName(infra, vm2), stop2)
	time.Sleep(4 * time.Second)
	both := r1.Rate(2*time.Second, 4*time.Second) + r2.Rate(2*time.Second, 4*time.Second)
	t.Logf("two VMs of a 100 Mbit pool on two uplinks: %.1f Mbit/s together", both/1e6)
	if both > 1.05*limit || both < 0.85*limit {
		t.Errorf("together %.1f Mbit/s under a 100 Mbit team-wide limit, want 85-105", both/1e6)
	}
	close(stop2)
	time.Sleep(4 * time.Second)
	alone := r1.Rate(r1.Since()-2*time.Second, r1.Since())
	close(stop1)
	t.Logf("then %s alone: %.1f Mbit/s", vm1, alone/1e6)
	if alone < 0.85*limit || alone > 1.05*limit {
		t.Errorf("alone %.1f Mbit/s, want most of the 100 Mbit limit and no more", alone/1e6)
	}
}

// fdbPort is the physical switch port its bridge has learned a MAC on, or "".
func fdbPort(t *testing.T, infra, mac string) string {
	t.Helper()
	port := ""
	if err := nstest.Do(t, nstest.NSName(infra, plan.PhysSwitch), func() error {
		neighs, err := netlink.NeighList(0, unix.AF_BRIDGE) // the whole namespace: bridge fdb show
		if err != nil {
			return err
		}
		for _, n := range neighs {
			if strings.EqualFold(n.HardwareAddr.String(), mac) {
				if l, err := netlink.LinkByIndex(n.LinkIndex); err == nil {
					port = l.Attrs().Name
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return port
}

// After a move the physical switch learns the port's MAC on its new uplink
// at once, from the agent's announcement: the VM itself sends nothing.
// With notify off it does not, which shows where the learning comes from.
func TestNotifyTeachesThePhysicalSwitch(t *testing.T) {
	for _, notify := range []bool{true, false} {
		t.Run(fmt.Sprintf("notify %v", notify), func(t *testing.T) {
			const infra = "itnote"
			src, vm1, _, uplink := labWithTwinVMs(t, infra)
			src = strings.Replace(src, "teaming: {policy: loadbased,", fmt.Sprintf("teaming: {notify: %v, policy: loadbased,", notify), 1)
			eng := nstest.Engine(t)
			doc, _ := nstest.Apply(t, eng, src)
			startAgent(t, doc)
			// One connection attempt, so that the switch knows the VM at all;
			// then quiet: no IPv6, whose neighbour discovery and MLD reports
			// after a link comes up would teach the switch too.
			if err := nstest.Do(t, nstest.NSName(infra, vm1), func() error {
				if c, err := net.DialTimeout("tcp", peerIP+":9", time.Second); err == nil {
					c.Close()
				}
				return os.WriteFile("/proc/sys/net/ipv6/conf/eth0/disable_ipv6", []byte("1"), 0o644)
			}); err != nil {
				t.Fatal(err)
			}
			var mac string
			observed, err := eng.DP.Observe(infra, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range observed {
				if r.Kind == plan.KindVeth && r.A.NS == nstest.NSName(infra, vm1) {
					mac = r.A.MAC
				}
			}
			if got := fdbPort(t, infra, mac); got != physPort(t, eng, infra, "esx1", nicOf(uplink)) {
				t.Fatalf("the physical switch has %s on %q, not on %s's port", mac, got, uplink)
			}
			setLink(t, nstest.NSName(infra, "esx1"), nicOf(uplink), false)
			want := physPort(t, eng, infra, "esx1", nicOf(other(uplink)))
			deadline := time.Now().Add(time.Second)
			for fdbPort(t, infra, mac) != want && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			learned := fdbPort(t, infra, mac) == want
			if learned != notify {
				t.Errorf("notify %v: a second after the move the physical switch has %s on %q (new uplink's port: %s)", notify, mac, fdbPort(t, infra, mac), want)
			}
		})
	}
}
