package clustertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
)

// cniOnMachine installs vnet-cni for libcni as a runtime on machine m
// finds it: a plugin that runs in the machine's network namespace, where
// the cluster's etcd is reachable.
func cniOnMachine(t *testing.T, c *Cluster, m *Machine) string {
	t.Helper()
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nexec nsenter --net=/run/netns/%s %s\n", m.NS, c.Bin)
	if err := os.WriteFile(filepath.Join(dir, "vnet-cni"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// containerHost is a cluster of one host, hv1, whose agent runs, for
// containers that vnet-cni attaches through etcd (see cniOnMachine).
func containerHost(t *testing.T) (*Cluster, *Machine) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds vnet and runs a cluster")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("SKIPPED: needs nsenter (util-linux)")
	}
	c := New(t, sharedBin(t), "hv1")
	hv1 := c.Machine("hv1")
	hv1.StartAgent("--interval", "30s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent of hv1:\n%s", hv1.AgentLog())
		}
	})
	return c, hv1
}

// A container on a cluster host, through libcni and the host's agent:
// ADD returns once the agent realized it, and a VM of the spec reaches
// it; CHECK passes; DEL (twice) takes it out; with the agent down, ADD
// fails within its wait, clearly, and leaves the spec as it was.
func TestCNIOverEtcd(t *testing.T) {
	nstest.RequireRoot(t)
	c, hv1 := containerHost(t)
	infra := c.Infra()
	body := `switches:
  - {name: dvs, hosts: [hv1], portgroups: [{name: pg-web, subnet: 10.79.0.0/24, gateway: 10.79.0.1}]}
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: pg-web, ip: 10.79.0.2/24}]}
`
	if out, err := c.Vnet("apply", c.WriteSpec(infra, c.Spec(infra, body))); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitConverged(t, c, infra, 1, 30*time.Second)

	cni := libcni.NewCNIConfigWithCacheDir([]string{cniOnMachine(t, c, hv1)}, t.TempDir(), nil)
	list, err := libcni.ConfListFromBytes([]byte(fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "web", "plugins": [
  {"type": "vnet-cni", "infra": %q, "portgroup": "pg-web", "host": "hv1", "etcd": [%q], "wait": "20s",
   "stateDir": %q, "ipam": {"type": "vnet"}}]}`, infra, c.Etcd, t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	ns := nstest.Machine(t, "ctr")
	rt := &libcni.RuntimeConf{ContainerID: "ctr-" + nstest.RunTag, NetNS: "/run/netns/" + ns, IfName: "eth0",
		Args: [][2]string{{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "web-0"}}}
	ctx := context.Background()
	start := time.Now()
	r, err := cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	t.Logf("ADD through etcd and hv1's agent: %s", time.Since(start).Round(time.Millisecond))
	res, err := current.NewResultFromResult(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IPs) != 1 {
		t.Fatalf("ADD gave %v", res.IPs)
	}
	addr := res.IPs[0].Address.IP.String()
	l := nstest.Listen(t, ns, addr+":5001")
	go func() {
		if conn, err := l.Accept(); err == nil {
			conn.Write([]byte("ok"))
			conn.Close()
		}
	}()
	conn, err := nstest.Dial(t, plan.NSName(infra, "vm1"), addr+":5001", net.Dialer{Timeout: 3 * time.Second})
	if err != nil {
		t.Errorf("vm1 does not reach the container at %s: %v", addr, err)
	} else {
		conn.Close()
	}
	if err := cni.CheckNetworkList(ctx, list, rt); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := cni.DelNetworkList(ctx, list, rt); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	waitFor(t, 20*time.Second, "hv1's agent takes the container's vNIC out", func() (bool, string) {
		links := containerLinks(t, ns)
		return len(links) == 0, strings.Join(links, ", ")
	})

	// The agent down: ADD fails within its wait and takes its change back.
	hv1.KillAgent()
	short, err := libcni.ConfListFromBytes([]byte(strings.Replace(string(list.Bytes), `"20s"`, `"3s"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = cni.AddNetworkList(ctx, short, rt)
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrTryAgainLater || !strings.Contains(te.Msg, "agent") {
		t.Errorf("ADD with hv1's agent down: %v, want code %d naming the agent", err, types.ErrTryAgainLater)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("ADD with the agent down took %s, its wait is 3s", took)
	}
	if out, err := c.Vnet("status", infra); err != nil || strings.Contains(out, "p-default-web-0") {
		t.Errorf("after the failed ADD the spec still holds the pod, or status failed (%v):\n%s", err, out)
	}
}

// containerLinks lists the links of a namespace but lo.
func containerLinks(t *testing.T, ns string) []string {
	var out []string
	nstest.InNS(t, ns, func(h *netlink.Handle) error {
		ls, err := h.LinkList()
		for _, l := range ls {
			if l.Attrs().Name != "lo" {
				out = append(out, l.Attrs().Name)
			}
		}
		return err
	})
	return out
}
