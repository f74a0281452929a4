package clustertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// securitySpec spans two machines: port group web admits TCP only from
// port group app, on whatever host its members are; app and network n-a
// reject forged MACs and spoofed addresses; n-a admits only its own
// network's VMs, and n-b's VM reaches it through router r1.
const securitySpec = `switches:
  - name: dvs
    hosts: [hv1, hv2]
    mtu: 1450
    portgroups:
      - name: web
        acl:
          default: deny
          rules:
            - {action: allow, direction: ingress, proto: tcp, from: {portgroup: app}}
      - name: app
        security: {ipSpoofing: false}
      - name: other
networks:
  - name: n-a
    subnet: 10.9.1.0/24
    gateway: 10.9.1.1
    router: r1
    security: {ipSpoofing: false}
    acl:
      default: deny
      rules:
        - {action: allow, direction: ingress, proto: tcp, from: {network: n-a}}
        - {action: allow, direction: ingress, proto: udp, from: {network: n-a}}
        - {action: allow, direction: egress}
  - {name: n-b, subnet: 10.9.2.0/24, gateway: 10.9.2.1, router: r1}
vms:
  - {name: web1, host: hv1, nics: [{portgroup: web, ip: 10.78.0.1/24, mac: "02:00:00:00:78:01"}]}
  - {name: oth1, host: hv1, nics: [{portgroup: other, ip: 10.78.0.11/24, mac: "02:00:00:00:78:11"}]}
  - {name: app1, host: hv2, nics: [{portgroup: app, ip: 10.78.0.2/24, mac: "02:00:00:00:78:02"}]}
  - {name: oth2, host: hv2, nics: [{portgroup: other, ip: 10.78.0.12/24, mac: "02:00:00:00:78:12"}]}
  - {name: na1, host: hv1, nics: [{network: n-a, ip: 10.9.1.11/24, mac: "02:00:00:00:91:11"}]}
  - {name: na2, host: hv2, nics: [{network: n-a, ip: 10.9.1.12/24, mac: "02:00:00:00:91:12"}]}
  - {name: nb2, host: hv2, nics: [{network: n-b, ip: 10.9.2.12/24, mac: "02:00:00:00:92:12"}]}
`

// attachedVMs are a QEMU guest's TAP and a container's namespace on hv1,
// on port group app (%s: the container's namespace).
const attachedVMs = `  - {name: g1, host: hv1, nics: [{portgroup: app, attach: {tap: tap-g1}, mac: "52:54:00:00:78:21", ip: 10.78.0.21/24}]}
  - {name: box1, host: hv1, nics: [{portgroup: app, attach: {netns: %s}, mac: "02:00:00:00:78:22", ip: 10.78.0.22/24}]}
`

// app2 joins port group app on hv2, after web1's policy on hv1 was made.
const addApp2 = `  - {name: app2, host: hv2, nics: [{portgroup: app, ip: 10.78.0.3/24, mac: "02:00:00:00:78:03"}]}
`

const metricsAddr = "127.0.0.1:9472"

// statusCounters reads the counters vnet status --etcd -o json shows, by
// "host port counter", with the text they came from.
func statusCounters(t *testing.T, c *Cluster, infra string) (map[string]uint64, string) {
	t.Helper()
	out, err := c.Vnet("status", infra, "-o", "json")
	if err != nil {
		return nil, out
	}
	var got []struct {
		Hosts []etcdstore.HostView `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	counts := map[string]uint64{}
	for _, v := range got[0].Hosts {
		if v.Report == nil {
			continue
		}
		for _, p := range v.Report.Security {
			for label, n := range p.Counters {
				counts[v.Host+" "+p.Port+" "+label] = n
			}
		}
	}
	return counts, out
}

// securityCounters reads an agent's vnet_port_security_packets_total, by
// "vm counter".
func securityCounters(t *testing.T, m *Machine) map[string]float64 {
	t.Helper()
	code, text := getIn(t, m.NS, "http://"+metricsAddr+"/metrics")
	if code != 200 {
		t.Fatalf("%s /metrics: %d %s", m.Host, code, text)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse %s's metrics: %v", m.Host, err)
	}
	out := map[string]float64{}
	for _, mt := range fams["vnet_port_security_packets_total"].GetMetric() {
		var vm, counter string
		for _, l := range mt.GetLabel() {
			switch l.GetName() {
			case "vm":
				vm = l.GetValue()
			case "counter":
				counter = l.GetValue()
			}
		}
		out[vm+" "+counter] = mt.GetCounter().GetValue()
	}
	return out
}

// nftTables lists the nftables tables in a machine's namespace.
func nftTables(t *testing.T, m *Machine) []string {
	t.Helper()
	var names []string
	err := inNS(m.NS, func() error {
		conn, err := nftables.New()
		if err != nil {
			return err
		}
		tables, err := conn.ListTables()
		for _, tb := range tables {
			names = append(names, tb.Name)
		}
		return err
	})
	if err != nil {
		t.Fatalf("nft list tables in %s: %v", m.NS, err)
	}
	return names
}

// denied checks that a TCP connection from one namespace to a listener in
// another times out: its packets are dropped, not refused.
func denied(t *testing.T, fromNS, toNS, ip string) {
	t.Helper()
	var l net.Listener
	if err := inNS(toNS, func() (err error) { l, err = net.Listen("tcp", ":7778"); return }); err != nil {
		t.Fatalf("listen in %s: %v", toNS, err)
	}
	defer l.Close()
	go func() {
		if conn, err := l.Accept(); err == nil {
			conn.Close()
		}
	}()
	err := inNS(fromNS, func() error {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "7778"), time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	})
	var ne net.Error
	switch {
	case err == nil:
		t.Errorf("tcp %s -> %s (%s) connected; the ACL should drop it", fromNS, ip, toNS)
	case !errors.As(err, &ne) || !ne.Timeout():
		t.Errorf("tcp %s -> %s: %v, want a timeout (dropped)", fromNS, ip, err)
	}
}

// TestClusterPortSecurityAndACLs runs port security and ACLs of port groups
// and networks through the host agents of two machines: forged MACs and
// spoofed addresses are dropped at the sender's host and counted while
// legitimate traffic passes; an ACL admits TCP from its peer port group's
// VMs on the other host and no one else's, counting per rule; a VM that
// joins the peer group on the other host is let in after the agents'
// passes; a network's ACL admits its own VMs and not a routed VM of
// another network. A restarted agent finds nothing to change.
func TestClusterPortSecurityAndACLs(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds vnet and runs a cluster of machines")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("SKIPPED: needs nsenter (util-linux)")
	}
	c := New(t, sharedBin(t), "hv1", "hv2")
	hv1, hv2 := c.Machine("hv1"), c.Machine("hv2")
	for _, m := range c.Machines {
		m.StartAgent("--interval", "30s", "--metrics-addr", metricsAddr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent of hv1:\n%s\nagent of hv2:\n%s", hv1.AgentLog(), hv2.AgentLog())
		}
	})
	infra := c.Infra()
	ns := func(vm string) string { return plan.NSName(infra, vm) }
	// A TAP and a container's namespace on hv1, as libvirt and a container
	// runtime make them.
	nstest.AddTap(t, hv1.NS, "tap-g1")
	box := c.Prefix + "-box1"
	c.ip("netns", "add", box)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", box).Run() })
	spec := securitySpec + fmt.Sprintf(attachedVMs, box)
	applySpec(t, c, infra, c.Spec(infra, spec))
	waitConverged(t, c, infra, 1, 30*time.Second)
	for vm, gw := range map[string]string{"na1": "10.9.1.1", "na2": "10.9.1.1", "nb2": "10.9.2.1"} {
		if out, err := exec.Command("ip", "-n", ns(vm), "route", "add", "default", "via", gw).CombinedOutput(); err != nil {
			t.Fatalf("route in %s: %v\n%s", vm, err, out)
		}
	}

	// What the agents made reads back as planned: a restarted agent
	// changes nothing (tables, port policies, br_netfilter's settings).
	hv1.KillAgent()
	logBefore := len(hv1.AgentLog())
	hv1.StartAgent("--interval", "30s", "--metrics-addr", metricsAddr)
	time.Sleep(2 * time.Second)
	if after := hv1.AgentLog()[logBefore:]; strings.Contains(after, "applied") || strings.Contains(after, "error") {
		t.Errorf("restarted agent changed something:\n%s", after)
	}

	const bcast = "ff:ff:ff:ff:ff:ff"
	// Forging from app1 (hv2) and na2 (hv2): a forged source MAC and a
	// spoofed IPv4 source are dropped on hv2, legitimate broadcasts around
	// them reach oth1 and na1 on hv1. The same from the QEMU guest's TAP
	// and the container on hv1, to oth2 on hv2.
	const n = 20
	attSeen := countFrames(t, ns("oth2"), "eth0", "TAP-LEGIT", "TAP-FORGED-MAC", "TAP-SPOOFED-IP", "BOX-LEGIT", "BOX-FORGED-MAC", "BOX-SPOOFED-IP")
	// QEMU opens the TAP: its carrier comes up, and the bridge forwards
	// from it once the kernel has noted that (link events are deferred).
	tap := nstest.OpenTap(t, hv1.NS, "tap-g1")
	waitFor(t, 5*time.Second, "tap-g1 forwarding", func() (bool, string) {
		out, _ := hv1.Exec("bridge", "link", "show", "dev", "tap-g1")
		return strings.Contains(out, "state forwarding"), out
	})
	for i := 0; i < n; i++ {
		for _, f := range [][]byte{
			ethFrame(bcast, "52:54:00:00:78:21", unix.ETH_P_IP, ipv4UDP("10.78.0.21", "10.78.0.255", 4000, 4000, []byte("TAP-LEGIT"))),
			ethFrame(bcast, "52:54:00:00:78:99", unix.ETH_P_IP, ipv4UDP("10.78.0.21", "10.78.0.255", 4000, 4000, []byte("TAP-FORGED-MAC"))),
			ethFrame(bcast, "52:54:00:00:78:21", unix.ETH_P_IP, ipv4UDP("10.78.0.98", "10.78.0.255", 4000, 4000, []byte("TAP-SPOOFED-IP"))),
		} {
			if _, err := tap.Write(f); err != nil {
				t.Fatalf("write to tap-g1: %v", err)
			}
		}
	}
	sendFrames(t, box, "eth0", n,
		ethFrame(bcast, "02:00:00:00:78:22", unix.ETH_P_IP, ipv4UDP("10.78.0.22", "10.78.0.255", 4000, 4000, []byte("BOX-LEGIT"))),
		ethFrame(bcast, "02:00:00:00:78:98", unix.ETH_P_IP, ipv4UDP("10.78.0.22", "10.78.0.255", 4000, 4000, []byte("BOX-FORGED-MAC"))),
		ethFrame(bcast, "02:00:00:00:78:22", unix.ETH_P_IP, ipv4UDP("10.78.0.97", "10.78.0.255", 4000, 4000, []byte("BOX-SPOOFED-IP"))))
	pgSeen := countFrames(t, ns("oth1"), "eth0", "PG-LEGIT", "PG-FORGED-MAC", "PG-SPOOFED-IP")
	netSeen := countFrames(t, ns("na1"), "eth0", "NET-LEGIT", "NET-FORGED-MAC", "NET-SPOOFED-IP")
	sendFrames(t, ns("app1"), "eth0", n,
		ethFrame(bcast, "02:00:00:00:78:02", unix.ETH_P_IP, ipv4UDP("10.78.0.2", "10.78.0.255", 4000, 4000, []byte("PG-LEGIT"))),
		ethFrame(bcast, "02:00:00:00:78:99", unix.ETH_P_IP, ipv4UDP("10.78.0.2", "10.78.0.255", 4000, 4000, []byte("PG-FORGED-MAC"))),
		ethFrame(bcast, "02:00:00:00:78:02", unix.ETH_P_IP, ipv4UDP("10.78.0.99", "10.78.0.255", 4000, 4000, []byte("PG-SPOOFED-IP"))))
	sendFrames(t, ns("na2"), "eth0", n,
		ethFrame(bcast, "02:00:00:00:91:12", unix.ETH_P_IP, ipv4UDP("10.9.1.12", "10.9.1.255", 4000, 4000, []byte("NET-LEGIT"))),
		ethFrame(bcast, "02:00:00:00:91:99", unix.ETH_P_IP, ipv4UDP("10.9.1.12", "10.9.1.255", 4000, 4000, []byte("NET-FORGED-MAC"))),
		ethFrame(bcast, "02:00:00:00:91:12", unix.ETH_P_IP, ipv4UDP("10.9.1.99", "10.9.1.255", 4000, 4000, []byte("NET-SPOOFED-IP"))))
	time.Sleep(500 * time.Millisecond)
	for _, c := range []struct {
		fc        *frameCounter
		tag       string
		atLeast   int
		wantExact bool
	}{
		{pgSeen, "PG-LEGIT", n, false}, {pgSeen, "PG-FORGED-MAC", 0, true}, {pgSeen, "PG-SPOOFED-IP", 0, true},
		{netSeen, "NET-LEGIT", n, false}, {netSeen, "NET-FORGED-MAC", 0, true}, {netSeen, "NET-SPOOFED-IP", 0, true},
		{attSeen, "TAP-LEGIT", n, false}, {attSeen, "TAP-FORGED-MAC", 0, true}, {attSeen, "TAP-SPOOFED-IP", 0, true},
		{attSeen, "BOX-LEGIT", n, false}, {attSeen, "BOX-FORGED-MAC", 0, true}, {attSeen, "BOX-SPOOFED-IP", 0, true},
	} {
		got := c.fc.Tagged(c.tag)
		if c.wantExact && got != c.atLeast || !c.wantExact && got < c.atLeast {
			t.Errorf("%s: %d received on the other host, want %d", c.tag, got, c.atLeast)
		}
	}
	sec1 := securityCounters(t, hv1)
	for _, k := range []string{"g1 forged-mac", "g1 ip-spoof", "box1 forged-mac", "box1 ip-spoof"} {
		if sec1[k] < n {
			t.Errorf("hv1's metrics count %v for %s, want at least %d", sec1[k], k, n)
		}
	}
	sec2 := securityCounters(t, hv2)
	for _, k := range []string{"app1 forged-mac", "app1 ip-spoof", "na2 forged-mac", "na2 ip-spoof"} {
		if sec2[k] < n {
			t.Errorf("hv2's metrics count %v for %s, want at least %d", sec2[k], k, n)
		}
	}

	// The ACL of web across hosts: app1 (hv2) connects, oth2 (hv2) and
	// oth1 (hv1) do not; counted per rule on hv1.
	tcpTo(t, ns("app1"), ns("web1"), "10.78.0.1")
	denied(t, ns("oth2"), ns("web1"), "10.78.0.1")
	denied(t, ns("oth1"), ns("web1"), "10.78.0.1")
	sec1 = securityCounters(t, hv1)
	if sec1["web1 acl[0]"] < 1 || sec1["web1 acl-default"] < 2 {
		t.Errorf("hv1's metrics for web1: acl[0] %v (want >= 1), acl-default %v (want >= 2)", sec1["web1 acl[0]"], sec1["web1 acl-default"])
	}

	// The network's ACL: na2 (same network, hv2) connects; nb2 (network
	// n-b, routed by r1 on hv2) does not.
	tcpTo(t, ns("na2"), ns("na1"), "10.9.1.11")
	denied(t, ns("nb2"), ns("na1"), "10.9.1.11")
	sec1 = securityCounters(t, hv1)
	if sec1["na1 acl[0]"] < 1 || sec1["na1 acl-default"] < 1 {
		t.Errorf("hv1's metrics for na1: acl[0] %v, acl-default %v, want both >= 1", sec1["na1 acl[0]"], sec1["na1 acl-default"])
	}

	// vnet status --etcd shows the same counters, each under its host, as
	// the agents report them (every few seconds while they move).
	took := waitFor(t, 20*time.Second, "vnet status --etcd shows the counters", func() (bool, string) {
		got, text := statusCounters(t, c, infra)
		for _, k := range []string{"hv2 app1 eth0 forged-mac", "hv2 app1 eth0 ip-spoof", "hv2 na2 eth0 forged-mac",
			"hv1 g1 eth0 forged-mac", "hv1 box1 eth0 ip-spoof"} {
			if got[k] < n {
				return false, fmt.Sprintf("%s = %d:\n%s", k, got[k], text)
			}
		}
		if got["hv1 web1 eth0 acl[0]"] < 1 || got["hv1 web1 eth0 acl-default"] < 2 || got["hv1 na1 eth0 acl-default"] < 1 {
			return false, "web1's or na1's ACL counters:\n" + text
		}
		for k := range got {
			if strings.HasPrefix(k, "hv1 app1 ") || strings.HasPrefix(k, "hv2 web1 ") {
				return false, "a port under the wrong host: " + k
			}
		}
		return true, ""
	})
	t.Logf("counters in vnet status --etcd after %s", took.Round(time.Millisecond))
	out, err := c.Vnet("status", infra)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	_, hv2Table, _ := strings.Cut(out, "SECURITY PORT ON hv2")
	if !strings.Contains(out, "SECURITY PORT ON hv1") || !regexp.MustCompile(`app1 eth0 +app +mac, ip, ra, unicast +.*forged-mac \d+`).MatchString(hv2Table) {
		t.Errorf("vnet status --etcd lacks hv2's table with app1's drops:\n%s", out)
	}
	t.Logf("vnet status --etcd:\n%s", out)

	// A VM joins app on hv2: hv1's agent admits it to web1, changing
	// web1's policy in place.
	logBefore = len(hv1.AgentLog())
	applySpec(t, c, infra, c.Spec(infra, spec+addApp2))
	took = waitConverged(t, c, infra, 2, 30*time.Second)
	t.Logf("app2 added on hv2 -> both agents current: %s", took.Round(time.Millisecond))
	if pass := hv1.AgentLog()[logBefore:]; !strings.Contains(pass, "~ change port security on "+plan.VNICPortName(infra, "web1", 0)) ||
		!strings.Contains(pass, ",10.78.0.3") {
		t.Errorf("hv1's agent did not admit app2 to web1's port policy:\n%s", pass)
	}
	tcpTo(t, ns("app2"), ns("web1"), "10.78.0.1")

	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(leftovers(t, c, infra)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("30 s after destroy, left: %v", leftovers(t, c, infra))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, m := range c.Machines {
		if tables := nftTables(t, m); len(tables) > 0 {
			t.Errorf("%s keeps nftables tables %v after destroy", m.Host, tables)
		}
	}
}
