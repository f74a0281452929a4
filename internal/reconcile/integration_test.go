package reconcile_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/netperf"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
)

// twoHosts has VMs on two hosts across the physical switch, a native host,
// a private segment and host ports. Rates are low so that shaping, not this
// machine's CPU, sets the pace.
func twoHosts(name string) string {
	return fmt.Sprintf(`
name: %s
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 100Mbit}, {name: vmnic1, speed: 1Gbit}]
  - name: esx2
    nics: [{name: vmnic0, speed: 100Mbit}, {name: vmnic1, speed: 1Gbit}]
  - name: client
    native: true
    nics: [{name: eth0, speed: 100Mbit, ip: 192.168.50.100/24}]
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {esx1: vmnic0, esx2: vmnic0}}]
    portgroups: [{name: pg-vm}]
  - name: dvs1
    uplinks: [{name: up2, nics: {esx1: vmnic1, esx2: vmnic1}}]
    portgroups: [{name: pg-vmotion}]
  - name: priv
    hosts: [esx1]
    portgroups: [{name: pg-private}]
vms:
  - name: web1
    host: esx1
    cpus: 1
    nics:
      - {portgroup: pg-vm, ip: 192.168.50.11/24}
      - {portgroup: pg-private, ip: 10.0.0.1/24, offloads: {gro: true}}
  - name: db1
    host: esx1
    nics: [{portgroup: pg-private, ip: 10.0.0.2/24}]
  - name: web2
    host: esx2
    nics: [{portgroup: pg-vm, ip: 192.168.50.12/24}]
hostports:
  - {host: esx1, portgroup: pg-vmotion, ip: 192.168.60.1/24}
  - {host: esx2, portgroup: pg-vmotion, ip: 192.168.60.2/24}
`, name)
}

const extraVM = `
  - name: web3
    host: esx2
    nics: [{portgroup: pg-vm, ip: 192.168.50.13/24}]
`

// withExtraVM inserts web3 at the end of the vms list.
func withExtraVM(src string) string {
	return strings.Replace(src, "hostports:", strings.TrimPrefix(extraVM, "\n")+"hostports:", 1)
}

func ns(infra, node string) string { return plan.NSName(infra, node) }

// roundTrip sends a message over TCP from one namespace to a listener in another.
func roundTrip(t *testing.T, fromNS, toNS, ip string) error {
	t.Helper()
	l := nstest.Listen(t, toNS, ip+":0")
	go func() {
		c, err := l.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	// Generous: the round trip takes a millisecond; the deadline is only
	// for a failure, and a loaded machine may be slow to say it.
	c, err := nstest.Dial(t, fromNS, l.Addr().String(), net.Dialer{Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	return err
}

func TestApplyConnectsVMsAcrossHosts(t *testing.T) {
	eng := nstest.Engine(t)
	nstest.Apply(t, eng, twoHosts(nstest.Infra("itconn")))
	cases := []struct{ from, to, ip string }{
		{"web1", "web2", "192.168.50.12"},    // VM to VM across the physical switch
		{"web2", "client", "192.168.50.100"}, // VM to native host
		{"client", "web1", "192.168.50.11"},
		{"db1", "web1", "10.0.0.1"},      // private segment inside esx1
		{"esx1", "esx2", "192.168.60.2"}, // host ports
	}
	for _, c := range cases {
		if err := roundTrip(t, ns(nstest.Infra("itconn"), c.from), ns(nstest.Infra("itconn"), c.to), c.ip); err != nil {
			t.Errorf("%s -> %s (%s): %v", c.from, c.to, c.ip, err)
		}
	}
}

// The lab's bridges skip br_netfilter's firewall hooks in vnet's own
// namespaces, and only there.
func TestSwitchesSkipFirewallHooks(t *testing.T) {
	const hook = "/proc/sys/net/bridge/bridge-nf-call-iptables"
	rootBefore, err := os.ReadFile(hook)
	if err != nil {
		t.Skipf("SKIPPED: no br_netfilter on this kernel (%v): bridges call no firewall hooks to turn off", err)
	}
	eng := nstest.Engine(t)
	nstest.Apply(t, eng, twoHosts("itl2"))
	for _, node := range []string{"esx1", "esx2", plan.PhysSwitch, "web1", "client"} {
		var got []byte
		if err := nstest.Do(t, ns("itl2", node), func() (err error) { got, err = os.ReadFile(hook); return err }); err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(got)) != "0" {
			t.Errorf("%s: bridge-nf-call-iptables = %s, want 0", node, got)
		}
	}
	if rootAfter, _ := os.ReadFile(hook); string(rootAfter) != string(rootBefore) {
		t.Errorf("the root namespace's bridge-nf-call-iptables changed: %s -> %s", rootBefore, rootAfter)
	}
}

// web1's eth1 asks for GRO: its port cuts what it forwards to MTU-sized
// frames and the vNIC's NAPI coalesces them. The veth counts frames in its
// NAPI queues only; without the port's segmenting they would all bypass it.
func TestVNICGROCoalescesWhatItsPortSegments(t *testing.T) {
	eng := nstest.Engine(t)
	nstest.Apply(t, eng, twoHosts(nstest.Infra("itgro")))
	web1 := ns(nstest.Infra("itgro"), "web1")
	// On a busy machine a whole stream now and then arrives unsegmented,
	// past the vNIC's NAPI (seen only in full suite runs, never alone; not
	// yet explained): up to three streams, and one must show the path.
	var tries []string
	for try := 1; try <= 3; try++ {
		before, stackBefore := napiPackets(t, web1, "eth1"), received(t, web1, "eth1").Stack.Packets
		stream20MiB(t, ns(nstest.Infra("itgro"), "db1"), web1)
		// 20 MiB is 14000-odd MTU-sized frames.
		frames := napiPackets(t, web1, "eth1") - before
		// What netperf reports as the packets delivered to the VM: GRO's
		// coalesced packets, as S1 counts LRO's, not the frames.
		got := received(t, web1, "eth1").Stack.Packets - stackBefore
		if frames >= 10000 && got <= frames/2 {
			break
		}
		tries = append(tries, fmt.Sprintf("web1's eth1 took %d frames through GRO and its IP stack %d packets for 20 MiB", frames, got))
		t.Logf("try %d: %s", try, tries[len(tries)-1])
	}
	if len(tries) == 3 {
		t.Errorf("want each MTU-sized frame through GRO and the stack taking at most half as many packets: %s", strings.Join(tries, "; "))
	}
	if on := features(t, ns(nstest.Infra("itgro"), "esx1"), plan.VNICPortName(nstest.Infra("itgro"), "web1", 1))["tx-tcp-segmentation"]; on {
		t.Error("web1's eth1 port still has TSO on")
	}

	// Taken out of the spec, the setting goes: the vNIC and its port are
	// plain veths again, and a second apply has nothing left to do.
	doc, res := nstest.Apply(t, eng, strings.Replace(twoHosts(nstest.Infra("itgro")), ", offloads: {gro: true}", "", 1))
	if res.Plan.Empty() {
		t.Error("dropping gro from the spec planned nothing")
	}
	if features(t, web1, "eth1")["rx-gro"] {
		t.Error("web1's eth1 still has GRO on")
	}
	if !features(t, ns(nstest.Infra("itgro"), "esx1"), plan.VNICPortName(nstest.Infra("itgro"), "web1", 1))["tx-tcp-segmentation"] {
		t.Error("web1's eth1 port still has TSO off")
	}
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Errorf("second apply would change: %v\n%s", err, p)
	}
	// Without GRO the stack takes each frame as it came.
	a := received(t, web1, "eth1")
	stream20MiB(t, ns(nstest.Infra("itgro"), "db1"), web1)
	b := received(t, web1, "eth1")
	if frames, got := b.RxPackets-a.RxPackets, b.Stack.Packets-a.Stack.Packets; got < frames*9/10 {
		t.Errorf("without GRO web1's IP stack took %d packets for %d frames, want one each", got, frames)
	}
}

func stream20MiB(t *testing.T, from, to string) {
	t.Helper()
	stop := make(chan struct{})
	r := nstest.Stream(t, from, to, "10.0.0.1:0", stop)
	// The private segment is not shaped, so even a slow machine takes
	// well under a second; the timeout only says when to give up.
	arrived := r.WaitFor(20<<20, time.Minute)
	close(stop)
	if !arrived {
		t.Fatalf("under 20 MiB from %s to %s in a minute", from, to)
	}
}

// received is what netperf reads at a receiver: the interface's counters
// and its namespace's IP stack's.
func received(t *testing.T, namespace, link string) netperf.IfaceCounters {
	t.Helper()
	var c netperf.IfaceCounters
	if err := nstest.Do(t, namespace, func() (err error) {
		c, err = netperf.ReadIface(link)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if c.Stack == nil {
		t.Fatalf("%s: the IP stack's counters could not be read", namespace)
	}
	return c
}

// napiPackets sums a veth's per-queue NAPI receive counters.
func napiPackets(t *testing.T, namespace, link string) uint64 {
	t.Helper()
	var n uint64
	if err := nstest.Do(t, namespace, func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		stats, err := e.Stats(link)
		for k, v := range stats {
			if strings.HasPrefix(k, "rx_queue_") && strings.HasSuffix(k, "_xdp_packets") {
				n += v
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func features(t *testing.T, namespace, link string) map[string]bool {
	t.Helper()
	var f map[string]bool
	if err := nstest.Do(t, namespace, func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		f, err = e.Features(link)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return f
}

// A namespace or bridge setting changed behind vnet's back (or started at
// the kernel's default by a module loaded later, as br_netfilter's are) is
// a change in place in the next full plan, not a new namespace or bridge, and
// that apply puts it back.
func TestNamespaceSettingsDriftIsRepaired(t *testing.T) {
	eng := nstest.Engine(t)
	eng.Full = true // drift is repaired by a full apply (see TestDriftOutsideTheScopeWaitsForAFullApply)
	doc, _ := nstest.Apply(t, eng, twoHosts(nstest.Infra("itsys")))
	esx1 := ns(nstest.Infra("itsys"), "esx1")
	const rpFilter = "net/ipv4/conf/dvs0/rp_filter"
	write := func(key, val string) error { return os.WriteFile("/proc/sys/"+key, []byte(val), 0o644) }
	drifted := []string{"net/ipv4/conf/all/arp_ignore", rpFilter}
	if err := nstest.Do(t, esx1, func() error {
		if err := write("net/bridge/bridge-nf-call-iptables", "1"); err == nil {
			drifted = append(drifted, "net/bridge/bridge-nf-call-iptables")
		}
		if err := write(rpFilter, "0"); err != nil {
			return err
		}
		return write("net/ipv4/conf/all/arp_ignore", "0")
	}); err != nil {
		t.Fatal(err)
	}
	p, err := eng.Plan(doc)
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, a := range p.Actions {
		if a.Op == plan.OpModify {
			changed = append(changed, a.New.Key())
		}
	}
	if want := []string{"netns/" + esx1, "link/" + esx1 + "/dvs0"}; len(p.Actions) != 2 || !sameSet(changed, want) {
		t.Fatalf("after %v drifted in %s, want changes to %v, got:\n%s", drifted, esx1, want, p)
	}
	t.Logf("plan: %s", p)

	// An apply that fails after the repair puts the drifted value back too:
	// the host is left exactly as it was found.
	bigger, err := spec.Load("bigger", []byte(withExtraVM(twoHosts(nstest.Infra("itsys")))))
	if err != nil {
		t.Fatal(err)
	}
	eng.FailBefore = func(i int, a plan.Action) error {
		if a.Subject().Kind == plan.KindAddr {
			return errInjected
		}
		return nil
	}
	if _, err := eng.Apply(bigger); !errors.Is(err, reconcile.ErrRolledBack) {
		t.Fatalf("injected failure: %v", err)
	}
	eng.FailBefore = nil
	if got := readSysctl(t, esx1, "net/ipv4/conf/all/arp_ignore"); got != "0" {
		t.Errorf("after the rollback arp_ignore = %s, want the 0 found before", got)
	}
	if got := readSysctl(t, esx1, rpFilter); got != "0" {
		t.Errorf("after the rollback %s = %s, want the 0 found before", rpFilter, got)
	}

	nstest.Apply(t, eng, twoHosts(nstest.Infra("itsys")))
	for _, s := range plan.NamespaceSysctls {
		var got []byte
		if err := nstest.Do(t, esx1, func() (err error) { got, err = os.ReadFile("/proc/sys/" + s.Key); return err }); err != nil {
			if s.Optional {
				continue
			}
			t.Fatal(err)
		}
		if strings.TrimSpace(string(got)) != s.Value {
			t.Errorf("%s = %s after apply, want %s", s.Key, got, s.Value)
		}
	}
	if got := readSysctl(t, esx1, rpFilter); got != "1" {
		t.Errorf("%s = %s after apply, want 1", rpFilter, got)
	}
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Errorf("second apply would change: %v\n%s", err, p)
	}
}

func readSysctl(t *testing.T, namespace, key string) string {
	t.Helper()
	var b []byte
	if err := nstest.Do(t, namespace, func() (err error) { b, err = os.ReadFile("/proc/sys/" + key); return err }); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestPrivateSegmentIsIsolated(t *testing.T) {
	eng := nstest.Engine(t)
	nstest.Apply(t, eng, twoHosts(nstest.Infra("itpriv"))+`
  - {host: esx1, portgroup: pg-private, ip: 10.0.0.9/24}
`)
	// web2 gets an address on the private subnet too, through the uplink
	// port group: if the segment leaked to the uplink, it would answer.
	l := nstest.Listen(t, ns(nstest.Infra("itpriv"), "web1"), "10.0.0.1:0")
	_ = l
	_, err := nstest.Dial(t, ns(nstest.Infra("itpriv"), "web2"), l.Addr().String(), net.Dialer{Timeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("web2 reached web1's private address")
	}
	if err := roundTrip(t, ns(nstest.Infra("itpriv"), "esx1"), ns(nstest.Infra("itpriv"), "db1"), "10.0.0.2"); err != nil {
		t.Errorf("host port on the private segment cannot reach db1: %v", err)
	}
}

func TestSecondApplyChangesNothing(t *testing.T) {
	eng := nstest.Engine(t)
	nstest.Apply(t, eng, twoHosts(nstest.Infra("itidem")))
	before := nstest.Ifindexes(t, nstest.Infra("itidem"))
	_, res := nstest.Apply(t, eng, twoHosts(nstest.Infra("itidem")))
	if !res.Plan.Empty() {
		t.Fatalf("second apply planned:\n%s", res.Plan)
	}
	if after := nstest.Ifindexes(t, nstest.Infra("itidem")); !mapsEqual(before, after) {
		t.Errorf("ifindexes changed: %v -> %v", before, after)
	}
}

// Bridges and bridge ports carry no address, so vnet makes them without an
// IPv6 link-local one (the kernel's addrconf work for each grew with the
// links in a host's namespace); links with addresses keep theirs: a VM's
// vNIC, a native host's NIC, a host port.
func TestOnlyAddressedLinksGetLinkLocal(t *testing.T) {
	infra := nstest.Infra("itll")
	eng := nstest.Engine(t)
	nstest.Apply(t, eng, twoHosts(infra))
	for _, node := range []string{"esx1", plan.PhysSwitch, "web1", "client"} {
		nstest.InNS(t, ns(infra, node), func(h *netlink.Handle) error {
			links, err := h.LinkList()
			if err != nil {
				return err
			}
			addrs, err := h.AddrList(nil, netlink.FAMILY_V6)
			if err != nil {
				return err
			}
			withLL := map[int]bool{}
			for _, a := range addrs {
				if a.IP.IsLinkLocalUnicast() {
					withLL[a.LinkIndex] = true
				}
			}
			for _, l := range links {
				a := l.Attrs()
				if a.Name == "lo" {
					continue
				}
				want := a.MasterIndex == 0 && l.Type() != "bridge"
				if withLL[a.Index] != want {
					t.Errorf("%s: %s (%s, master %d) has a link-local address: %v, want %v",
						node, a.Name, l.Type(), a.MasterIndex, withLL[a.Index], want)
				}
			}
			return nil
		})
	}
	if _, res := nstest.Apply(t, eng, twoHosts(infra)); !res.Plan.Empty() {
		t.Errorf("second apply planned:\n%s", res.Plan)
	}
}

func TestAddingAVMRecreatesNothingElse(t *testing.T) {
	eng := nstest.Engine(t)
	src := twoHosts(nstest.Infra("itincr"))
	nstest.Apply(t, eng, src)
	before := nstest.Ifindexes(t, nstest.Infra("itincr"))
	_, res := nstest.Apply(t, eng, withExtraVM(src))
	for _, a := range res.Plan.Actions {
		if a.Op != plan.OpCreate || !strings.Contains(a.Subject().Owner, "web3") {
			t.Errorf("unexpected action %s", a)
		}
	}
	after := nstest.Ifindexes(t, nstest.Infra("itincr"))
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: ifindex %d -> %d", k, v, after[k])
		}
	}
	if err := roundTrip(t, ns(nstest.Infra("itincr"), "web1"), ns(nstest.Infra("itincr"), "web3"), "192.168.50.13"); err != nil {
		t.Errorf("new VM unreachable: %v", err)
	}
	// Moving a vNIC to another port group happens in place.
	moved := strings.Replace(withExtraVM(src), "{portgroup: pg-vm, ip: 192.168.50.13/24}", "{portgroup: pg-vmotion, ip: 192.168.60.13/24}", 1)
	_, res = nstest.Apply(t, eng, moved)
	if err := roundTrip(t, ns(nstest.Infra("itincr"), "web3"), ns(nstest.Infra("itincr"), "esx1"), "192.168.60.1"); err != nil {
		t.Errorf("moved vNIC cannot reach the vMotion network: %v", err)
	}
	if got := nstest.Ifindexes(t, nstest.Infra("itincr"))[ns(nstest.Infra("itincr"), "web3")+"/eth0"]; got != after[ns(nstest.Infra("itincr"), "web3")+"/eth0"] {
		t.Errorf("moving a vNIC recreated it:\n%s", res.Plan)
	}
}

// A line's shaper holds in both directions: never above the line, and as
// much as this machine carries through a bare path shaped the same way
// (what it carries is the machine's business: a 100 Mbit shaper may carry
// 40 on a host whose qdisc timers run late).
func TestLineRateHoldsBothWays(t *testing.T) {
	eng := nstest.Engine(t)
	infra := nstest.Infra("itrate")
	nstest.Apply(t, eng, twoHosts(infra))
	const line = 100e6
	for _, dir := range []struct{ from, to, ip string }{
		{"web2", "client", "192.168.50.100"}, // esx2 vmnic0 transmit, client receive
		{"client", "web2", "192.168.50.12"},
	} {
		what := fmt.Sprintf("%s -> %s over a 100 Mbit line", dir.from, dir.to)
		got, _ := nstest.CarriesAsMuch(t, line, 0.8, what, func() float64 {
			return nstest.Goodput(t, ns(infra, dir.from), ns(infra, dir.to), dir.ip, 2*time.Second)
		})
		if got > line*1.03 {
			t.Errorf("%s: %.1f Mbit/s, above the line", what, got/1e6)
		}
	}
}

func TestTwoInfrasSideBySide(t *testing.T) {
	eng := nstest.Engine(t)
	nstest.Apply(t, eng, twoHosts(nstest.Infra("itsidea")))
	nstest.Apply(t, eng, twoHosts(nstest.Infra("itsideb"))) // same node names and addresses
	b := nstest.Snapshot(t, nstest.Infra("itsideb"))
	if _, err := eng.Destroy(nstest.Infra("itsidea")); err != nil {
		t.Fatal(err)
	}
	nstest.AssertGone(t, nstest.Infra("itsidea"))
	if after := nstest.Snapshot(t, nstest.Infra("itsideb")); !slices.Equal(b, after) {
		t.Errorf("destroying one infra changed the other:\n%s", diffLines(b, after))
	}
	if err := roundTrip(t, ns(nstest.Infra("itsideb"), "web1"), ns(nstest.Infra("itsideb"), "web2"), "192.168.50.12"); err != nil {
		t.Errorf("surviving infra broken: %v", err)
	}
}

func TestDestroyLeavesNothing(t *testing.T) {
	eng := nstest.Engine(t)
	nstest.Apply(t, eng, twoHosts(nstest.Infra("itdestroy")))
	// A process left running in a VM must not keep its namespace alive.
	if _, err := eng.Destroy(nstest.Infra("itdestroy")); err != nil {
		t.Fatal(err)
	}
	nstest.AssertGone(t, nstest.Infra("itdestroy"))
	if s := nstest.Snapshot(t, nstest.Infra("itdestroy")); len(s) != 0 {
		t.Errorf("left behind: %v", s)
	}
}

var errInjected = errors.New("injected failure")

// A failure at any step of an apply leaves the host as it was, for a first
// apply and for an incremental one.
func TestRollbackAtEveryStep(t *testing.T) {
	eng := nstest.Engine(t)
	base := twoHosts(nstest.Infra("itroll"))
	changed := withExtraVM(strings.NewReplacer(
		"speed: 100Mbit}, {name: vmnic1", "speed: 200Mbit}, {name: vmnic1", // a rate change
		"{portgroup: pg-private, ip: 10.0.0.2/24}", "{portgroup: pg-vm, ip: 192.168.50.20/24}", // a move
	).Replace(base))
	changed = strings.Replace(changed, "  - {host: esx2, portgroup: pg-vmotion, ip: 192.168.60.2/24}\n", "", 1) // a delete
	withIOC := strings.Replace(base, "    portgroups: [{name: pg-vm}]", `    ioc: {enabled: true, pools: {vm: {shares: high}, backup: {shares: low, limit: 50Mbit}}}
    portgroups:
      - name: pg-vm
        pool: vm
        classify: [{proto: tcp, dport: 2049, pool: nfs}]
        shaping: {egress: {average: 50Mbit, peak: 80Mbit, burst: 100KiB}, ingress: {average: 60Mbit, burst: 64KiB}}`, 1)
	// A third NIC per host teamed with the first: steering programs appear
	// and the first uplink becomes an isolated bridge port.
	withTeam := strings.NewReplacer(
		"{name: vmnic1, speed: 1Gbit}]", "{name: vmnic1, speed: 1Gbit}, {name: vmnic2, speed: 100Mbit}]",
		"uplinks: [{name: up1, nics: {esx1: vmnic0, esx2: vmnic0}}]", "uplinks: [{name: up1, nics: {esx1: vmnic0, esx2: vmnic0}}, {name: up3, nics: {esx1: vmnic2, esx2: vmnic2}}]",
	).Replace(base)
	// A vNIC renamed behind vnet's back (its port's alias names it as it
	// now is, so that the state before is one vnet could have made).
	renamed := func(t *testing.T) {
		renameLink(t, ns(nstest.Infra("itroll"), "web1"), "eth0", "foo")
		setLinkAlias(t, ns(nstest.Infra("itroll"), "esx1"), plan.VNICPortName(nstest.Infra("itroll"), "web1", 0), plan.AliasPrefix+"peer="+ns(nstest.Infra("itroll"), "web1")+"/foo")
	}
	// Changes of VMs only: the apply reads and plans only what they touch.
	oneVMAdded := withExtraVM(base)
	oneVMReaddressed := strings.Replace(base, "{portgroup: pg-vm, ip: 192.168.50.12/24}", "{portgroup: pg-vm, ip: 192.168.50.22/24}", 1)
	// A load balancer on a port group: programs on its VMs' ports.
	withLB := strings.Replace(base, "    portgroups: [{name: pg-vm}]", `    portgroups:
      - name: pg-vm
        loadBalancers: [{name: web, vip: 192.168.50.200, listeners: [{protocol: tcp, port: 80}], backends: [{vm: web1}]}]`, 1)
	for _, tc := range []struct {
		name, from, to string
		drift          func(t *testing.T)
		full           bool // repairing drift needs a full apply
	}{{"first apply", "", base, nil, false}, {"incremental", base, changed, nil, false}, {"network I/O control", base, withIOC, nil, false},
		{"teaming", base, withTeam, nil, false}, {"renamed vNIC", base, base, renamed, true}, {"scoped: one VM added", base, oneVMAdded, nil, false},
		{"scoped: one VM's address", base, oneVMReaddressed, nil, false}, {"scoped: one VM removed", oneVMAdded, base, nil, false},
		{"load balancer", base, withLB, nil, false}} {
		t.Run(tc.name, func(t *testing.T) {
			eng.Full = tc.full
			defer func() { eng.Full = false }()
			if tc.from != "" {
				nstest.Apply(t, eng, tc.from)
			}
			if tc.drift != nil {
				tc.drift(t)
			}
			toDoc, err := spec.Load("to.yaml", []byte(tc.to))
			if err != nil {
				t.Fatal(err)
			}
			p, err := eng.Plan(toDoc)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Actions) == 0 {
				t.Fatal("nothing to roll back")
			}
			want := nstest.Snapshot(t, nstest.Infra("itroll"))
			for step := range p.Actions {
				eng.FailBefore = func(i int, _ plan.Action) error {
					if i == step {
						return errInjected
					}
					return nil
				}
				_, err := eng.Apply(toDoc)
				eng.FailBefore = nil
				if !errors.Is(err, errInjected) || !errors.Is(err, reconcile.ErrRolledBack) {
					t.Fatalf("step %d: error %v", step, err)
				}
				if got := nstest.Snapshot(t, nstest.Infra("itroll")); !slices.Equal(want, got) {
					t.Fatalf("step %d (%s): host changed:\n%s", step, p.Actions[step], diffLines(want, got))
				}
			}
			t.Logf("%d steps, each rolled back", len(p.Actions))
			if tc.from != "" {
				if _, err := eng.Destroy(nstest.Infra("itroll")); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func diffLines(a, b []string) string {
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// Every study testbed in examples/ applies, converges, and goes away.
func TestExamplesApply(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	networks, _ := filepath.Glob("../../examples/networks/*.yaml")
	files = append(files, networks...)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			eng := nstest.Engine(t)
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// Under this run's own name: a user's or the lab's infra of
			// the example's name may be up on this host.
			src, _ := nstest.Rename(t, string(b))
			doc, err := spec.Load(f, []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := eng.Apply(doc); err != nil {
				t.Fatal(err)
			}
			if p, err := eng.Plan(doc); err != nil || !p.Empty() {
				t.Errorf("not converged after apply: %v\n%s", err, p)
			}
		})
	}
}

// Each address is answered on its own interface: a native host with two
// NICs on one physical switch receives traffic for each NIC's address on
// that NIC, and a hypervisor's host port is reached through its port, not
// through the bridge (Linux answers ARP for any local address on any
// interface unless told otherwise).
func TestEachAddressArrivesOnItsOwnInterface(t *testing.T) {
	eng := nstest.Engine(t)
	nstest.Apply(t, eng, `
name: `+nstest.Infra("itarp")+`
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
  - name: client
    native: true
    nics:
      - {name: eth0, speed: 1Gbit, ip: 10.61.0.100/24}
      - {name: eth1, speed: 1Gbit, ip: 10.61.1.100/24}
switches:
  - {name: sw0, uplinks: [{name: u1, nics: {esx1: vmnic0}}], portgroups: [{name: pg}]}
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg, ip: 10.61.1.1/24}]}
hostports:
  - {host: esx1, portgroup: pg, ip: 10.61.1.50/24}
`)
	rx := func(node, link string) uint64 {
		t.Helper()
		var n uint64
		nstest.Do(t, ns(nstest.Infra("itarp"), node), func() error {
			l, err := netlink.LinkByName(link)
			if err == nil {
				n = l.Attrs().Statistics.RxBytes
			}
			return err
		})
		return n
	}
	for _, c := range []struct{ to, ip, link, bypass string }{
		{"client", "10.61.1.100", "eth1", "eth0"}, // vm1 is on eth1's subnet only
		{"esx1", "10.61.1.50", "vmk0", "sw0"},     // not through the bridge device
	} {
		before, other := rx(c.to, c.link), rx(c.to, c.bypass)
		stop := make(chan struct{})
		r := nstest.Stream(t, ns(nstest.Infra("itarp"), "vm1"), ns(nstest.Infra("itarp"), c.to), c.ip+":0", stop)
		arrived := r.WaitFor(16<<20, time.Minute) // however slowly this machine shapes
		close(stop)
		if !arrived {
			t.Errorf("to %s: under 16 MiB in a minute", c.ip)
		}
		in, leaked := rx(c.to, c.link)-before, rx(c.to, c.bypass)-other
		t.Logf("to %s: %s received %d bytes, %s %d", c.ip, c.link, in, c.bypass, leaked)
		if in < 10<<20 || leaked > 1<<20 {
			t.Errorf("traffic to %s: %d bytes on %s, %d on %s", c.ip, in, c.link, leaked, c.bypass)
		}
	}
}
