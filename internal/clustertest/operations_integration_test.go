package clustertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
)

// A deliberate MTU mistake stored as generation 2 fails on every host (the
// underlay's MTU is 1500); a dry run then plans each host against the
// generation before, as its agent rolled back to it; vnet diff says what
// going back changes; and vnet rollback --wait stores generation 1's spec
// as generation 3, which every host realizes, and the VMs reach each other
// again; the history says so after etcd restarts.
func TestClusterRollbackAfterEveryHostFailed(t *testing.T) {
	c := faultCluster(t, 150*time.Second, "hv1", "hv2")
	infra := c.Infra()
	good := c.Spec(infra, switchOnTwo)
	file := c.WriteSpec(infra, good)
	vnetOK(t, c, "apply", file, "--wait=60s")

	mistake := c.WriteSpec(infra+"-mtu", strings.Replace(good, "mtu: 1450", "mtu: 9000", 1))
	out, err := c.Vnet("apply", mistake, "--wait=60s")
	t.Logf("apply of the MTU mistake:\n%s", out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "a host failed") || !strings.Contains(out, "MTU 9000") {
		t.Fatalf("apply of the MTU mistake: %v, want exit status 1 naming the MTU", err)
	}
	waitFor(t, 60*time.Second, "every host failed generation 2", func() (bool, string) {
		st, err := status(t, c, infra)
		return err == nil && st.Generation == 2 && st.states()["hv1"] == "failed" && st.states()["hv2"] == "failed", fmt.Sprint(st.states())
	})

	out = vnetOK(t, c, "apply", "--dry-run", file)
	t.Logf("dry run of the good spec:\n%s", out)
	for _, h := range []string{"hv1", "hv2"} {
		want := "plan for " + h + " (failed generation 2, which its agent rolled back: against generation 1's spec"
		if !strings.Contains(out, want) {
			t.Errorf("the dry run does not say %q", want)
		}
	}
	if strings.Contains(out, "+ create") || strings.Contains(out, "~ change") {
		t.Errorf("the dry run of what the hosts hold plans changes")
	}

	out, err = c.Vnet("diff", infra, "--to", "1", "--plan")
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "~ switch dvs: mtu 9000 -> 1450") {
		t.Errorf("diff --to 1: %v, want exit status 1 and the MTU going back:\n%s", err, out)
	}

	out = vnetOK(t, c, "rollback", infra, "--wait=60s")
	t.Logf("rollback --wait:\n%s", out)
	for _, want := range []string{"rolled back " + infra + " to generation 1 as generation 3", "hv1 current at generation 3",
		"hv2 current at generation 3", infra + " generation 3: 2 hosts current"} {
		if !strings.Contains(out, want) {
			t.Errorf("rollback --wait does not say %q", want)
		}
	}
	tcpTo(t, plan.NSName(infra, "vm1"), plan.NSName(infra, "vm2"), "10.77.0.2")

	out = vnetOK(t, c, "describe", infra, "vm", "vm2")
	t.Logf("describe vm vm2:\n%s", out)
	if !strings.Contains(out, "vm vm2 of "+infra) || !strings.Contains(out, "host: hv2") {
		t.Errorf("describe vm vm2 does not name it and its host")
	}

	// The history is etcd's: it is there after etcd restarts.
	c.StopServer()
	c.StartServer()
	var h struct {
		Current int `json:"current"`
		Entries []struct {
			Verb       string `json:"verb"`
			Generation int    `json:"generation"`
			From       int    `json:"from"`
			Who        string `json:"who"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(vnetOK(t, c, "history", infra, "-o", "json")), &h); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range h.Entries {
		got = append(got, fmt.Sprintf("%s:%d:%d", e.Verb, e.Generation, e.From))
	}
	if strings.Join(got, " ") != "apply:1:0 apply:2:0 rollback:3:1" || h.Current != 3 || !strings.Contains(h.Entries[2].Who, "@") {
		t.Errorf("history %v (current %d), want apply 1, apply 2, rollback 3 from 1, by user@host", got, h.Current)
	}
}

// withBlue is switchOnTwo with a virtual network whose VNI is left to vnet,
// a VM on it on each host.
const withBlue = switchOnTwo + `  - {name: b1, host: hv1, nics: [{network: blue, ip: 10.88.0.1/24}]}
  - {name: b2, host: hv2, nics: [{network: blue, ip: 10.88.0.2/24}]}
networks:
  - {name: blue, subnet: 10.88.0.0/24}
`

// A snapshot taken from the cluster's etcd restores into another etcd (the
// cluster's server started afresh on an empty data directory, the agents
// restarted against it) with the same VNIs, MACs and addresses in every
// host's kernel, and the VMs reach each other.
func TestClusterSnapshotRestoreIntoAnotherEtcd(t *testing.T) {
	c := faultCluster(t, 180*time.Second, "hv1", "hv2")
	infra := c.Infra()
	vnetOK(t, c, "apply", c.WriteSpec(infra, c.Spec(infra, withBlue)), "--wait=60s")
	before := kernelAllocations(t, c, infra)
	t.Logf("in the kernel before: %+v", before)
	snap := c.WriteSpec(infra+"-snap", "")
	out := vnetOK(t, c, "snapshot", "--force", infra, snap)
	if !strings.Contains(out, "(2 VNIs, 4 MACs pinned)") {
		t.Errorf("snapshot: %s", out)
	}
	vnetOK(t, c, "destroy", infra, "--wait=60s")

	for _, m := range c.Machines {
		m.KillAgent()
	}
	c.ReplaceEtcd()
	for _, m := range c.Machines {
		m.StartAgent("--interval", "30s")
	}
	if out, err := c.Vnet("history", infra); err == nil {
		t.Fatalf("the new etcd knows the infrastructure:\n%s", out)
	}
	out = vnetOK(t, c, "restore", snap, "--wait=60s")
	t.Logf("restore --wait:\n%s", out)
	if !strings.Contains(out, "restored "+infra+" from its generation 1") || !strings.Contains(out, infra+" generation 1: 2 hosts current") {
		t.Errorf("restore --wait:\n%s", out)
	}
	after := kernelAllocations(t, c, infra)
	if !slices.Equal(before.vnis, after.vnis) || !slices.Equal(before.links, after.links) {
		t.Errorf("restored with other VNIs, MACs or addresses:\nbefore %+v\nafter  %+v", before, after)
	}
	tcpTo(t, plan.NSName(infra, "b1"), plan.NSName(infra, "b2"), "10.88.0.2")
	tcpTo(t, plan.NSName(infra, "vm2"), plan.NSName(infra, "vm1"), "10.77.0.1")
	out = vnetOK(t, c, "history", infra)
	if !strings.Contains(out, "restore") || strings.Contains(out, "apply") {
		t.Errorf("the new etcd's history:\n%s", out)
	}
	// Restored again where it exists: refused, nothing changed.
	if out, err := c.Vnet("restore", snap); err == nil || !strings.Contains(out, "exists already") {
		t.Errorf("a second restore: %v\n%s", err, out)
	}
}

// allocations are what the kernel holds of an infrastructure's
// allocations: the VXLAN ids on hv1, and each VM's vNICs' MACs and
// addresses.
type allocations struct {
	vnis  []string
	links []string
}

var (
	vxlanID  = regexp.MustCompile(`vxlan id (\d+)`)
	linkAddr = regexp.MustCompile(`link/ether ([0-9a-f:]+)`)
	inetAddr = regexp.MustCompile(`inet (\S+)`)
)

func kernelAllocations(t *testing.T, c *Cluster, infra string) allocations {
	t.Helper()
	var a allocations
	out, err := c.Machine("hv1").Exec("ip", "-d", "-o", "link", "show", "type", "vxlan")
	if err != nil {
		t.Fatalf("vxlan links on hv1: %v\n%s", err, out)
	}
	for _, m := range vxlanID.FindAllStringSubmatch(out, -1) {
		a.vnis = append(a.vnis, m[1])
	}
	for _, vm := range []string{"vm1", "vm2", "b1", "b2"} {
		link, err := exec.Command("ip", "-n", plan.NSName(infra, vm), "-o", "link", "show", "eth0").Output()
		if err != nil {
			t.Fatalf("%s eth0: %v", vm, err)
		}
		addr, _ := exec.Command("ip", "-n", plan.NSName(infra, vm), "-o", "-4", "addr", "show", "eth0").Output()
		mac, ip := linkAddr.FindStringSubmatch(string(link)), inetAddr.FindStringSubmatch(string(addr))
		if mac == nil || ip == nil {
			t.Fatalf("%s eth0: %s %s", vm, link, addr)
		}
		a.links = append(a.links, vm+" "+mac[1]+" "+ip[1])
	}
	slices.Sort(a.vnis)
	return a
}
