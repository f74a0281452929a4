package teamagent_test

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

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/teamagent"
	"github.com/vnet-project/vnet/internal/teaming"
)

// teamLab has two hosts with two 100 Mbit uplinks each and a peer whose
// 1 Gbit NIC is never the bottleneck. VM names are filled in so that the
// test knows which uplink portid pins them to.
const teamLab = `
name: INFRA
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 100Mbit}, {name: vmnic1, speed: 100Mbit}]
  - name: esx2
    nics: [{name: vmnic0, speed: 100Mbit}, {name: vmnic1, speed: 100Mbit}]
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
	lineRate = 100e6
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
	a := &teamagent.Agent{Infra: doc.Spec.Name, DP: dp, Log: log, Tick: 200 * time.Millisecond,
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
	infra := nstest.Infra("itfail")
	src, vm1, _, uplink := labWithTwinVMs(t, infra)
	eng := nstest.Engine(t)
	doc, _ := nstest.Apply(t, eng, src)
	startAgent(t, doc)
	esx1 := nstest.NSName(infra, "esx1")
	onUplink := func(want string, reason teaming.Reason) func() string {
		return func() string {
			a := assignments(t, eng, infra)[vm1+"/eth0"]
			if a.Uplink == want && (reason == "" || a.Reason == reason) {
				return ""
			}
			return fmt.Sprintf("%s is on %s (%s), want %s %s", vm1, a.Uplink, a.Reason, want, reason)
		}
	}

	stop := make(chan struct{})
	defer close(stop)
	r := stream(t, infra, nstest.NSName(infra, vm1), stop)
	if !r.WaitFor(1<<20, 30*time.Second) {
		t.Fatal("the stream did not start")
	}
	time.Sleep(time.Second)
	before := r.Rate(r.Since()-time.Second, r.Since())
	cut := r.Since()
	setLink(t, esx1, nicOf(uplink), false) // the cable is pulled
	eventually(t, "after the cut", onUplink(other(uplink), teaming.FailedTo))

	// The agent moves the port within its 200 ms tick; TCP's retransmission
	// backs off from 200 ms, so the stream moves again well within 3 s.
	time.Sleep(cut + 4*time.Second - r.Since())
	gap := r.LongestGap(cut, cut+4*time.Second)
	after := r.Rate(cut+3*time.Second, cut+4*time.Second)
	t.Logf("uplink %s cut at %v: %.0f Mbit/s before, longest stall %v, then %.0f Mbit/s", uplink, cut.Round(time.Millisecond), before/1e6, gap, after/1e6)
	if gap > 3*time.Second {
		t.Errorf("traffic stalled for %v after the cut", gap)
	}
	if after < 0.3*before {
		t.Errorf("%.0f Mbit/s after the cut, %.0f before: traffic did not resume on %s", after/1e6, before/1e6, other(uplink))
	}

	setLink(t, esx1, nicOf(uplink), true) // failback: the cable is back
	eventually(t, "after failback", onUplink(uplink, teaming.Pinned))
	if err := r.Err(); err != nil {
		t.Errorf("the TCP connection broke: %v", err)
	}

	// The physical switch's side going away is a cut too.
	phys := nstest.NSName(infra, plan.PhysSwitch)
	peerPort := physPort(t, eng, infra, "esx1", nicOf(uplink))
	setLink(t, phys, peerPort, false)
	eventually(t, "with the switch port down", onUplink(other(uplink), ""))
	setLink(t, phys, peerPort, true)
}

// eventually polls cond, which says what is wrong or "", for up to 10 s:
// the agent acts within a tick or two, and a slow machine only takes
// longer to get there.
func eventually(t *testing.T, when string, cond func() string) {
	t.Helper()
	start := time.Now()
	for {
		wrong := cond()
		if wrong == "" {
			t.Logf("%s: as wanted after %v", when, time.Since(start).Round(10*time.Millisecond))
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("%s, 10 s on: %s", when, wrong)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
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

// LBT moves a port off an uplink busier than its threshold onto one where
// it fits. The threshold is a fraction of the line rate, while what a busy
// uplink carries is this machine's business: the test sets it at three
// quarters of what a bare path shaped to the line carries here.
func TestLBTSpreadsTwoBusyPorts(t *testing.T) {
	infra := nstest.Infra("itlbt")
	src, vm1, vm2, uplink := labWithTwinVMs(t, infra)
	lineCap := nstest.RequireCapacity(t, lineRate, 0.2, "a port busy against its line rate")
	threshold := int(75 * lineCap / lineRate)
	src = strings.Replace(src, "threshold: 75%", fmt.Sprintf("threshold: %d%%", threshold), 1)
	eng := nstest.Engine(t)
	doc, _ := nstest.Apply(t, eng, src)
	startAgent(t, doc)

	stop := make(chan struct{})
	defer close(stop)
	r1 := stream(t, infra, nstest.NSName(infra, vm1), stop)
	r2 := stream(t, infra, nstest.NSName(infra, vm2), stop)
	// Window 2 s and interval 2 s: a move is due after about 2-3 s.
	var a1, a2 teaming.Assignment
	eventually(t, fmt.Sprintf("with the threshold at %d%%", threshold), func() string {
		as := assignments(t, eng, infra)
		a1, a2 = as[vm1+"/eth0"], as[vm2+"/eth0"]
		if a1.Uplink == a2.Uplink {
			return "both busy ports still on " + a1.Uplink
		}
		return ""
	})
	t.Logf("both started on %s; now %s on %s (%s), %s on %s (%s)", uplink, vm1, a1.Uplink, a1.Reason, vm2, a2.Uplink, a2.Reason)
	if a1.Uplink == a2.Uplink {
		t.FailNow()
	}
	if a1.Reason != teaming.Moved && a2.Reason != teaming.Moved {
		t.Errorf("neither port says it was moved by LBT")
	}
	time.Sleep(2500 * time.Millisecond)
	each := []float64{r1.Rate(r1.Since()-2*time.Second, r1.Since()), r2.Rate(r2.Since()-2*time.Second, r2.Since())}
	agg := each[0] + each[1]
	t.Logf("after rebalancing: %.0f + %.0f Mbit/s = %.2fx what one shaped path carries", each[0]/1e6, each[1]/1e6, agg/lineCap)
	for i, r := range each {
		if r > 1.03*lineRate {
			t.Errorf("port %d carried %.0f Mbit/s on a %.0f Mbit uplink", i+1, r/1e6, lineRate/1e6)
		}
	}
	// Both flows end at the peer, whose 1 Gbit NIC must take two uplinks'
	// worth for the spread to show.
	peerCap := nstest.Capacity(t, 1e9)
	if peerCap < 1.5*lineCap {
		t.Logf("SKIPPED the aggregate check: a bare path shaped to 1 Gbit carried %.0f Mbit/s here, under 1.5x the %.0f one uplink's carries: the peer's NIC, not the team, sets the total", peerCap/1e6, lineCap/1e6)
		return
	}
	if agg < 1.5*lineCap {
		t.Errorf("together %.0f Mbit/s after rebalancing, want at least 1.5x the %.0f Mbit/s one shaped path carries", agg/1e6, lineCap/1e6)
	}
}

// A pool's limit holds across the uplinks of a team: two VMs of a limited
// pool on different uplinks make the limit together, not twice it, and one
// alone gets all of it once the agent has moved the split.
func TestTeamWideLimit(t *testing.T) {
	infra := nstest.Infra("itlim")
	const limit = 60e6
	lab := strings.NewReplacer(
		"    teaming: {policy: loadbased, lbt: {threshold: 75%, window: 2s, interval: 2s}}\n    portgroups: [{name: pg-vm}]",
		"    ioc: {enabled: true, pools: {backup: {shares: low, limit: 60Mbit}}}\n    portgroups: [{name: pg-vm, pool: backup}]",
	).Replace(teamLab)
	src, vm1, vm2, _ := pickVMs(t, lab, infra, false)
	if !strings.Contains(src, "limit: 60Mbit") {
		t.Fatal("the lab has no limited pool")
	}
	halfCap, limitCap := nstest.Capacity(t, limit/2), nstest.Capacity(t, limit)
	eng := nstest.Engine(t)
	doc, _ := nstest.Apply(t, eng, src)
	startAgent(t, doc)

	stop1, stop2 := make(chan struct{}), make(chan struct{})
	r1 := stream(t, infra, nstest.NSName(infra, vm1), stop1)
	r2 := stream(t, infra, nstest.NSName(infra, vm2), stop2)
	time.Sleep(4 * time.Second)
	both := r1.Rate(2*time.Second, 4*time.Second) + r2.Rate(2*time.Second, 4*time.Second)
	t.Logf("two VMs of a 60 Mbit pool on two uplinks: %.1f Mbit/s together", both/1e6)
	if both > 1.05*limit {
		t.Errorf("together %.1f Mbit/s under a 60 Mbit team-wide limit", both/1e6)
	}
	// Each uplink starts with half the limit: together they make twice what
	// half carries, or what the whole limit does, if that is less here.
	if want := min(2*halfCap, limitCap); both < 0.8*want {
		t.Errorf("together %.1f Mbit/s, under 80%% of the %.1f Mbit/s bare paths shaped to the limit and its halves carry", both/1e6, want/1e6)
	}
	close(stop2)
	// The agent grows an uplink's part of the limit when the pool is held
	// back there: when it runs at 90% of that part. A machine that cannot
	// carry 90% of it through a shaper never shows the pool held back.
	if halfCap < 0.9*limit/2 {
		close(stop1)
		t.Skipf("SKIPPED the lone VM: a bare path shaped to 30 Mbit carried %.1f Mbit/s, under the 90%% at which the agent sees a pool held back: this machine's qdisc timers run late", halfCap/1e6)
	}
	var alone float64
	eventually(t, vm1+" alone", func() string {
		alone = r1.Rate(r1.Since()-2*time.Second, r1.Since())
		if alone < 0.8*limitCap {
			return fmt.Sprintf("%.1f Mbit/s, under 80%% of the %.1f a bare path shaped to the limit carries", alone/1e6, limitCap/1e6)
		}
		return ""
	})
	close(stop1)
	t.Logf("then %s alone: %.1f Mbit/s", vm1, alone/1e6)
	if alone > 1.05*limit {
		t.Errorf("alone %.1f Mbit/s, above the 60 Mbit limit", alone/1e6)
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
			infra := nstest.Infra("itnote")
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
			// The agent moves the port within a tick or two and announces it
			// at once; 3 s leaves a slow machine room, and without notify
			// nothing would teach the switch in any time.
			deadline := time.Now().Add(3 * time.Second)
			for fdbPort(t, infra, mac) != want && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			learned := fdbPort(t, infra, mac) == want
			if learned != notify {
				t.Errorf("notify %v: 3 s after the cut the physical switch has %s on %q (new uplink's port: %s)", notify, mac, fdbPort(t, infra, mac), want)
			}
		})
	}
}
