package clustertest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
)

// switchOnTwo is switchAndVMs without hv3.
const switchOnTwo = `switches:
  - name: dvs
    hosts: [hv1, hv2]
    mtu: 1450
    portgroups:
      - name: app
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: app, ip: 10.77.0.1/24}]}
  - {name: vm2, host: hv2, nics: [{portgroup: app, ip: 10.77.0.2/24}]}
`

const switchAndVMs = `switches:
  - name: dvs
    hosts: [hv1, hv2, hv3]
    mtu: 1450
    portgroups:
      - name: app
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: app, ip: 10.77.0.1/24}]}
  - {name: vm2, host: hv2, nics: [{portgroup: app, ip: 10.77.0.2/24}]}
  - {name: vm3, host: hv3, nics: [{portgroup: app, ip: 10.77.0.3/24}]}
`

const addVM4 = `  - {name: vm4, host: hv2, nics: [{portgroup: app, ip: 10.77.0.4/24}]}
`

// waitConverged polls vnet status until every host reports the generation,
// and returns how long that took.
func waitConverged(t *testing.T, c *Cluster, infra string, gen int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < limit {
		out, err := c.Vnet("status", infra, "-o", "json")
		last = out
		if err == nil {
			var got []struct {
				Generation int  `json:"generation"`
				Converged  bool `json:"converged"`
			}
			if json.Unmarshal([]byte(out), &got) == nil && len(got) == 1 && got[0].Generation == gen && got[0].Converged {
				return time.Since(start)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s generation %d not current on every host within %s:\n%s", infra, gen, limit, last)
	return 0
}

// ping checks that a VM reaches another's echo (see echo) and back.
func ping(t *testing.T, infra, from, to string) {
	t.Helper()
	if sent, got := udpPing(t, plan.NSName(infra, from), to, 100*time.Millisecond, 3); got == 0 {
		t.Fatalf("ping %s from %s: %d sent, none answered", to, from, sent)
	}
}

// tcp sends a line from one VM to another over TCP and reads it back.
func tcp(t *testing.T, infra, from, to string) {
	t.Helper()
	tcpTo(t, plan.NSName(infra, from), plan.NSName(infra, to), to2ip(to))
}

func to2ip(vm string) string { return "10.77.0." + strings.TrimPrefix(vm, "vm") }

// ifindex is a link's index in a namespace: the same index after a restart
// means the link was not made again.
func ifindex(t *testing.T, ns, link string) int {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", link).Output()
	if err != nil {
		t.Fatalf("ip -n %s link show %s: %v", ns, link, err)
	}
	n, _ := strconv.Atoi(strings.SplitN(string(out), ":", 2)[0])
	return n
}

// hostIndexes are the ifindexes of one host's tunnel endpoint and switch
// bridge and of one of its VMs' vNIC: an object made again gets a new one.
func hostIndexes(t *testing.T, hostNS, infra, vm string) map[string]int {
	t.Helper()
	return map[string]int{
		"vtep":   ifindex(t, hostNS, plan.VTEPName(infra, "dvs")),
		"bridge": ifindex(t, hostNS, plan.HostBridgeName(infra, "dvs")),
		"vnic":   ifindex(t, plan.NSName(infra, vm), "eth0"),
	}
}

// remade names the objects of hostIndexes whose ifindex changed.
func remade(before, now map[string]int) []string {
	var out []string
	for what, idx := range before {
		if now[what] != idx {
			out = append(out, fmt.Sprintf("%s (ifindex %d -> %d)", what, idx, now[what]))
		}
	}
	sort.Strings(out)
	return out
}

func TestClusterOverVXLAN(t *testing.T) {
	nstest.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds vnet and runs a three-machine cluster")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("SKIPPED: needs nsenter (util-linux)")
	}
	bin := Build(t)
	c := New(t, bin, "hv1", "hv2", "hv3")
	infra := c.Infra()
	for _, m := range c.Machines {
		m.StartAgent("--interval", "30s")
	}
	specFile := c.WriteSpec(infra, c.Spec(infra, switchAndVMs))
	if out, err := c.Vnet("apply", specFile); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	took := waitConverged(t, c, infra, 1, 30*time.Second)
	t.Logf("apply -> every agent reports generation 1: %s", took.Round(time.Millisecond))
	for _, vm := range []string{"vm1", "vm2", "vm3"} {
		echo(t, plan.NSName(infra, vm))
	}

	ping(t, infra, "vm1", "10.77.0.2")
	ping(t, infra, "vm1", "10.77.0.3")
	ping(t, infra, "vm3", "10.77.0.2")
	tcp(t, infra, "vm1", "vm2")
	tcp(t, infra, "vm3", "vm1")

	// Kill hv1's agent under a 10 ms ping from vm1 (on hv1) to vm2, and
	// start it again: nothing may be lost or made again.
	hv1 := c.Machine("hv1")
	vtep := plan.VTEPName(infra, "dvs")
	before := hostIndexes(t, hv1.NS, infra, "vm1")
	type result struct{ sent, got int }
	pinged := make(chan result, 1)
	go func() {
		sent, got := udpPing(t, plan.NSName(infra, "vm1"), "10.77.0.2", 10*time.Millisecond, 400)
		pinged <- result{sent, got}
	}()
	time.Sleep(time.Second)
	logBefore := len(hv1.AgentLog())
	hv1.KillAgent()
	time.Sleep(time.Second)
	restart := time.Now()
	hv1.StartAgent("--interval", "30s")
	waitConverged(t, c, infra, 1, 30*time.Second)
	// The killed agent's report outlives it by its lease's TTL, so this
	// shows the restart disturbed nothing, not how fast it reported.
	t.Logf("status current again %s after the restart", time.Since(restart).Round(time.Millisecond))
	r := <-pinged
	t.Logf("datagram every 10 ms vm1 (hv1) -> vm2 (hv2) and back, across the kill and restart: %d sent, %d answered", r.sent, r.got)
	if r.sent != r.got {
		t.Errorf("lost %d of %d across an agent kill", r.sent-r.got, r.sent)
	}
	for _, what := range remade(before, hostIndexes(t, hv1.NS, infra, "vm1")) {
		t.Errorf("%s was made again by the restarted agent", what)
	}
	if after := hv1.AgentLog()[logBefore:]; strings.Contains(after, "applied") {
		t.Errorf("restarted agent changed something:\n%s", after)
	}

	// A new VM on hv2 reaches hv2 and the others learn where it is.
	specFile = c.WriteSpec(infra, c.Spec(infra, switchAndVMs+addVM4))
	start := time.Now()
	if out, err := c.Vnet("apply", specFile); err != nil {
		t.Fatalf("apply with vm4: %v\n%s", err, out)
	}
	took = waitConverged(t, c, infra, 2, 30*time.Second)
	t.Logf("apply of generation 2 -> every agent reports it: %s (since before the apply: %s)", took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	echo(t, plan.NSName(infra, "vm4"))
	ping(t, infra, "vm1", "10.77.0.4")
	ping(t, infra, "vm3", "10.77.0.4")
	if out, _ := hv1.Exec("bridge", "fdb", "show", "dev", vtep); !strings.Contains(out, plan.StableMAC(infra, "vnic/vm4/0")) {
		t.Errorf("hv1's tunnel has no entry for vm4:\n%s", out)
	}

	// Destroy: every agent removes its part.
	if out, err := c.Vnet("destroy", infra); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := leftovers(t, c, infra)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after destroy, left: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("destroy emptied every host")
}

// leftovers lists the infrastructure's namespaces and the links of vnet
// left in the machines.
func leftovers(t *testing.T, c *Cluster, infra string) []string {
	var left []string
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, plan.InfraNSPrefix(infra)) {
			left = append(left, strings.Fields(line)[0])
		}
	}
	for _, m := range c.Machines {
		out, _ := exec.Command("ip", "-n", m.NS, "-o", "link", "show").Output()
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "alias vnet:") {
				left = append(left, m.Host+": "+line)
			}
		}
	}
	return left
}
