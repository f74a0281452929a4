package cni_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/service"
)

// Kubernetes' path, through the component kubelet talks to: containerd's
// CRI plugin makes two pod sandboxes (crictl runp, kubelet's
// RunPodSandbox) on a vnet port group. Each is a VM named for its pod,
// the pods reach each other, the port group's ACL keeps a port closed,
// and stopping and removing the sandboxes takes the VMs out and leaves
// nothing.
func TestContainerdCRIPods(t *testing.T) {
	nstest.RequireContainerd(t)
	dir := plugin(t)
	infra, state, svc := applied(t, "cri", closedPortInfra)
	// The CRI plugin sets up each sandbox's lo with Debian's loopback.
	plugins := map[string]string{"vnet-cni": filepath.Join(dir, "vnet-cni"), "loopback": filepath.Join(debianPlugins, "loopback")}
	c := nstest.StartContainerd(t, plugins, fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "vnet-pods", "plugins": [
  {"type": "vnet-cni", "infra": %q, "portgroup": "pg-web", "stateDir": %q, "ipam": {"type": "vnet"}}]}`, infra, state))
	ctx := context.Background()

	web := c.RunPod("shop", "web-0")
	db := c.RunPod("shop", "db-0")
	st, err := svc.Status(ctx, []string{infra})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]nstest.Pod{service.ContainerVMName(web.ID, "shop", "web-0"): web, service.ContainerVMName(db.ID, "shop", "db-0"): db}
	for _, vm := range st[0].VMs {
		p, ok := want[vm.Name]
		if !ok {
			t.Errorf("vnet status shows a VM %s that is no pod's", vm.Name)
			continue
		}
		delete(want, vm.Name)
		if vm.Namespace != p.NetNS || len(vm.NICs) != 1 || vm.NICs[0].State != "up" || vm.NICs[0].IP != p.IP+"/24" || vm.NICs[0].PortGroup != "pg-web" {
			t.Errorf("vnet status shows pod %s as %+v", p.ID, vm)
		}
	}
	if len(want) != 0 {
		t.Errorf("vnet status lacks the pods' VMs %v", want)
	}

	nstest.PodsTalkBut(t, web, db, 8000, 8080)

	for _, p := range []nstest.Pod{web, db} {
		c.Must("stopp", p.ID)
		c.Must("rmp", p.ID)
		if nstest.Exists(p.NetNS) {
			t.Errorf("pod %s's namespace %s outlived its removal", p.ID, p.NetNS)
		}
	}
	doc, err := svc.Spec(ctx, infra)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(doc.Spec.VMs); n != 0 {
		t.Errorf("after the sandboxes were removed, %d VMs are left: %+v", n, doc.Spec.VMs)
	}
	if pods := c.Must("pods", "--quiet"); pods != "" {
		t.Errorf("containerd still has sandboxes %q", pods)
	}
}
