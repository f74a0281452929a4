package clustertest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
)

// tenant is the body of a spec with one network of the given VNI and a
// VM on each host, named vmOCTET-N: a VM's port on its host is named
// after the VM, so two infrastructures on one host name theirs apart.
func tenant(vni, octet int, hosts ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "networks: [{name: net, subnet: 10.%d.0.0/24, vni: %d}]\nvms:\n", octet, vni)
	for i, h := range hosts {
		fmt.Fprintf(&b, "  - {name: vm%d-%d, host: %s, nics: [{network: net, ip: 10.%d.0.%d/24}]}\n", octet, i+1, h, octet, 10+i)
	}
	return b.String()
}

// rawEtcd is a client of the cluster's etcd from the control namespace, to
// write what vnet never would.
func rawEtcd(t *testing.T, c *Cluster) *clientv3.Client {
	t.Helper()
	endpoint := strings.TrimPrefix(c.Etcd, "http://")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(_ context.Context, addr string) (net.Conn, error) {
			return nstest.Dial(t, c.Ctl, addr, net.Dialer{Timeout: 5 * time.Second})
		})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

type clusterEntry struct {
	Name      string      `json:"name"`
	Converged bool        `json:"converged"`
	Damaged   string      `json:"damaged"`
	Hosts     []hostState `json:"hosts"`
}

// statusAll is vnet status -o json of every infrastructure, by name.
func statusAll(t *testing.T, c *Cluster) map[string]clusterEntry {
	t.Helper()
	out := vnetOK(t, c, "status", "-o", "json")
	var all []clusterEntry
	if err := json.Unmarshal([]byte(out), &all); err != nil {
		t.Fatalf("status: %q: %v", out, err)
	}
	m := map[string]clusterEntry{}
	for _, e := range all {
		m[e.Name] = e
	}
	return m
}

// One damaged record in a cluster's etcd is its infrastructure's alone:
// every agent goes on converging the others (an apply --wait of another
// returns with every host current), vnet status shows it damaged beside
// the others, what stands of it stays, and applying its spec again
// repairs it. A second agent started for a host whose agent runs is
// refused, naming the running one, and once it stopped the host is still
// shown current, not gone.
func TestClusterDamagedRecordAndASecondAgent(t *testing.T) {
	c := faultCluster(t, 180*time.Second, "hv1", "hv2")
	hosts := []string{"hv1", "hv2"}
	good, bad := c.Infra()+"g", c.Infra()+"d"
	goodFile := c.WriteSpec(good, specOn(c, good, hosts, tenant(6101, 61, hosts...)))
	badFile := c.WriteSpec(bad, specOn(c, bad, hosts, tenant(6201, 62, hosts...)))
	vnetOK(t, c, "apply", goodFile, "--wait=60s")
	vnetOK(t, c, "apply", badFile, "--wait=60s")

	junk := make([]byte, 1024)
	rand.Read(junk)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rawEtcd(t, c).Put(ctx, "/vnet/infra/"+bad, string(junk)); err != nil {
		t.Fatal(err)
	}
	// The agents converge the other infrastructure, at every pass.
	goodFile = c.WriteSpec(good, specOn(c, good, hosts, tenant(6101, 61, hosts...)+
		"  - {name: vm61-9, host: hv2, nics: [{network: net, ip: 10.61.0.99/24}]}\n"))
	vnetOK(t, c, "apply", goodFile, "--wait=60s")
	all := statusAll(t, c)
	if !all[good].Converged || all[good].Damaged != "" {
		t.Errorf("status of the good infrastructure: %+v", all[good])
	}
	if d := all[bad].Damaged; !strings.Contains(d, "damaged") {
		t.Errorf("status of the damaged infrastructure: %+v", all[bad])
	}
	for _, vm := range []string{"vm62-1", "vm62-2"} {
		if !nsExists(plan.NSName(bad, vm)) {
			t.Errorf("%s of the damaged infrastructure is gone", vm)
		}
	}

	// A second agent for hv1, from hv2's machine, is refused.
	hv1 := c.Machine("hv1")
	cmd := c.command(c.Machine("hv2").NS, "agent", "host", "--etcd", c.Etcd, "--host", "hv1",
		"--state-dir", filepath.Join(t.TempDir(), "impostor"))
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("a second agent for hv1 ran:\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), "claimed") || !strings.Contains(string(out), "pid "+strconv.Itoa(hv1.agent.Process.Pid)) {
		t.Fatalf("a second agent for hv1: %v\n%s", err, out)
	}
	// Longer than a report outlives its agent: hv1 is current, not gone.
	time.Sleep(7 * time.Second)
	st, err := status(t, c, good)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.states()["hv1"]; s != "current" {
		t.Errorf("hv1 is %s after the second agent stopped", s)
	}

	// Applied again, the damaged one converges.
	vnetOK(t, c, "apply", badFile, "--wait=60s")
	if e := statusAll(t, c)[bad]; e.Damaged != "" || !e.Converged {
		t.Errorf("after its spec was applied again: %+v", e)
	}
}
