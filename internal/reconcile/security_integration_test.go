package reconcile_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
)

// secLab has four VMs on one host's switch. pg-web takes only HTTPS, DNS
// and ping from pg-app, refuses SSH and syslog by rule, and sends nothing
// it did not answer; pg-app keeps the default port security and also
// rejects IP spoofing; pg-open accepts everything, as a switch without
// port security does.
func secLab(name string) string {
	return fmt.Sprintf(`
name: %s
hosts:
  - {name: esx1}
switches:
  - name: sw0
    hosts: [esx1]
    portgroups:
      - name: pg-web
        acl:
          default: deny
          rules:
            - {action: allow, direction: ingress, proto: tcp, dport: 443, from: {portgroup: pg-app}}
            - {action: allow, direction: ingress, proto: udp, dport: 53, from: {portgroup: pg-app}}
            - {action: allow, direction: ingress, proto: icmp, from: {portgroup: pg-app}}
            - {action: deny, direction: ingress, proto: tcp, dport: 22}
            - {action: deny, direction: ingress, proto: udp, dport: 514}
      - name: pg-app
        security: {ipSpoofing: false}
      - name: pg-open
        security: {promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true}
vms:
  - {name: web, host: esx1, nics: [{portgroup: pg-web, ip: 10.77.0.1/24}]}
  - {name: app, host: esx1, nics: [{portgroup: pg-app, ip: 10.77.0.2/24}]}
  - {name: other, host: esx1, nics: [{portgroup: pg-app, ip: 10.77.0.3/24}]}
  - {name: open, host: esx1, nics: [{portgroup: pg-open, ip: 10.77.0.4/24}]}
`, name)
}

// secInfra is unique per run, so that a run never meets another's leftovers.
func secInfra(prefix string) string { return fmt.Sprintf("%s%d", prefix, os.Getpid()%100000) }

const ethExperimental = 0x88b5 // IEEE local experimental EtherType

func TestPortSecurityDropsForgedFrames(t *testing.T) {
	eng := nstest.Engine(t)
	infra := secInfra("sec")
	doc, _ := nstest.Apply(t, eng, secLab(infra))
	vm := func(n string) string { return nstest.NSName(infra, n) }
	appMAC, otherMAC, openMAC := macOf(t, vm("app")), macOf(t, vm("other")), macOf(t, vm("open"))
	forged := net.HardwareAddr{0x02, 0, 0, 0, 0x99, 0x99}
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	experimental := func(dst, src net.HardwareAddr, marker string) []byte {
		return ethFrame(dst, src, ethExperimental, []byte("#"+marker))
	}
	before := counters(t, infra)

	t.Run("forged source MAC", func(t *testing.T) {
		got := exchange(t, vm("app"), vm("other"), ethExperimental,
			experimental(bcast, forged, "forged"), experimental(bcast, appMAC, "honest"))
		if got["forged"] != 0 || got["honest"] != 1 {
			t.Errorf("other received %v: want the honest frame only", got)
		}
	})

	t.Run("MAC changed in the guest", func(t *testing.T) {
		setMAC(t, vm("app"), forged)
		got := exchange(t, vm("app"), vm("other"), ethExperimental, experimental(bcast, forged, "from-new-mac"))
		toApp := exchange(t, vm("other"), vm("app"), ethExperimental, experimental(forged, otherMAC, "to-new-mac"))
		setMAC(t, vm("app"), appMAC)
		back := exchange(t, vm("other"), vm("app"), ethExperimental, experimental(appMAC, otherMAC, "to-own-mac"))
		if got["from-new-mac"] != 0 {
			t.Error("a frame from the changed MAC got through")
		}
		if toApp["to-new-mac"] != 0 {
			t.Error("the VM received unicast for its changed MAC")
		}
		if back["to-own-mac"] != 1 {
			t.Errorf("with its own MAC back the VM received %v", back)
		}
	})

	t.Run("spoofed IPv4 source", func(t *testing.T) {
		app, other, open := netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.3"), netip.MustParseAddr("10.77.0.4")
		got := udpExchange(t, vm("app"), vm("open"), 9999,
			ethFrame(openMAC, appMAC, 0x0800, ipv4UDP(other, open, 4000, 9999, []byte("spoofed"))),
			ethFrame(openMAC, appMAC, 0x0800, ipv4UDP(app, open, 4000, 9999, []byte("honest"))))
		if got["spoofed"] != 0 || got["honest"] != 1 {
			t.Errorf("open received %v: want the datagram from app's own address only", got)
		}
	})

	t.Run("spoofed IPv4 source inside VLAN tags", func(t *testing.T) {
		app, other, open := netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.3"), netip.MustParseAddr("10.77.0.4")
		tagged := func(tags []uint16, payload []byte) []byte {
			var b []byte
			for i, tpid := range tags {
				if i > 0 {
					b = append(b, byte(tpid>>8), byte(tpid))
				}
				b = append(b, 0, 7) // VLAN 7
			}
			b = append(b, 0x08, 0x00)
			return ethFrame(openMAC, appMAC, tags[0], append(b, payload...))
		}
		got := exchange(t, vm("app"), vm("open"), 0x0003, // every frame
			tagged([]uint16{0x8100}, ipv4UDP(other, open, 4000, 9999, []byte("tagged-spoof"))),
			tagged([]uint16{0x8100}, ipv4UDP(app, open, 4000, 9999, []byte("tagged-honest"))),
			tagged([]uint16{0x88a8, 0x8100}, ipv4UDP(other, open, 4000, 9999, []byte("stacked-spoof"))))
		if got["tagged-spoof"] != 0 || got["stacked-spoof"] != 0 || got["tagged-honest"] != 1 {
			t.Errorf("open received %v: want only the tagged frame from app's own address", got)
		}
	})

	t.Run("gratuitous ARP for another VM's address", func(t *testing.T) {
		app, other := netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.3")
		got := exchange(t, vm("app"), vm("web"), 0x0806,
			arpFrame(appMAC, appMAC, other, "steal"),
			arpFrame(appMAC, otherMAC, app, "fake-sha"),
			arpFrame(appMAC, appMAC, app, "honest"))
		if got["steal"] != 0 || got["fake-sha"] != 0 || got["honest"] != 1 {
			t.Errorf("web received %v: want app's own announcement only", got)
		}
	})

	t.Run("neighbour advertisement for another VM's address", func(t *testing.T) {
		appLL, _ := plan.LinkLocal(appMAC.String())
		otherLL, _ := plan.LinkLocal(otherMAC.String())
		got := exchange(t, vm("app"), vm("web"), 0x86dd,
			neighbourAdvert(appMAC, appLL, otherLL, "steal"), neighbourAdvert(appMAC, appLL, appLL, "honest"))
		if got["steal"] != 0 || got["honest"] != 1 {
			t.Errorf("web received %v: want app's own advertisement only", got)
		}
	})

	t.Run("promiscuous mode rejected", func(t *testing.T) {
		setPromisc(t, vm("other"))
		setPromisc(t, vm("open"))
		unknown := net.HardwareAddr{0x02, 0, 0, 0, 0x77, 0x77} // never seen: the bridge floods it
		frame := experimental(unknown, appMAC, "flooded")
		other := capture(t, vm("other"), ethExperimental)
		open := capture(t, vm("open"), ethExperimental)
		send(t, vm("app"), frame)
		if got := other.stop(); got["flooded"] != 0 {
			t.Error("a promiscuous VM on a port group that rejects promiscuous mode saw unicast for another MAC")
		}
		if got := open.stop(); got["flooded"] != 1 {
			t.Errorf("the VM on pg-open (promiscuous accepted) saw %v; want the flooded frame", got)
		}
	})

	after := counters(t, infra)
	port := func(vmName string) string { return plan.VNICPortName(infra, vmName, 0) }
	for _, c := range []struct{ port, label string }{
		{port("app"), "forged-mac"}, {port("app"), "ip-spoof"}, {port("app"), "arp-spoof"}, {port("app"), "nd-spoof"},
		{port("app"), "not-for-mac"}, {port("other"), "not-for-mac"},
	} {
		if after[c.port][c.label] <= before[c.port][c.label] {
			t.Errorf("%s drops on %s did not count: %d -> %d", c.label, c.port, before[c.port][c.label], after[c.port][c.label])
		}
	}
	if n := after[port("open")]; len(n) != 0 {
		t.Errorf("pg-open accepts everything yet its port has counters %v", n)
	}
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Errorf("after the traffic a plan is not empty (%v):\n%s", err, p)
	}
}

// v6Lab puts VMs with IPv6 addresses, and one with only an IPv4 address,
// on a port group that rejects IP spoofing; sink, on a port group that
// accepts everything, receives what they send. rtr's port group rejects
// IP spoofing but accepts router advertisements.
func v6Lab(name string) string {
	return fmt.Sprintf(`
name: %s
hosts:
  - {name: esx1}
switches:
  - name: sw0
    hosts: [esx1]
    portgroups:
      - name: pg-guarded
        security: {ipSpoofing: false}
      - name: pg-open
        security: {promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true}
      - name: pg-router
        security: {ipSpoofing: false, routerAdvertisements: true}
vms:
  - {name: a6, host: esx1, nics: [{portgroup: pg-guarded, ip: "fd00:77::2/64"}]}
  - {name: rtr, host: esx1, nics: [{portgroup: pg-router, ip: "fd00:77::6/64"}]}
  - {name: b6, host: esx1, nics: [{portgroup: pg-guarded, ip: "fd00:77::3/64"}]}
  - {name: v4, host: esx1, nics: [{portgroup: pg-guarded, ip: 10.78.0.5/24}]}
  - {name: sink, host: esx1, nics: [{portgroup: pg-open, ip: "fd00:77::4/64"}]}
`, name)
}

func TestPortSecurityDropsSpoofedIPv6(t *testing.T) {
	eng := nstest.Engine(t)
	infra := secInfra("sv6")
	doc, _ := nstest.Apply(t, eng, v6Lab(infra))
	vm := func(n string) string { return nstest.NSName(infra, n) }
	port := func(vmName string) string { return plan.VNICPortName(infra, vmName, 0) }
	a6MAC, b6MAC, v4MAC, sinkMAC := macOf(t, vm("a6")), macOf(t, vm("b6")), macOf(t, vm("v4")), macOf(t, vm("sink"))
	ll := func(mac net.HardwareAddr) netip.Addr { a, _ := plan.LinkLocal(mac.String()); return a }
	a6, b6, sink := netip.MustParseAddr("fd00:77::2"), netip.MustParseAddr("fd00:77::3"), netip.MustParseAddr("fd00:77::4")
	waitAddressesSettled(t, vm("sink"))
	toSink := func(from net.HardwareAddr, src, dst netip.Addr, marker string) []byte {
		return ethFrame(sinkMAC, from, 0x86dd, ipv6UDP(src, dst, 4000, 9999, []byte(marker)))
	}

	for _, c := range []struct {
		name   string
		vm     string
		frames [][]byte
		pass   []string
		drop   []string
	}{
		{"global address of its own", "a6", [][]byte{
			toSink(a6MAC, b6, sink, "other-vm"),
			toSink(a6MAC, netip.MustParseAddr("fd00:77::99"), sink, "made-up"),
			toSink(a6MAC, ll(b6MAC), ll(sinkMAC), "other-link-local"),
			toSink(a6MAC, a6, sink, "honest"),
			toSink(a6MAC, ll(a6MAC), ll(sinkMAC), "honest-link-local"),
		}, []string{"honest", "honest-link-local"}, []string{"other-vm", "made-up", "other-link-local"}},
		{"only an IPv4 address", "v4", [][]byte{
			toSink(v4MAC, netip.MustParseAddr("fd00:77::5"), sink, "global"),
			toSink(v4MAC, ll(a6MAC), ll(sinkMAC), "other-link-local"),
			toSink(v4MAC, ll(v4MAC), ll(sinkMAC), "honest-link-local"),
		}, []string{"honest-link-local"}, []string{"global", "other-link-local"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			was := counters(t, infra)[port(c.vm)]["ip-spoof"]
			got := udp6Exchange(t, vm(c.vm), vm("sink"), 9999, c.frames...)
			for _, m := range c.pass {
				if got[m] != 1 {
					t.Errorf("sink received %q %d times, want once (got %v)", m, got[m], got)
				}
			}
			for _, m := range c.drop {
				if got[m] != 0 {
					t.Errorf("sink received the spoofed %q (got %v)", m, got)
				}
			}
			if now := counters(t, infra)[port(c.vm)]["ip-spoof"]; now < was+uint64(len(c.drop)) {
				t.Errorf("ip-spoof on %s counted %d of %d spoofed datagrams", port(c.vm), now-was, len(c.drop))
			}
		})
	}
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Errorf("after the traffic a plan is not empty (%v):\n%s", err, p)
	}
}

// Neighbour discovery claims another VM's MAC only in its link-layer
// options, and routers announce themselves in advertisements: both are
// dropped and counted, and the same messages with the VM's own MAC, or
// from a port group that accepts router advertisements, pass.
func TestPortSecurityGuardsNeighbourDiscovery(t *testing.T) {
	eng := nstest.Engine(t)
	infra := secInfra("snd")
	doc, _ := nstest.Apply(t, eng, v6Lab(infra))
	vm := func(n string) string { return nstest.NSName(infra, n) }
	port := func(vmName string) string { return plan.VNICPortName(infra, vmName, 0) }
	a6MAC, b6MAC, rtrMAC, sinkMAC := macOf(t, vm("a6")), macOf(t, vm("b6")), macOf(t, vm("rtr")), macOf(t, vm("sink"))
	ll := func(mac net.HardwareAddr) netip.Addr { a, _ := plan.LinkLocal(mac.String()); return a }
	a6, sinkLL := ll(a6MAC), ll(sinkMAC)
	allRouters, allNodes := netip.MustParseAddr("ff02::2"), netip.MustParseAddr("ff02::1")
	lla := func(typ byte, mac net.HardwareAddr) []byte { return append([]byte{typ, 1}, mac...) }
	target := func(a netip.Addr) []byte { return append(make([]byte, 4), a.AsSlice()...) } // reserved/flags, target
	na := func(a netip.Addr) []byte { b := target(a); b[0] = 0x20; return b }              // override
	nonce := []byte{14, 1, 1, 2, 3, 4, 5, 6}
	hopByHop := []byte{0, 0, 1, 4, 0, 0, 0, 0} // next header (set by ndFrame), length, PadN

	cases := []struct {
		marker string
		from   string
		frame  []byte
		pass   bool
	}{
		{"ns-honest", "a6", ndFrame(sinkMAC, a6MAC, a6, sinkLL, ndNS, target(sinkLL), lla(1, a6MAC), nil), true},
		{"ns-other-mac", "a6", ndFrame(sinkMAC, a6MAC, a6, sinkLL, ndNS, target(sinkLL), lla(1, b6MAC), nil), false},
		{"ns-two-options", "a6", ndFrame(sinkMAC, a6MAC, a6, sinkLL, ndNS, target(sinkLL), append(lla(1, a6MAC), lla(1, b6MAC)...), nil), false},
		{"ns-ext-header", "a6", ndFrame(sinkMAC, a6MAC, a6, sinkLL, ndNS, target(sinkLL), lla(1, a6MAC), hopByHop), false},
		{"ns-dad-nonce", "a6", ndFrame(sinkMAC, a6MAC, netip.IPv6Unspecified(), sinkLL, ndNS, target(a6), nonce, nil), true},
		{"na-honest", "a6", ndFrame(sinkMAC, a6MAC, a6, allNodes, ndNA, na(a6), lla(2, a6MAC), nil), true},
		{"na-other-mac", "a6", ndFrame(sinkMAC, a6MAC, a6, allNodes, ndNA, na(a6), lla(2, b6MAC), nil), false},
		{"rs-honest", "a6", ndFrame(sinkMAC, a6MAC, a6, allRouters, ndRS, make([]byte, 4), lla(1, a6MAC), nil), true},
		{"rs-other-mac", "a6", ndFrame(sinkMAC, a6MAC, a6, allRouters, ndRS, make([]byte, 4), lla(1, b6MAC), nil), false},
		{"ra-from-vm", "a6", ndFrame(sinkMAC, a6MAC, a6, allNodes, ndRA, make([]byte, 12), lla(1, a6MAC), nil), false},
		{"redirect-from-vm", "a6", ndFrame(sinkMAC, a6MAC, a6, sinkLL, ndRedirect, append(append(make([]byte, 4), a6.AsSlice()...), sinkLL.AsSlice()...), nil, nil), false},
		{"ra-allowed", "rtr", ndFrame(sinkMAC, rtrMAC, ll(rtrMAC), allNodes, ndRA, make([]byte, 12), lla(1, rtrMAC), nil), true},
	}
	before := counters(t, infra)
	for _, c := range cases {
		t.Run(c.marker, func(t *testing.T) {
			// The marker goes in the frame's trailer, after the IPv6
			// packet, so that the message is as long as it says.
			got := exchange(t, vm(c.from), vm("sink"), 0x86dd, append(c.frame, "#"+c.marker...))
			if want := map[bool]int{true: 1, false: 0}[c.pass]; got[c.marker] != want {
				t.Errorf("sink received %q %d times, want %d", c.marker, got[c.marker], want)
			}
		})
	}
	after := counters(t, infra)
	for _, c := range []struct {
		port, label string
		drops       uint64
	}{
		{port("a6"), "nd-spoof", 5}, {port("a6"), "ra-guard", 2}, {port("rtr"), "ra-guard", 0},
	} {
		if got := after[c.port][c.label] - before[c.port][c.label]; got != c.drops {
			t.Errorf("%s on %s counted %d drops, want %d", c.label, c.port, got, c.drops)
		}
	}
	if _, ok := after[port("rtr")]["ra-guard"]; ok {
		t.Error("rtr's port group accepts router advertisements, yet its port has an ra-guard rule")
	}
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Errorf("after the traffic a plan is not empty (%v):\n%s", err, p)
	}
}

// secLab6 is secLab over IPv6: the same VMs and rules, fd00:77::N for
// 10.77.0.N, ICMPv6 for ICMP.
func secLab6(name string) string {
	src := secLab(name)
	for i := 1; i <= 5; i++ {
		src = strings.ReplaceAll(src, fmt.Sprintf("10.77.0.%d/24", i), fmt.Sprintf(`"fd00:77::%d/64"`, i))
	}
	return strings.ReplaceAll(src, "proto: icmp,", "proto: icmpv6,")
}

// The ACL matrix over IPv4 and IPv6: every allowed pair connects (TCP,
// UDP, ICMP or ICMPv6), every denied pair does not, replies to allowed
// connections pass although web sends nothing else, and the rule (or the
// default) that decided counts each attempt.
func TestACLMatrixIsStatefulAndCounted(t *testing.T) {
	for _, fam := range []struct {
		name, infra string
		lab         func(string) string
		addr        func(n int) string
	}{
		{"IPv4", "acl", secLab, func(n int) string { return fmt.Sprintf("10.77.0.%d", n) }},
		{"IPv6", "acl6", secLab6, func(n int) string { return fmt.Sprintf("fd00:77::%d", n) }},
	} {
		t.Run(fam.name, func(t *testing.T) { testACLMatrix(t, secInfra(fam.infra), fam.lab, fam.addr) })
	}
}

func testACLMatrix(t *testing.T, infra string, lab func(string) string, addr func(n int) string) {
	eng := nstest.Engine(t)
	doc, _ := nstest.Apply(t, eng, lab(infra))
	vm := func(n string) string { return nstest.NSName(infra, n) }
	for _, n := range []string{"web", "app", "other", "open"} {
		waitAddressesSettled(t, vm(n))
	}
	web, app := addr(1), addr(2)
	at := func(host, port string) string { return net.JoinHostPort(host, port) }
	for _, port := range []string{"443", "8080", "22"} {
		echoTCP(t, vm("web"), at(web, port))
	}
	echoTCP(t, vm("app"), at(app, "8080"))
	echoUDP(t, vm("web"), at(web, "53"))
	echoUDP(t, vm("web"), at(web, "514"))
	echoUDP(t, vm("web"), at(web, "5000"))
	before := counters(t, infra)

	// counted is the label on web's port that the attempt must make grow:
	// the rule that decided it, or the default.
	cases := []struct {
		name     string
		from, to string
		proto    string // tcp, udp, icmp (ICMPv6 for an IPv6 address)
		addr     string
		want     bool
		counted  string
	}{
		{"app to web https", "app", "web", "tcp", at(web, "443"), true, "acl[0]"},
		{"app to web other port (default deny)", "app", "web", "tcp", at(web, "8080"), false, "acl-default"},
		{"app to web ssh (denied by rule)", "app", "web", "tcp", at(web, "22"), false, "acl[3]"},
		{"open to web https (not in pg-app)", "open", "web", "tcp", at(web, "443"), false, "acl-default"},
		{"web to app (egress default deny: only replies leave)", "web", "app", "tcp", at(app, "8080"), false, "acl-default"},
		{"app to web dns", "app", "web", "udp", at(web, "53"), true, "acl[1]"},
		{"open to web dns", "open", "web", "udp", at(web, "53"), false, "acl-default"},
		{"app to web syslog (denied by rule)", "app", "web", "udp", at(web, "514"), false, "acl[4]"},
		{"app to web other udp port (default deny)", "app", "web", "udp", at(web, "5000"), false, "acl-default"},
		{"app pings web", "app", "web", "icmp", web, true, "acl[2]"},
		{"open pings web", "open", "web", "icmp", web, false, "acl-default"},
		{"web pings app", "web", "app", "icmp", app, false, "acl-default"},
	}
	webPort := plan.VNICPortName(infra, "web", 0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			was := counters(t, infra)[webPort][c.counted]
			var err error
			switch c.proto {
			case "tcp":
				err = tcpEcho(t, vm(c.from), c.addr)
			case "udp":
				err = udpEcho(t, vm(c.from), c.addr)
			case "icmp":
				err = ping(t, vm(c.from), c.addr)
			}
			if got := err == nil; got != c.want {
				t.Errorf("%s %s -> %s: got through %v, want %v (%v)", c.proto, c.from, c.addr, got, c.want, err)
			}
			if now := counters(t, infra)[webPort][c.counted]; now <= was {
				t.Errorf("%s on web's port did not count the attempt: %d -> %d", c.counted, was, now)
			}
		})
	}
	after := counters(t, infra)
	for _, label := range []string{"acl[0]", "acl[1]", "acl[2]", "acl[3]", "acl[4]", "acl-default"} {
		if after[webPort][label] <= before[webPort][label] {
			t.Errorf("%s on web's port did not count: %d -> %d", label, before[webPort][label], after[webPort][label])
		}
	}
	st, err := eng.Status(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(st.Security), "acl-default") {
		t.Errorf("status shows no ACL drops: %+v", st.Security)
	}

	if byPrograms(eng) {
		programDrift(t, eng, doc, func() { nstest.Apply(t, eng, lab(infra)) }, vm("esx1"), webPort, func(what string) {
			if err := tcpEcho(t, vm("open"), at(web, "443")); err == nil {
				t.Errorf("%s: after the repair open reaches web", what)
			}
			if err := tcpEcho(t, vm("app"), at(web, "443")); err != nil {
				t.Errorf("%s: after the repair app does not reach web: %v", what, err)
			}
		})
		return
	}
	// A rule deleted behind vnet's back is drift, and a full apply repairs it.
	deleteLastRule(t, vm("esx1"), webPort+"-ingress")
	eng.Full = true
	p, err := eng.Plan(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 1 || p.Actions[0].Op != plan.OpModify || p.Actions[0].Subject().Kind != plan.KindPortSec {
		t.Fatalf("after deleting a rule the plan is:\n%s", p)
	}
	nstest.Apply(t, eng, lab(infra))
	if err := tcpEcho(t, vm("open"), at(web, "443")); err == nil {
		t.Error("after the repair open reaches web again")
	}
	if p, _ := eng.Plan(doc); !p.Empty() {
		t.Errorf("after the repair the plan is:\n%s", p)
	}

	// So is a port's map element deleted (its port unguarded), a base
	// chain's lookup deleted (every port unguarded in one direction), and
	// an earlier vnet's table of a jump rule per port.
	for _, d := range []struct {
		name  string
		drift func()
		kind  plan.Kind
	}{
		{"element deleted", func() { deleteElement(t, vm("esx1"), "ingress", webPort) }, plan.KindPortSec},
		{"lookup deleted", func() { deleteLastRule(t, vm("esx1"), "forward") }, plan.KindFirewall},
		{"jump rules", func() { toJumpRules(t, vm("esx1")) }, plan.KindFirewall},
	} {
		d.drift()
		p, err := eng.Plan(doc)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Actions) == 0 || p.Actions[0].Subject().Kind != d.kind {
			t.Fatalf("%s: the plan is:\n%s", d.name, p)
		}
		t.Logf("%s: the plan is:\n%s", d.name, p)
		nstest.Apply(t, eng, lab(infra))
		if err := tcpEcho(t, vm("open"), at(web, "443")); err == nil {
			t.Errorf("%s: after the repair open reaches web", d.name)
		}
		if err := tcpEcho(t, vm("app"), at(web, "443")); err != nil {
			t.Errorf("%s: after the repair app does not reach web: %v", d.name, err)
		}
		if p, _ := eng.Plan(doc); !p.Empty() {
			t.Errorf("%s: after the repair the plan is:\n%s", d.name, p)
		}
	}
}

// byPrograms reports whether the engine's dataplane enforces port policies
// with its tc/BPF programs.
func byPrograms(eng *reconcile.Engine) bool {
	pp, ok := eng.DP.(reconcile.PortProgrammer)
	if !ok {
		return false
	}
	on, _ := pp.PortPrograms()
	return on
}

// webPolicy is the text of web's port policy as the plan of src makes it.
func webPolicy(t *testing.T, eng *reconcile.Engine, src string) string {
	t.Helper()
	doc, err := spec.Load("sec.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range plan.Model(doc.Spec, plan.Options{PortPrograms: byPrograms(eng)}) {
		if r.Kind == plan.KindPortBPF && r.Link == plan.VNICPortName(doc.Spec.Name, "web", 0) {
			return r.Match
		}
	}
	return ""
}

// programDrift changes a port's programs behind vnet's back in each way a
// hand or a killed command could, and checks that each is drift of the
// port's policy alone, which the next apply repairs: after which check
// holds and nothing is left to change.
func programDrift(t *testing.T, eng *reconcile.Engine, doc *spec.Document, apply func(), ns, port string, check func(what string)) {
	t.Helper()
	eng.Full = true
	for _, d := range []struct {
		name  string
		drift func(h *netlink.Handle, link netlink.Link)
	}{
		{"egress program deleted", func(h *netlink.Handle, link netlink.Link) { delFilter(t, h, link, netlink.HANDLE_MIN_EGRESS) }},
		{"ingress program deleted", func(h *netlink.Handle, link netlink.Link) { delFilter(t, h, link, netlink.HANDLE_MIN_INGRESS) }},
		{"clsact deleted", func(h *netlink.Handle, link netlink.Link) {
			q := &netlink.GenericQdisc{QdiscType: "clsact", QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_CLSACT, Handle: netlink.MakeHandle(0xffff, 0)}}
			if err := h.QdiscDel(q); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		h := nstest.Netlink(t, ns)
		link, err := h.LinkByName(port)
		if err != nil {
			t.Fatal(err)
		}
		d.drift(h, link)
		p, err := eng.Plan(doc)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Actions) != 1 || p.Actions[0].Subject().Kind != plan.KindPortBPF || p.Actions[0].Subject().Link != port {
			t.Fatalf("%s: the plan is:\n%s", d.name, p)
		}
		t.Logf("%s: the plan is:\n%s", d.name, p)
		apply()
		check(d.name)
		if p, _ := eng.Plan(doc); !p.Empty() {
			t.Errorf("%s: after the repair the plan is:\n%s", d.name, p)
		}
	}
}

func delFilter(t *testing.T, h *netlink.Handle, link netlink.Link, parent uint32) {
	t.Helper()
	filters, err := h.FilterList(link, parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range filters {
		if err := h.FilterDel(f); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no filter on %s", link.Attrs().Name)
}

// deleteElement removes a port's element from one of vnet's port maps,
// as someone editing the firewall by hand would.
func deleteElement(t *testing.T, ns, kind, port string) {
	t.Helper()
	c, _, err := vnetChainRules(t, ns, "forward")
	if err != nil {
		t.Fatal(err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyBridge, Name: "vnet"}
	key := make([]byte, 16)
	copy(key, port)
	if err := c.SetDeleteElements(&nftables.Set{Table: table, Name: kind}, []nftables.SetElement{{Key: key}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("delete element %s %s: %v", kind, port, err)
	}
}

// toJumpRules turns vnet's bridge table into the layout of an earlier
// vnet: no port maps, and in the base chains a jump rule per port and kind
// of chain, the first of each port's carrying its element's comment.
func toJumpRules(t *testing.T, ns string) {
	t.Helper()
	c, _, err := vnetChainRules(t, ns, "forward")
	if err != nil {
		t.Fatal(err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyBridge, Name: "vnet"}
	pre := &nftables.Chain{Name: "prerouting", Table: table}
	fwd := &nftables.Chain{Name: "forward", Table: table}
	type jump struct {
		chain *nftables.Chain
		key   expr.MetaKey
		kind  string
	}
	var ports []string
	comments := map[string]string{}
	kinds := map[string][]string{}
	for _, kind := range []string{"guard", "egress", "ingress"} {
		elems, err := c.GetSetElements(&nftables.Set{Table: table, Name: kind})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range elems {
			port := strings.TrimRight(string(e.Key), "\x00")
			if _, ok := comments[port]; !ok {
				ports = append(ports, port)
			}
			comments[port] = e.Comment
			kinds[port] = append(kinds[port], kind)
		}
	}
	c.FlushChain(pre)
	c.FlushChain(fwd)
	for _, kind := range []string{"guard", "egress", "ingress"} {
		c.DelSet(&nftables.Set{Table: table, Name: kind})
	}
	for _, port := range ports {
		key := make([]byte, 16)
		copy(key, port)
		for i, kind := range kinds[port] {
			j := map[string]jump{"guard": {pre, expr.MetaKeyIIFNAME, kind}, "egress": {fwd, expr.MetaKeyIIFNAME, kind}, "ingress": {fwd, expr.MetaKeyOIFNAME, kind}}[kind]
			text := "port " + port
			if i == 0 {
				text = comments[port]
			}
			c.AddRule(&nftables.Rule{Table: table, Chain: j.chain, UserData: append([]byte{0, byte(len(text) + 1)}, text+"\x00"...), Exprs: []expr.Any{
				&expr.Meta{Key: j.key, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: key},
				&expr.Verdict{Kind: expr.VerdictJump, Chain: port + "-" + kind}}})
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("jump rules: %v", err)
	}
}

// vnet has no DHCP server guard; an egress ACL rule on the source ports
// stops a VM answering DHCP and DHCPv6, as docs/security.md says, and lets
// its other traffic by.
func TestACLStopsARogueDHCPServer(t *testing.T) {
	eng := nstest.Engine(t)
	infra := secInfra("dhcp")
	nstest.Apply(t, eng, fmt.Sprintf(`
name: %s
hosts:
  - {name: esx1}
switches:
  - name: sw0
    hosts: [esx1]
    portgroups:
      - name: pg-guest
        acl:
          rules:
            - {action: deny, direction: egress, proto: udp, sport: 67}
            - {action: deny, direction: egress, proto: udp, sport: 547}
      - name: pg-infra
vms:
  - {name: guest, host: esx1, nics: [{portgroup: pg-guest, ip: 10.79.0.2/24}]}
  - {name: client, host: esx1, nics: [{portgroup: pg-infra, ip: 10.79.0.3/24}]}
`, infra))
	vm := func(n string) string { return nstest.NSName(infra, n) }
	guestMAC := macOf(t, vm("guest"))
	guest, bcast := netip.MustParseAddr("10.79.0.2"), netip.MustParseAddr("255.255.255.255")
	guestLL, _ := plan.LinkLocal(guestMAC.String())
	allNodes := netip.MustParseAddr("ff02::1")
	ethBcast, ethAllNodes := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	before := counters(t, infra)[plan.VNICPortName(infra, "guest", 0)]
	got4 := exchange(t, vm("guest"), vm("client"), 0x0800,
		ethFrame(ethBcast, guestMAC, 0x0800, ipv4UDP(guest, bcast, 67, 68, []byte("offer"))),
		ethFrame(ethBcast, guestMAC, 0x0800, ipv4UDP(guest, bcast, 5000, 68, []byte("chatter"))))
	got6 := exchange(t, vm("guest"), vm("client"), 0x86dd,
		ethFrame(ethAllNodes, guestMAC, 0x86dd, ipv6UDP(guestLL, allNodes, 547, 546, []byte("advertise"))),
		ethFrame(ethAllNodes, guestMAC, 0x86dd, ipv6UDP(guestLL, allNodes, 5000, 546, []byte("chatter-six"))))
	if got4["offer"] != 0 || got4["chatter"] != 1 {
		t.Errorf("client received %v over IPv4: want the chatter, not the DHCP offer", got4)
	}
	if got6["advertise"] != 0 || got6["chatter-six"] != 1 {
		t.Errorf("client received %v over IPv6: want the chatter, not the DHCPv6 advertise", got6)
	}
	after := counters(t, infra)[plan.VNICPortName(infra, "guest", 0)]
	for _, label := range []string{"acl[0]", "acl[1]"} {
		if after[label] <= before[label] {
			t.Errorf("%s did not count the server's reply: %d -> %d", label, before[label], after[label])
		}
	}
}

// A port group spanning two hosts has its firewall on each: web's ingress
// rules decide on esx1 for traffic that crossed the uplink from esx2, and
// app's egress rules on esx2 before it leaves; replies pass both hosts'
// connection tracking.
func TestACLAcrossHosts(t *testing.T) {
	eng := nstest.Engine(t)
	infra := secInfra("xh")
	nstest.Apply(t, eng, fmt.Sprintf(`
name: %s
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
  - {name: esx2, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: u1, nics: {esx1: vmnic0, esx2: vmnic0}}]
    portgroups:
      - name: pg-web
        acl:
          default: deny
          rules:
            - {action: allow, direction: ingress, proto: tcp, dport: 443, from: {portgroup: pg-app}}
      - name: pg-app
        acl:
          default: deny
          rules:
            - {action: allow, direction: egress, proto: tcp, dport: 443, to: {portgroup: pg-web}}
      - name: pg-open
        security: {promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true}
vms:
  - {name: web, host: esx1, nics: [{portgroup: pg-web, ip: 10.80.0.1/24}]}
  - {name: app, host: esx2, nics: [{portgroup: pg-app, ip: 10.80.0.2/24}]}
  - {name: open, host: esx2, nics: [{portgroup: pg-open, ip: 10.80.0.4/24}]}
`, infra))
	vm := func(n string) string { return nstest.NSName(infra, n) }
	echoTCP(t, vm("web"), "10.80.0.1:443")
	echoTCP(t, vm("open"), "10.80.0.4:8080")
	countersOn := func(host string) map[string]map[string]uint64 {
		t.Helper()
		dp, err := dataplane.New()
		if err != nil {
			t.Fatal(err)
		}
		defer dp.Close()
		c, err := dp.FirewallCounters(nstest.NSName(infra, host))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	webPort, appPort := plan.VNICPortName(infra, "web", 0), plan.VNICPortName(infra, "app", 0)
	esx1, esx2 := countersOn("esx1"), countersOn("esx2")
	if err := tcpEcho(t, vm("app"), "10.80.0.1:443"); err != nil {
		t.Errorf("app on esx2 cannot reach web on esx1: %v", err)
	}
	if err := tcpEcho(t, vm("open"), "10.80.0.1:443"); err == nil {
		t.Error("open, not in pg-app, reaches web across hosts")
	}
	if err := tcpEcho(t, vm("app"), "10.80.0.4:8080"); err == nil {
		t.Error("app's egress rules let it reach open")
	}
	esx1After, esx2After := countersOn("esx1"), countersOn("esx2")
	for _, c := range []struct {
		host        string
		before, now map[string]map[string]uint64
		port, label string
	}{
		{"esx1", esx1, esx1After, webPort, "acl[0]"}, {"esx1", esx1, esx1After, webPort, "acl-default"},
		{"esx2", esx2, esx2After, appPort, "acl[0]"}, {"esx2", esx2, esx2After, appPort, "acl-default"},
	} {
		if c.now[c.port][c.label] <= c.before[c.port][c.label] {
			t.Errorf("%s on %s (%s) did not count: %d -> %d", c.label, c.port, c.host, c.before[c.port][c.label], c.now[c.port][c.label])
		}
	}
}

// A rule naming a port group follows its members: the addresses the
// rule's set holds in the kernel change as a VM is added to the group,
// removed, or moved onto it from another group, in place, and the VM is let
// in exactly while it is a member.
func TestACLFollowsPortGroupMembers(t *testing.T) {
	eng := nstest.Engine(t)
	kind := plan.KindPortSec
	if byPrograms(eng) {
		kind = plan.KindPortBPF
	}
	infra := secInfra("mem")
	src := secLab(infra)
	vm := func(n string) string { return nstest.NSName(infra, n) }
	webIn := plan.VNICPortName(infra, "web", 0) + "-ingress"
	withApp2 := func(pg string) string {
		return strings.Replace(src, "  - {name: open,", "  - {name: app2, host: esx1, nics: [{portgroup: "+pg+", ip: 10.77.0.5/24}]}\n  - {name: open,", 1)
	}
	members := []string{"10.77.0.2", "10.77.0.3"}
	steps := []struct {
		name      string
		src       string
		set       []string // the addresses acl[0] (https from pg-app) holds
		app2Comes bool     // app2 exists and reaches web
	}{
		{"applied", src, members, false},
		{"app2 added to pg-app", withApp2("pg-app"), append(members, "10.77.0.5"), true},
		{"app2 removed", src, members, false},
		{"app2 added to pg-open", withApp2("pg-open"), members, false},
		{"app2 moved to pg-app", withApp2("pg-app"), append(members, "10.77.0.5"), true},
	}
	for i, st := range steps {
		_, res := nstest.Apply(t, eng, st.src)
		if i == 0 {
			echoTCP(t, vm("web"), "10.77.0.1:443")
		}
		for _, a := range res.Plan.Actions {
			if a.Subject().Kind == kind && a.Subject().Link == plan.VNICPortName(infra, "web", 0) && a.Op != plan.OpModify && i > 0 {
				t.Errorf("%s: web's policy is not changed in place: %s", st.name, a)
			}
		}
		got := st.set
		if kind == plan.KindPortSec {
			got = ruleAddresses(t, vm("esx1"), webIn, "acl[0]")
		} else if p := webPolicy(t, eng, st.src); !strings.Contains(p, "from "+strings.Join(st.set, ",")) {
			t.Errorf("%s: web's policy is %q, want acl[0] from %v", st.name, p, st.set)
		}
		t.Logf("%s: %d actions, acl[0] holds %v", st.name, len(res.Plan.Actions), got)
		if !slices.Equal(got, st.set) {
			t.Errorf("%s: acl[0] holds %v, want %v", st.name, got, st.set)
		}
		if err := tcpEcho(t, vm("app"), "10.77.0.1:443"); err != nil {
			t.Errorf("%s: app cannot reach web: %v", st.name, err)
		}
		if strings.Contains(st.src, "name: app2") {
			if err := tcpEcho(t, vm("app2"), "10.77.0.1:443"); (err == nil) != st.app2Comes {
				t.Errorf("%s: app2 reaches web: %v, want %v (%v)", st.name, err == nil, st.app2Comes, err)
			}
		}
	}
}

// ruleAddresses reads, from a chain of vnet's bridge table, the IPv4
// addresses the rules labelled label look up in their sets, sorted.
func ruleAddresses(t *testing.T, ns, chain, label string) []string {
	t.Helper()
	c, rules, err := vnetChainRules(t, ns, chain)
	if err != nil {
		t.Fatalf("rules of %s: %v", chain, err)
	}
	var out []string
	for _, r := range rules {
		if len(r.UserData) < 2 || strings.TrimRight(string(r.UserData[2:]), "\x00") != label {
			continue
		}
		for _, e := range r.Exprs {
			lookup, ok := e.(*expr.Lookup)
			if !ok {
				continue
			}
			set, err := c.GetSetByName(r.Table, lookup.SetName)
			if err != nil {
				t.Fatalf("set %s: %v", lookup.SetName, err)
			}
			elems, err := c.GetSetElements(set)
			if err != nil {
				t.Fatalf("elements of %s: %v", lookup.SetName, err)
			}
			for _, el := range elems {
				if a, ok := netip.AddrFromSlice(el.Key); ok {
					out = append(out, a.String())
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
	return out
}

// A policy of a thousand rules goes in as one transaction, and a second
// apply finds it as it was made.
func TestLargeACLApplies(t *testing.T) {
	eng := nstest.Engine(t)
	infra := secInfra("big")
	var rules strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&rules, "            - {action: deny, direction: ingress, proto: udp, dport: %d, from: 192.0.2.0/24}\n", 20000+i)
	}
	src := strings.Replace(secLab(infra), "          rules:\n", "          rules:\n"+rules.String(), 1)
	doc, _ := nstest.Apply(t, eng, src)
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Fatalf("second plan (%v):\n%s", err, p)
	}
	echoTCP(t, nstest.NSName(infra, "web"), "10.77.0.1:443")
	if err := tcpEcho(t, nstest.NSName(infra, "app"), "10.77.0.1:443"); err != nil {
		t.Errorf("behind 1000 rules app cannot reach web: %v", err)
	}
}

// Without br_netfilter vnet cannot track the connections of bridged
// traffic, and it has no stateless ACLs: an apply that needs ACLs is
// refused before it changes anything, naming what is missing, while port
// security without an ACL still applies and works.
func TestACLsRefusedWithoutBrNetfilter(t *testing.T) {
	eng := nstest.Engine(t)
	dp, ok := eng.DP.(*dataplane.Linux)
	if !ok {
		t.Fatalf("the engine's dataplane is a %T", eng.DP)
	}
	dp.WithoutBrNetfilter = true
	dp.WithoutPortPrograms = true // the nftables way needs br_netfilter; vnet's port programs do not
	infra := secInfra("nobr")
	withACL := secLab(infra)
	noACL := dropBlock(withACL, "        acl:\n")
	refused := func(what string) {
		t.Helper()
		want := nstest.Snapshot(t, infra)
		doc, err := spec.Load("acl.yaml", []byte(withACL))
		if err != nil {
			t.Fatal(err)
		}
		_, err = eng.Apply(doc)
		if !errors.Is(err, dataplane.ErrNotSupported) || !strings.Contains(err.Error(), "br_netfilter") {
			t.Errorf("%s: apply with ACLs and no br_netfilter: %v; want an error naming br_netfilter that wraps ErrNotSupported", what, err)
		}
		if got := nstest.Snapshot(t, infra); !slices.Equal(want, got) {
			t.Errorf("%s: the refused apply changed the host:\n%s", what, diffLines(want, got))
		}
		t.Logf("%s: %d objects on the host, refused: %v", what, len(want), err)
	}
	refused("from nothing")

	nstest.Apply(t, eng, noACL)
	vm := func(n string) string { return nstest.NSName(infra, n) }
	forged := ethFrame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, net.HardwareAddr{0x02, 0, 0, 0, 0x99, 0x99}, ethExperimental, []byte("#forged"))
	if got := exchange(t, vm("app"), vm("other"), ethExperimental, forged); got["forged"] != 0 {
		t.Error("without an ACL, port security let a forged frame through")
	}
	if n := counters(t, infra)[plan.VNICPortName(infra, "app", 0)]["forged-mac"]; n == 0 {
		t.Error("the forged frame was not counted")
	}
	refused("over port security")
}

// Where the kernel runs vnet's port programs, ACLs track connections in
// them: an apply needs no br_netfilter and turns no IP hooks on.
func TestACLsWithPortProgramsNeedNoBrNetfilter(t *testing.T) {
	eng := nstest.Engine(t)
	if !byPrograms(eng) {
		t.Skip("SKIPPED: port policies are nftables here (" + dataplane.PortPolicyEnv + " or the kernel)")
	}
	eng.DP.(*dataplane.Linux).WithoutBrNetfilter = true
	infra := secInfra("nobrp")
	_, res := nstest.Apply(t, eng, secLab(infra))
	for _, a := range res.Plan.Actions {
		if k := a.Subject().Kind; k == plan.KindFirewall || k == plan.KindPortSec {
			t.Errorf("the plan has %s", a)
		}
	}
	vm := func(n string) string { return nstest.NSName(infra, n) }
	if b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil {
		got := readSysctl(t, vm("esx1"), plan.ConntrackSysctlV4)
		t.Logf("bridge-nf-call-iptables: %s here, %s in the host namespace", got, strings.TrimSpace(string(b)))
		if got == "1" {
			t.Error("the IP hooks are on for bridged traffic")
		}
	}
	waitAddressesSettled(t, vm("web"))
	echoTCP(t, vm("web"), "10.77.0.1:443")
	if err := tcpEcho(t, vm("app"), "10.77.0.1:443"); err != nil {
		t.Errorf("app does not reach web's https: %v", err)
	}
	if err := tcpEcho(t, vm("open"), "10.77.0.1:443"); err == nil {
		t.Error("open reaches web's https")
	}
}

// A failed apply that adds ACLs, connection tracking and port policies
// leaves the firewall (and everything else) as it found it.
func TestSecurityRollbackAtEveryStep(t *testing.T) {
	eng := nstest.Engine(t)
	infra := secInfra("srb")
	open := strings.NewReplacer(
		"        acl:\n", "        security: {promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true}\n        xacl:\n",
	).Replace(secLab(infra))
	open = dropBlock(open, "        xacl:\n")
	changed := strings.NewReplacer("dport: 443", "dport: 8443", "{portgroup: pg-app, ip: 10.77.0.3/24}", "{portgroup: pg-open, ip: 10.77.0.3/24}").Replace(secLab(infra))
	for _, tc := range []struct{ name, from, to string }{
		{"ACLs and conntrack added", open, secLab(infra)},
		{"a rule and a member changed", secLab(infra), changed},
		{"ACLs and conntrack removed", secLab(infra), open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nstest.Apply(t, eng, tc.from)
			to, err := spec.Load("to.yaml", []byte(tc.to))
			if err != nil {
				t.Fatal(err)
			}
			p, err := eng.Plan(to)
			if err != nil {
				t.Fatal(err)
			}
			want := nstest.Snapshot(t, infra)
			for step := range p.Actions {
				eng.FailBefore = func(i int, _ plan.Action) error {
					if i == step {
						return errInjected
					}
					return nil
				}
				_, err := eng.Apply(to)
				eng.FailBefore = nil
				if !errors.Is(err, errInjected) {
					t.Fatalf("step %d: %v", step, err)
				}
				if got := nstest.Snapshot(t, infra); !slices.Equal(want, got) {
					t.Fatalf("step %d (%s): host changed:\n%s", step, p.Actions[step], diffLines(want, got))
				}
			}
			t.Logf("%d steps, each rolled back:\n%s", len(p.Actions), p)
		})
	}
}

// dropBlock removes the line starting with marker and the more indented
// lines under it.
func dropBlock(src, marker string) string {
	i := strings.Index(src, marker)
	if i < 0 {
		return src
	}
	depth := len(marker) - len(strings.TrimLeft(marker, " "))
	rest := src[i+len(marker):]
	for rest != "" {
		line, after, _ := strings.Cut(rest, "\n")
		if len(line)-len(strings.TrimLeft(line, " ")) <= depth {
			break
		}
		rest = after
	}
	return src[:i] + rest
}

// --- traffic helpers ---

func counters(t *testing.T, infra string) map[string]map[string]uint64 {
	t.Helper()
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	c, err := dp.FirewallCounters(nstest.NSName(infra, "esx1"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func macOf(t *testing.T, ns string) net.HardwareAddr {
	t.Helper()
	return nstest.MAC(t, ns)
}

func setMAC(t *testing.T, ns string, mac net.HardwareAddr) {
	t.Helper()
	if err := nstest.Do(t, ns, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.LinkSetHardwareAddr(l, mac)
	}); err != nil {
		t.Fatalf("set MAC in %s: %v", ns, err)
	}
}

func setPromisc(t *testing.T, ns string) {
	t.Helper()
	if err := nstest.Do(t, ns, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.SetPromiscOn(l)
	}); err != nil {
		t.Fatalf("promiscuous mode in %s: %v", ns, err)
	}
}

// send writes raw Ethernet frames out of eth0 of a namespace.
func send(t *testing.T, ns string, frames ...[]byte) {
	t.Helper()
	if err := nstest.Do(t, ns, func() error {
		ifc, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0) // send only
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for _, f := range frames {
			to := &unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6}
			copy(to.Addr[:], f[:6])
			if err := unix.Sendto(fd, f, 0, to); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("send from %s: %v", ns, err)
	}
}

// capturer counts the frames of one EtherType arriving on eth0 of a
// namespace, by the marker at their end.
type capturer struct {
	fd         int
	mu         sync.Mutex
	seen       map[string]int
	quit, done chan struct{}
}

func capture(t *testing.T, ns string, ethertype uint16) *capturer {
	t.Helper()
	c := &capturer{seen: map[string]int{}, quit: make(chan struct{}), done: make(chan struct{})}
	if err := nstest.Do(t, ns, func() error {
		ifc, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		proto := int(htons(ethertype))
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, proto)
		if err != nil {
			return err
		}
		c.fd = fd
		tv := unix.Timeval{Usec: 50000}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(ethertype), Ifindex: ifc.Index})
	}); err != nil {
		t.Fatalf("capture in %s: %v", ns, err)
	}
	go func() {
		defer close(c.done)
		buf := make([]byte, 2048)
		for {
			n, _, err := unix.Recvfrom(c.fd, buf, 0)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
					select {
					case <-c.quit:
						return
					default:
						continue
					}
				}
				return
			}
			if m := markerOf(buf[:n]); m != "" {
				c.mu.Lock()
				c.seen[m]++
				c.mu.Unlock()
			}
		}
	}()
	return c
}

// stop waits for stragglers, stops, and returns the markers seen.
func (c *capturer) stop() map[string]int {
	time.Sleep(300 * time.Millisecond)
	close(c.quit)
	<-c.done
	unix.Close(c.fd)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen
}

// exchange captures in one namespace while frames leave another.
func exchange(t *testing.T, from, to string, ethertype uint16, frames ...[]byte) map[string]int {
	t.Helper()
	c := capture(t, to, ethertype)
	send(t, from, frames...)
	return c.stop()
}

// A marker ends each test frame: "#marker", so that frames the kernel
// sends itself are not counted.
func markerOf(frame []byte) string {
	s := string(frame)
	i := strings.LastIndexByte(s, '#')
	if i < 0 || i == len(s)-1 {
		return ""
	}
	m := strings.TrimRight(s[i+1:], "\x00")
	for _, r := range m {
		if !(r >= 'a' && r <= 'z' || r == '-') {
			return ""
		}
	}
	return m
}

func ethFrame(dst, src net.HardwareAddr, ethertype uint16, payload []byte) []byte {
	f := append(append(append([]byte{}, dst...), src...), byte(ethertype>>8), byte(ethertype))
	f = append(f, payload...)
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

func ipv4UDP(src, dst netip.Addr, sport, dport uint16, data []byte) []byte {
	data = append([]byte("#"), data...)
	udp := make([]byte, 8, 8+len(data))
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(data)))
	udp = append(udp, data...) // checksum 0: none, which IPv4 allows
	ip := make([]byte, 20)
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
	copy(ip[12:], src.AsSlice())
	copy(ip[16:], dst.AsSlice())
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	return append(ip, udp...)
}

// arpFrame is a gratuitous ARP request from src claiming spa for sha,
// with a marker after the ARP body.
func arpFrame(src, sha net.HardwareAddr, spa netip.Addr, marker string) []byte {
	body := make([]byte, 28)
	binary.BigEndian.PutUint16(body[0:], 1)
	binary.BigEndian.PutUint16(body[2:], 0x0800)
	body[4], body[5] = 6, 4
	binary.BigEndian.PutUint16(body[6:], 1)
	copy(body[8:], sha)
	copy(body[14:], spa.AsSlice())
	copy(body[24:], spa.AsSlice())
	body = append(body, []byte("#"+marker)...)
	return ethFrame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, src, 0x0806, body)
}

// The neighbour discovery messages, by ICMPv6 type.
const (
	ndRS       = 133
	ndRA       = 134
	ndNS       = 135
	ndNA       = 136
	ndRedirect = 137
)

// neighbourAdvert is an unsolicited advertisement from src (sent from
// address from) claiming target, to all nodes. Its marker is in the
// message, where it takes less room than an option (a trailer would not
// survive br_netfilter, which trims a frame to its IP packet).
func neighbourAdvert(src net.HardwareAddr, from, target netip.Addr, marker string) []byte {
	body := append([]byte{0x20, 0, 0, 0}, target.AsSlice()...) // override
	return ndFrame(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, src, from, netip.MustParseAddr("ff02::1"), ndNA, body, []byte("#"+marker), nil)
}

// ndFrame is a neighbour discovery message of type typ: its body after
// the ICMPv6 header, then its options; extHeader, when not nil, is an
// extension header put before it.
func ndFrame(dst, src net.HardwareAddr, from, to netip.Addr, typ byte, body, options, extHeader []byte) []byte {
	icmp := append(append([]byte{typ, 0, 0, 0}, body...), options...)
	pseudo := append(append(append([]byte{}, from.AsSlice()...), to.AsSlice()...), 0, 0, byte(len(icmp)>>8), byte(len(icmp)), 0, 0, 0, 58)
	binary.BigEndian.PutUint16(icmp[2:], checksum(append(pseudo, icmp...)))
	payload := icmp
	next := byte(58)
	if extHeader != nil {
		ext := append([]byte{58}, extHeader[1:]...)
		payload, next = append(ext, icmp...), 0
	}
	ip := make([]byte, 40)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(payload)))
	ip[6], ip[7] = next, 255
	copy(ip[8:], from.AsSlice())
	copy(ip[24:], to.AsSlice())
	return ethFrame(dst, src, 0x86dd, append(ip, payload...))
}

func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// udpExchange counts, by marker, the datagrams a UDP socket in to receives
// on port while frames leave from.
func udpExchange(t *testing.T, from, to string, port int, frames ...[]byte) map[string]int {
	t.Helper()
	return udpExchangeOver(t, "udp4", from, to, port, frames...)
}

// udp6Exchange is udpExchange for IPv6.
func udp6Exchange(t *testing.T, from, to string, port int, frames ...[]byte) map[string]int {
	t.Helper()
	return udpExchangeOver(t, "udp6", from, to, port, frames...)
}

func udpExchangeOver(t *testing.T, network, from, to string, port int, frames ...[]byte) map[string]int {
	t.Helper()
	var pc net.PacketConn
	if err := nstest.Do(t, to, func() (err error) { pc, err = net.ListenPacket(network, fmt.Sprintf(":%d", port)); return }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	send(t, from, frames...)
	seen := map[string]int{}
	buf := make([]byte, 1500)
	for {
		pc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			return seen
		}
		seen[strings.TrimPrefix(string(buf[:n]), "#")]++
	}
}

// ipv6UDP is a UDP datagram in an IPv6 packet; IPv6 requires its checksum.
func ipv6UDP(src, dst netip.Addr, sport, dport uint16, data []byte) []byte {
	data = append([]byte("#"), data...)
	udp := make([]byte, 8, 8+len(data))
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(data)))
	udp = append(udp, data...)
	pseudo := append(append(append([]byte{}, src.AsSlice()...), dst.AsSlice()...), 0, 0, byte(len(udp)>>8), byte(len(udp)), 0, 0, 0, 17)
	binary.BigEndian.PutUint16(udp[6:], checksum(append(pseudo, udp...)))
	ip := make([]byte, 40)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(udp)))
	ip[6], ip[7] = 17, 64
	copy(ip[8:], src.AsSlice())
	copy(ip[24:], dst.AsSlice())
	return append(ip, udp...)
}

// waitAddressesSettled waits until duplicate address detection has passed
// for eth0's IPv6 addresses: the kernel takes nothing for a tentative one.
func waitAddressesSettled(t *testing.T, ns string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var tentative []string
		if err := nstest.Do(t, ns, func() error {
			l, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			addrs, err := netlink.AddrList(l, netlink.FAMILY_V6)
			for _, a := range addrs {
				if a.Flags&unix.IFA_F_TENTATIVE != 0 {
					tentative = append(tentative, a.IPNet.String())
				}
			}
			return err
		}); err != nil {
			t.Fatalf("addresses in %s: %v", ns, err)
		}
		if len(tentative) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("addresses of %s still tentative: %v", ns, tentative)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func echoTCP(t *testing.T, ns, addr string) {
	t.Helper()
	l := nstest.Listen(t, ns, addr)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
}

func echoUDP(t *testing.T, ns, addr string) {
	t.Helper()
	var pc net.PacketConn
	if err := nstest.Do(t, ns, func() (err error) { pc, err = net.ListenPacket("udp", addr); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
}

const denyWait = 700 * time.Millisecond // how long a dropped attempt is given

func tcpEcho(t *testing.T, ns, addr string) error {
	c, err := nstest.Dial(t, ns, addr, net.Dialer{Timeout: denyWait})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("hello")); err != nil {
		return err
	}
	_, err = io.ReadFull(c, make([]byte, 5))
	return err
}

func udpEcho(t *testing.T, ns, addr string) error {
	var pc net.PacketConn
	if err := nstest.Do(t, ns, func() (err error) { pc, err = net.ListenPacket("udp", ":0"); return }); err != nil {
		return err
	}
	defer pc.Close()
	to, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	if _, err := pc.WriteTo([]byte("query"), to); err != nil {
		return err
	}
	pc.SetReadDeadline(time.Now().Add(denyWait))
	_, _, err = pc.ReadFrom(make([]byte, 64))
	return err
}

// ping sends one ICMP echo request (ICMPv6 to an IPv6 address) and waits
// for its reply.
func ping(t *testing.T, ns, addr string) error {
	network, request, reply := "ip4:icmp", byte(8), byte(0)
	if netip.MustParseAddr(addr).Is6() {
		network, request, reply = "ip6:ipv6-icmp", 128, 129 // the kernel sums ICMPv6 itself
	}
	var pc net.PacketConn
	if err := nstest.Do(t, ns, func() (err error) { pc, err = net.ListenPacket(network, ""); return }); err != nil {
		return err
	}
	defer pc.Close()
	id := uint16(os.Getpid())
	req := []byte{request, 0, 0, 0, byte(id >> 8), byte(id), 0, 1, 'v', 'n', 'e', 't'}
	binary.BigEndian.PutUint16(req[2:], checksum(req))
	if _, err := pc.WriteTo(req, &net.IPAddr{IP: net.ParseIP(addr)}); err != nil {
		return err
	}
	deadline := time.Now().Add(denyWait)
	buf := make([]byte, 1500)
	for {
		pc.SetReadDeadline(deadline)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		if n >= 8 && buf[0] == reply && from.String() == addr && binary.BigEndian.Uint16(buf[4:]) == id {
			return nil
		}
	}
}

// vnetChainRules reads the rules of a chain of vnet's bridge table in a
// namespace, on a connection that stays usable until the test ends.
func vnetChainRules(t *testing.T, ns, chain string) (*nftables.Conn, []*nftables.Rule, error) {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		t.Fatal(err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyBridge, Name: "vnet"}
	rules, err := c.GetRules(table, &nftables.Chain{Name: chain, Table: table})
	return c, rules, err
}

// deleteLastRule removes a rule from one of vnet's chains, as someone
// editing the firewall by hand would.
func deleteLastRule(t *testing.T, ns, chain string) {
	t.Helper()
	c, rules, err := vnetChainRules(t, ns, chain)
	if err != nil || len(rules) == 0 {
		t.Fatalf("rules of %s: %v (%d)", chain, err, len(rules))
	}
	if err := c.DelRule(rules[len(rules)-1]); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
}
