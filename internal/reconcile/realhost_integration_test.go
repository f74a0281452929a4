package reconcile_test

import (
	"bytes"
	"encoding/binary"
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

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// realHost is a namespace standing in for a real hypervisor: eth1 (a
// veth whose peer, wire1, stands for the cable; with an address, a route
// and a pfifo_fast root of its own) is its NIC, tap-g1 a TAP that "QEMU" opens, and a second namespace a container.
type realHost struct {
	machine, box string
	dir          string // the devices' records
	eng          *reconcile.Engine
	dp           *dataplane.Linux
}

const guestMAC = "52:54:00:12:34:56"

func newRealHost(t *testing.T) *realHost {
	t.Helper()
	rh := &realHost{machine: nstest.Machine(t, "m"), box: nstest.Machine(t, "box"), dir: t.TempDir()}
	nstest.InNS(t, rh.machine, func(h *netlink.Handle) error {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth1", MTU: 1500}, PeerName: "wire1"}); err != nil {
			return err
		}
		eth1, err := h.LinkByName("eth1")
		if err != nil {
			return err
		}
		addr, _ := netlink.ParseAddr("198.51.100.5/24")
		if err := h.AddrAdd(eth1, addr); err != nil {
			return err
		}
		if err := h.LinkSetUp(eth1); err != nil {
			return err
		}
		_, dst, _ := net.ParseCIDR("203.0.113.0/24")
		if err := h.RouteAdd(&netlink.Route{LinkIndex: eth1.Attrs().Index, Dst: dst, Gw: net.ParseIP("198.51.100.1")}); err != nil {
			return err
		}
		// Not the kernel's default for a veth (noqueue), so a destroy
		// must make it again.
		return h.QdiscReplace(&netlink.GenericQdisc{QdiscType: "pfifo_fast",
			QdiscAttrs: netlink.QdiscAttrs{LinkIndex: eth1.Attrs().Index, Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(0x80, 0)}})
	})
	nstest.AddTap(t, rh.machine, "tap-g1")
	rh.engine(t)
	return rh
}

// engine gives the host a new engine and dataplane, as a restarted agent
// has, on the same store and device records.
func (rh *realHost) engine(t *testing.T) {
	t.Helper()
	var st store.Store
	if rh.eng != nil {
		st = rh.eng.Store
		rh.dp.Close()
	} else {
		bolt, err := store.OpenBolt(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bolt.Close() })
		st = bolt
	}
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	dp.HostNS, dp.DeviceStateDir = rh.machine, rh.dir
	rh.dp = dp
	rh.eng = &reconcile.Engine{DP: dp, Store: st, Host: "hv1", HostNS: rh.machine}
	t.Cleanup(func() { dp.Close() })
}

func (rh *realHost) spec(infra, nic string) string {
	return fmt.Sprintf(`name: %s
hosts:
  - name: hv1
    nics: [%s]
switches:
  - name: dvs0
    mtu: 1400
    uplinks: [{name: up1, nics: {hv1: vmnic0}}]
    portgroups: [{name: pg}]
vms:
  - {name: web1, host: hv1, nics: [{portgroup: pg, ip: 10.20.0.1/24}]}
  - {name: g1, host: hv1, nics: [{portgroup: pg, attach: {tap: tap-g1}, mac: "%s", ip: 10.20.0.9/24}]}
  - {name: box, host: hv1, nics: [{portgroup: pg, attach: {netns: %s}, ip: 10.20.0.2/24}]}
`, infra, nic, guestMAC, rh.box)
}

func (rh *realHost) load(t *testing.T, src string) *spec.Document {
	t.Helper()
	doc, err := spec.Load("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// state is everything a destroy must give back as found.
func (rh *realHost) state(t *testing.T) []string {
	t.Helper()
	out := append(nstest.LinkState(t, rh.machine, "eth1"), nstest.LinkState(t, rh.machine, "tap-g1")...)
	var links []string
	nstest.InNS(t, rh.box, func(h *netlink.Handle) error {
		ls, err := h.LinkList()
		for _, l := range ls {
			links = append(links, "box link "+l.Attrs().Name)
		}
		return err
	})
	return append(out, links...)
}

func TestRealHostDevicesTapAndNetns(t *testing.T) {
	rh := newRealHost(t)
	infra := nstest.Infra("realhost")
	before := rh.state(t)

	// eth1 holds an address of the machine's own: as an uplink it would
	// serve the machine no more, so it is taken only with shared: true.
	_, err := rh.eng.Apply(rh.load(t, rh.spec(infra, "{name: vmnic0, device: eth1, speed: 1Gbit}")))
	if want := "hosts[0].nics[0].device: device eth1 carries this machine's own traffic (the addresses 198.51.100.5/24)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("apply with a device the machine uses: got %v, want %q", err, want)
	}
	if got := rh.state(t); !slices.Equal(got, before) {
		t.Fatalf("a refused apply changed the host:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}

	// Without speed: the device's own, or an error when it reports none.
	// Either way nothing of the host is left changed.
	_, err = rh.eng.Apply(rh.load(t, rh.spec(infra, "{name: vmnic0, device: eth1, shared: true}")))
	switch {
	case err == nil:
		t.Log("eth1 reports a speed; the NIC took it")
		if _, err := rh.eng.Destroy(infra); err != nil {
			t.Fatal(err)
		}
	case !strings.Contains(err.Error(), "hosts[0].nics[0].speed: device eth1 reports no speed"):
		t.Fatalf("apply without a speed: got %v, want the speed error", err)
	}
	if got := rh.state(t); !slices.Equal(got, before) {
		t.Fatalf("the host is not as before:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}

	doc := rh.load(t, rh.spec(infra, "{name: vmnic0, device: eth1, shared: true, speed: 1Gbit, mtu: 1400}"))
	t.Cleanup(func() {
		rh.eng.Destroy(infra)
		nstest.AssertGone(t, infra)
	})
	if _, err := rh.eng.Apply(doc); err != nil {
		t.Fatal(err)
	}
	br := plan.HostBridgeName(infra, "dvs0")
	eth1 := nstest.LinkState(t, rh.machine, "eth1")
	for _, want := range []string{"master " + br + " mtu 1400", "qdisc htb parent root handle 1:", "addr 198.51.100.5/24", "route 203.0.113.0/24 via 198.51.100.1"} {
		if !nstest.Contains(eth1, want) {
			t.Errorf("eth1 after apply lacks %q:\n%s", want, strings.Join(eth1, "\n"))
		}
	}
	if tap := nstest.LinkState(t, rh.machine, "tap-g1"); !nstest.Contains(tap, "master "+br+" mtu 1400") {
		t.Errorf("tap-g1 is not a port of %s:\n%s", br, strings.Join(tap, "\n"))
	}
	if p, err := rh.eng.Plan(doc); err != nil || !p.Empty() {
		t.Fatalf("second plan: %v %v", p, err)
	}

	// The container's vNIC reaches web1 through the switch.
	web1 := plan.NSName(infra, "web1")
	l := nstest.Listen(t, rh.box, "10.20.0.2:7001")
	go func() {
		c, err := l.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	c, err := nstest.Dial(t, web1, "10.20.0.2:7001", net.Dialer{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("web1 -> box over the switch: %v", err)
	}
	echo(t, c, "through the switch")

	// A process on the TAP, as QEMU: its ARP request for web1 is answered.
	tap := nstest.OpenTap(t, rh.machine, "tap-g1")
	mac, _ := net.ParseMAC(guestMAC)
	reply, err := arpExchange(tap, mac, net.ParseIP("10.20.0.9"), net.ParseIP("10.20.0.1"), 5*time.Second)
	if err != nil {
		t.Fatalf("ARP from the TAP to web1: %v", err)
	}
	t.Logf("web1 answered the TAP guest: 10.20.0.1 is at %s", reply)

	// A restarted agent (new dataplane) destroys from the kernel's marks and
	// the device records alone.
	rh.engine(t)
	if _, err := rh.eng.Destroy(infra); err != nil {
		t.Fatal(err)
	}
	if got := rh.state(t); !slices.Equal(got, before) {
		t.Errorf("destroy did not give the devices back as found:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}
	if !nstest.Exists(rh.box) {
		t.Error("destroy deleted the container's namespace")
	}
	if left, _ := filepath.Glob(filepath.Join(rh.dir, "*", "*")); len(left) > 0 {
		t.Errorf("device records left after destroy: %v", left)
	}
}

// An apply that fails at any step gives every device back as found: the
// record written before the first change is what the rollback restores.
func TestRealHostRollbackAtEveryStep(t *testing.T) {
	rh := newRealHost(t)
	infra := nstest.Infra("realhost-rb")
	before := rh.state(t)
	doc := rh.load(t, rh.spec(infra, "{name: vmnic0, device: eth1, shared: true, speed: 1Gbit, mtu: 1400}"))
	t.Cleanup(func() {
		rh.eng.Destroy(infra)
		nstest.AssertGone(t, infra)
	})
	p, err := rh.eng.Plan(doc)
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step < len(p.Actions); step++ {
		rh.eng.FailBefore = func(i int, a plan.Action) error {
			if i == step {
				return errors.New("injected")
			}
			return nil
		}
		_, err := rh.eng.Apply(doc)
		if !errors.Is(err, reconcile.ErrRolledBack) {
			t.Fatalf("step %d (%s): got %v, want a rollback", step, p.Actions[step], err)
		}
		if got := rh.state(t); !slices.Equal(got, before) {
			t.Fatalf("after a failure at step %d (%s):\n%s\nwas\n%s", step, p.Actions[step], strings.Join(got, "\n"), strings.Join(before, "\n"))
		}
	}
}

// A device whose record survives a command killed after its first change
// is given back by the next destroy, even by a dataplane that never saw it.
func TestRealHostRecordBeforeFirstChange(t *testing.T) {
	rh := newRealHost(t)
	infra := nstest.Infra("realhost-kill")
	before := rh.state(t)
	owner := plan.DeviceOwner(infra, "nic hv1/vmnic0")
	// What a killed apply leaves: the device marked and changed, nothing
	// in the store.
	dev := plan.Resource{Kind: plan.KindDevice, NS: rh.machine, Name: "eth1", MTU: 1300, Owner: owner}
	if err := rh.dp.Execute(plan.Action{Op: plan.OpCreate, New: &dev}); err != nil {
		t.Fatal(err)
	}
	lr := plan.Resource{Kind: plan.KindLineRate, NS: rh.machine, Link: "eth1", Rate: 1e9, Burst: plan.ClassBurst(1e9)}
	if err := rh.dp.Execute(plan.Action{Op: plan.OpCreate, New: &lr}); err != nil {
		t.Fatal(err)
	}
	if got := nstest.LinkState(t, rh.machine, "eth1"); !nstest.Contains(got, "mtu 1300") {
		t.Fatalf("eth1 not changed: %v", got)
	}
	rh.engine(t)
	if _, err := rh.eng.Destroy(infra); err != nil {
		t.Fatal(err)
	}
	if got := rh.state(t); !slices.Equal(got, before) {
		t.Errorf("eth1 not given back:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}
	if _, err := os.Stat(filepath.Join(rh.dir, "netns-"+rh.machine, "eth1.json")); !os.IsNotExist(err) {
		t.Errorf("eth1's record: %v, want it removed", err)
	}
}

// A device enslaved to someone else's bridge, and a missing TAP or
// namespace, are refused with the field that names them.
func TestRealHostRefusals(t *testing.T) {
	rh := newRealHost(t)
	infra := nstest.Infra("realhost-no")
	nstest.InNS(t, rh.machine, func(h *netlink.Handle) error {
		if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-other"}}); err != nil {
			return err
		}
		br, _ := h.LinkByName("br-other")
		eth1, _ := h.LinkByName("eth1")
		return h.LinkSetMaster(eth1, br)
	})
	before := rh.state(t)
	src := strings.ReplaceAll(rh.spec(infra, "{name: vmnic0, device: eth1, shared: true, speed: 1Gbit}"), "tap-g1", "tap-none")
	_, err := rh.eng.Apply(rh.load(t, strings.ReplaceAll(src, rh.box, "no-such-ns")))
	for _, want := range []string{
		"hosts[0].nics[0].device: device eth1 is a port of br-other already",
		`vms[1].nics[0].attach.tap: TAP device "tap-none" does not exist on host hv1`,
		`vms[2].nics[0].attach.netns: namespace "no-such-ns" does not exist`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	if got := rh.state(t); !slices.Equal(got, before) {
		t.Errorf("a refused apply changed the host")
	}
	nstest.AssertGone(t, infra)
}

func echo(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo: %q %v", buf, err)
	}
}

// arpExchange writes an ARP request from (mac, ip) for target on the TAP
// and returns the MAC in the reply.
func arpExchange(tap *os.File, mac net.HardwareAddr, ip, target net.IP, timeout time.Duration) (net.HardwareAddr, error) {
	req := make([]byte, 0, 42)
	req = append(req, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	req = append(req, mac...)
	req = binary.BigEndian.AppendUint16(req, 0x0806)
	req = append(req, 0, 1, 8, 0, 6, 4, 0, 1) // Ethernet, IPv4, request
	req = append(req, mac...)
	req = append(req, ip.To4()...)
	req = append(req, 0, 0, 0, 0, 0, 0)
	req = append(req, target.To4()...)
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 2048)
	for time.Now().Before(deadline) {
		if _, err := tap.Write(req); err != nil {
			return nil, fmt.Errorf("write to the TAP: %w", err)
		}
		tap.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		for {
			n, err := tap.Read(buf)
			if err != nil {
				break // resend
			}
			f := buf[:n]
			if n >= 42 && bytes.Equal(f[0:6], mac) && binary.BigEndian.Uint16(f[12:14]) == 0x0806 &&
				binary.BigEndian.Uint16(f[20:22]) == 2 && net.IP(f[28:32]).Equal(target) {
				return net.HardwareAddr(append([]byte(nil), f[22:28]...)), nil
			}
		}
	}
	return nil, errors.New("no ARP reply")
}
