package clustertest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/service"
)

// Kubernetes' path on a cluster host: containerd's CRI plugin makes two
// pod sandboxes whose vNICs vnet-cni writes to the cluster's spec in
// etcd, and the host's agent realizes them before RunPodSandbox returns.
// The pods reach each other, the port group's ACL keeps a port closed,
// and stopping and removing the sandboxes takes the VMs out of the spec.
func TestContainerdCRIOverEtcd(t *testing.T) {
	nstest.RequireContainerd(t)
	loopback, err := exec.LookPath("/usr/lib/cni/loopback")
	if err != nil {
		t.Skip("SKIPPED: /usr/lib/cni/loopback missing: apt-get install containernetworking-plugins (CI installs it)")
	}
	c, hv1 := containerHost(t)
	infra := c.Infra()
	body := `switches:
  - name: dvs
    hosts: [hv1]
    portgroups:
      - name: pg-pods
        subnet: 10.78.0.0/24
        gateway: 10.78.0.1
        acl:
          rules:
            - {action: deny, direction: ingress, proto: tcp, dport: 8080, from: 0.0.0.0/0}
`
	if out, err := c.Vnet("apply", c.WriteSpec(infra, c.Spec(infra, body))); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitConverged(t, c, infra, 1, 30*time.Second)

	// The plugin runs in hv1's namespace, where etcd is reachable.
	plugins := map[string]string{"vnet-cni": cniOnMachine(t, c, hv1) + "/vnet-cni", "loopback": loopback}
	ctr := nstest.StartContainerd(t, plugins, fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "vnet-pods", "plugins": [
  {"type": "vnet-cni", "infra": %q, "portgroup": "pg-pods", "host": "hv1", "etcd": [%q], "wait": "30s",
   "stateDir": %q, "ipam": {"type": "vnet"}}]}`, infra, c.Etcd, t.TempDir()))

	start := time.Now()
	web := ctr.RunPod("shop", "web-0")
	t.Logf("a pod sandbox through etcd and hv1's agent: %s", time.Since(start).Round(time.Millisecond))
	db := ctr.RunPod("shop", "db-0")
	// Over etcd, vnet status tells the hosts' progress; the VMs are in the
	// cluster's spec.
	spec, err := c.Vnet("get", infra)
	if err != nil {
		t.Fatalf("get: %v\n%s", err, spec)
	}
	for _, name := range []string{service.ContainerVMName(web.ID, "shop", "web-0"), service.ContainerVMName(db.ID, "shop", "db-0")} {
		if !strings.Contains(spec, name) {
			t.Errorf("the cluster's spec lacks the pod's VM %s:\n%s", name, spec)
		}
	}
	nstest.PodsTalkBut(t, web, db, 8000, 8080)

	for _, p := range []nstest.Pod{web, db} {
		ctr.Must("stopp", p.ID)
		ctr.Must("rmp", p.ID)
	}
	if spec, err = c.Vnet("get", infra); err != nil {
		t.Fatalf("get: %v\n%s", err, spec)
	}
	if strings.Contains(spec, "p-shop-") {
		t.Errorf("after the sandboxes were removed, the spec still holds pods:\n%s", spec)
	}
}
