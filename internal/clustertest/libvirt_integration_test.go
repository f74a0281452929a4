package clustertest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/service"
)

// guestDomain is a domain's XML as libvirt passes it to its QEMU hooks on
// standard input, asking vnet for its TAP through a cluster's etcd.
const guestDomain = `<domain type='qemu'>
  <name>guest1</name>
  <uuid>0c1d2e3f-0000-4000-8000-00000000e7cd</uuid>
  <metadata>
    <vnet:vnet xmlns:vnet='https://github.com/vnet-project/vnet/libvirt' infra='%s' host='hv1' etcd='%s' wait='%s' stateDir='%s'>
      <vnet:interface dev='tap-g1' portgroup='pg-web'/>
    </vnet:vnet>
  </metadata>
  <devices>
    <interface type='ethernet'>
      <mac address='52:54:00:79:00:09'/>
      <target dev='tap-g1'/>
      <model type='virtio'/>
    </interface>
  </devices>
</domain>
`

// hook runs vnet as libvirtd runs its QEMU hooks: from a qemu.d directory
// (vnet linked there), in the machine's namespace, with the domain's name,
// the operation, its sub-operation and "-" as arguments and the domain's
// XML on standard input. It returns the exit status and standard error.
func hook(t *testing.T, c *Cluster, m *Machine, op, sub, xml string) (int, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "qemu.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "vnet")
	if err := os.Symlink(c.Bin, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nsenter", "--net=/run/netns/"+m.NS, link, "guest1", op, sub, "-")
	cmd.Stdin = strings.NewReader(xml)
	// libvirtd runs hooks with little of its environment.
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String()
	} else if err != nil {
		t.Fatalf("run the hook: %v", err)
	}
	return 0, stderr.String()
}

// A libvirt domain on a cluster host, through vnet's QEMU hook and the
// host's agent: "started" returns once the agent made the domain's TAP a
// port of the port group's switch, and the domain is a VM of the
// infrastructure; after QEMU is gone (its TAP with it), "stopped" and
// "release" take the VM out and the agent keeps no record of the TAP.
// With the agent down, "started" fails within its wait, naming the agent,
// and leaves the spec as it was.
func TestLibvirtHookOverEtcd(t *testing.T) {
	nstest.RequireRoot(t)
	c, hv1 := containerHost(t)
	infra := c.Infra()
	body := `switches:
  - {name: dvs, hosts: [hv1], portgroups: [{name: pg-web, subnet: 10.79.0.0/24}]}
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: pg-web, ip: 10.79.0.2/24}]}
`
	if out, err := c.Vnet("apply", c.WriteSpec(infra, c.Spec(infra, body))); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitConverged(t, c, infra, 1, 30*time.Second)
	vm := service.GuestVMName("guest1")
	domain := func(wait string) string { return fmt.Sprintf(guestDomain, infra, c.Etcd, wait, t.TempDir()) }

	// libvirt makes the TAP and QEMU opens it before "started".
	nstest.AddTap(t, hv1.NS, "tap-g1")
	tap := nstest.OpenTap(t, hv1.NS, "tap-g1")
	start := time.Now()
	if code, stderr := hook(t, c, hv1, "started", "begin", domain("20s")); code != 0 {
		t.Fatalf("started: exit %d: %s", code, stderr)
	}
	t.Logf("started through etcd and hv1's agent: %s", time.Since(start).Round(time.Millisecond))
	if !hasVM(t, c, infra, vm) {
		t.Errorf("the spec has no VM %s for the started domain", vm)
	}
	// The agent reported the change realized: the TAP is a forwarding
	// port of the switch, marked as vnet's.
	if out, err := hv1.Exec("bridge", "link", "show", "dev", "tap-g1"); err != nil || !strings.Contains(out, "master") {
		t.Errorf("tap-g1 is no port of a bridge once started returned (%v):\n%s", err, out)
	}
	waitFor(t, 5*time.Second, "tap-g1 forwarding", func() (bool, string) {
		out, _ := hv1.Exec("bridge", "link", "show", "dev", "tap-g1")
		return strings.Contains(out, "state forwarding"), out
	})
	nstest.InNS(t, hv1.NS, func(h *netlink.Handle) error {
		link, err := h.LinkByName("tap-g1")
		if err == nil && !strings.HasPrefix(link.Attrs().Alias, plan.AliasPrefix) {
			t.Errorf("tap-g1's alias %q is not vnet's", link.Attrs().Alias)
		}
		return err
	})
	// A second "started" (libvirtd restarted, reconnecting) changes nothing.
	if code, stderr := hook(t, c, hv1, "started", "begin", domain("20s")); code != 0 {
		t.Errorf("started again: exit %d: %s", code, stderr)
	}

	// virsh destroy: QEMU exits and its TAP goes, then libvirt runs
	// "stopped" and "release" with the domain's XML.
	tap.Close()
	nstest.InNS(t, hv1.NS, func(h *netlink.Handle) error {
		link, err := h.LinkByName("tap-g1")
		if err != nil {
			return err
		}
		return h.LinkDel(link)
	})
	for _, op := range []string{"stopped", "release"} {
		if code, stderr := hook(t, c, hv1, op, "end", domain("20s")); code != 0 {
			t.Fatalf("%s: exit %d: %s", op, code, stderr)
		}
	}
	if hasVM(t, c, infra, vm) {
		t.Errorf("after stopped the spec still has %s", vm)
	}
	records := filepath.Join(c.dir, "state-hv1", "hostagent", "devices")
	waitFor(t, 20*time.Second, "hv1's agent forgets the TAP", func() (bool, string) {
		var left []string
		_ = filepath.WalkDir(records, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				left = append(left, path)
			}
			return nil
		})
		return len(left) == 0, strings.Join(left, ", ")
	})

	// The agent down: "started" fails within its wait, naming the agent,
	// and takes its change back; libvirt then stops the domain.
	hv1.KillAgent()
	nstest.AddTap(t, hv1.NS, "tap-g1")
	start = time.Now()
	code, stderr := hook(t, c, hv1, "started", "begin", domain("3s"))
	if code != 1 || !strings.Contains(stderr, "agent") {
		t.Errorf("started with hv1's agent down: exit %d, %q; want exit 1 naming the agent", code, stderr)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("started with the agent down took %s, its wait is 3s", took)
	}
	if hasVM(t, c, infra, vm) {
		t.Errorf("after the failed start the spec still holds %s", vm)
	}
}

// hasVM reports whether the cluster's stored spec of infra has the VM,
// as vnet get prints it.
func hasVM(t *testing.T, c *Cluster, infra, vm string) bool {
	t.Helper()
	out, err := c.Vnet("get", infra)
	if err != nil {
		t.Fatalf("vnet get %s: %v\n%s", infra, err, out)
	}
	return strings.Contains(out, vm)
}
