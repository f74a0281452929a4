package cni_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/rundir"
	"github.com/vnet-project/vnet/internal/rundir/rundirtest"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

// debianPlugins is where Debian's containernetworking-plugins are.
const debianPlugins = "/usr/lib/cni"

var (
	buildOnce sync.Once
	pluginDir string
	buildErr  error
)

// plugin builds vnet-cni once, with kill points (package killpoint: they
// do nothing unless VNET_KILL_* say), in a directory of its own, as a
// runtime finds plugins.
func plugin(t *testing.T) string {
	t.Helper()
	nstest.RequireRoot(t)
	for _, p := range []string{"host-local", "bandwidth", "tuning", "static"} {
		if _, err := os.Stat(filepath.Join(debianPlugins, p)); err != nil {
			t.Skipf("SKIPPED: %s/%s missing: apt-get install containernetworking-plugins (CI installs it)", debianPlugins, p)
		}
	}
	buildOnce.Do(func() {
		pluginDir, buildErr = os.MkdirTemp("", "vnet-cni-bin")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-tags", "vnetkill", "-o", filepath.Join(pluginDir, "vnet-cni"), "../../cmd/vnet-cni").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return pluginDir
}

func TestMain(m *testing.M) {
	code := rundirtest.Run(m)
	if pluginDir != "" {
		os.RemoveAll(pluginDir)
	}
	os.Exit(code)
}

// cniInfra is one host of the lab with a port group for containers and a
// VM of vnet's own on it to talk to.
func cniInfra(name string) string {
	return fmt.Sprintf(`name: %s
hosts:
  - {name: hv1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: vmnic0}}]
    portgroups:
      - {name: pg-web, subnet: 10.41.0.0/24, gateway: 10.41.0.1}
vms:
  - {name: probe, host: hv1, nics: [{portgroup: pg-web, ip: 10.41.0.2/24}]}
`, name)
}

// applied applies the infrastructure infraOf names, under a name of this
// run made from base, with a state directory of its own, and destroys it
// when the test ends.
func applied(t *testing.T, base string, infraOf func(name string) string) (infra, state string, svc *service.Local) {
	t.Helper()
	infra, state = nstest.Infra(base), t.TempDir()
	svc = service.NewLocal(state, "")
	doc, err := spec.Load(base+".yaml", []byte(infraOf(infra)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Apply(context.Background(), service.Source{Doc: doc}, service.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := svc.Destroy(context.Background(), infra, service.DestroyOptions{}); err != nil {
			t.Errorf("destroy %s: %v", infra, err)
		}
		nstest.AssertGone(t, infra)
		forgetMachineRegistration(state)
	})
	return infra, state, svc
}

// forgetMachineRegistration drops the machine registry's entry for the
// store in state, if a plugin made one. podman tears a stopped container's
// network down from a cleanup process that conmon starts with an
// environment of podman's choosing, without the tests' VNET_RUN_DIR, so
// the plugin that process runs registers the store in the machine's
// registry (an entry is a file named by the store's ID holding its
// directory).
func forgetMachineRegistration(state string) {
	machine := filepath.Join(rundir.Default, "stores")
	entries, _ := os.ReadDir(machine)
	for _, e := range entries {
		path := filepath.Join(machine, e.Name())
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == state {
			os.Remove(path)
		}
	}
}

// world is an applied infrastructure, its state directory, and libcni set
// up as a runtime would be, finding vnet-cni and Debian's plugins.
type world struct {
	t     *testing.T
	infra string
	state string
	svc   *service.Local
	cni   *libcni.CNIConfig
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir := plugin(t)
	w := &world{t: t}
	w.infra, w.state, w.svc = applied(t, "cni", cniInfra)
	w.cni = libcni.NewCNIConfigWithCacheDir([]string{dir, debianPlugins}, t.TempDir(), nil)
	return w
}

// Plugins of Debian's containernetworking-plugins that a list chains
// after vnet. portmap is given no capability: it maps nothing and passes
// the result on. tuning sets a sysctl in the container's namespace.
// bandwidth, too, is given no capability: vnet shapes the port itself, on
// the switch's side; that plugin's CHECK looks for the container's veth
// peer in the runtime's namespace, where a vNIC's switch port is not.
const (
	chainTuning    = `{"type": "portmap"}, {"type": "tuning", "sysctl": {"net.ipv4.conf.all.arp_notify": "1"}}`
	chainBandwidth = `{"type": "bandwidth"}`
)

// list is a network configuration list of vnet with the given IPAM,
// and the plugins chain chains after it.
func (w *world) list(version, name, ipam, chain string) *libcni.NetworkConfigList {
	return w.listOf(version, name, ipam, chain, w.infra, "")
}

// listOf is list for an infrastructure, with more capabilities.
func (w *world) listOf(version, name, ipam, chain, infra, caps string) *libcni.NetworkConfigList {
	w.t.Helper()
	plugins := fmt.Sprintf(`{"type": "vnet-cni", "infra": %q, "portgroup": "pg-web", "stateDir": %q,
		"capabilities": {"mac": true, "ips": true, "bandwidth": true%s}, "ipam": %s}`, infra, w.state, caps, ipam)
	if chain != "" {
		plugins += ", " + chain
	}
	src := fmt.Sprintf(`{"cniVersion": %q, "name": %q, "plugins": [%s]}`, version, name, plugins)
	l, err := libcni.ConfListFromBytes([]byte(src))
	if err != nil {
		w.t.Fatal(err)
	}
	return l
}

// container makes a namespace as a runtime does and the runtime's view of
// it, under Kubernetes' CNI_ARGS when pod is given.
func (w *world) container(base, pod string) (*libcni.RuntimeConf, string) {
	w.t.Helper()
	ns := nstest.Machine(w.t, base)
	rt := &libcni.RuntimeConf{ContainerID: "ctr-" + base + "-" + nstest.RunTag, NetNS: "/run/netns/" + ns, IfName: "eth0"}
	if pod != "" {
		rt.Args = [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", pod},
			{"K8S_POD_INFRA_CONTAINER_ID", rt.ContainerID}}
	}
	return rt, ns
}

func (w *world) doc() *spec.Document {
	w.t.Helper()
	doc, err := w.svc.Spec(context.Background(), w.infra)
	if err != nil {
		w.t.Fatal(err)
	}
	return doc
}

// containerVMs are the VMs of the applied spec that containers are.
func (w *world) containerVMs() map[string]spec.VM {
	out := map[string]spec.VM{}
	for _, vm := range w.doc().Spec.VMs {
		if vm.ContainerOf() != "" {
			out[vm.ContainerOf()] = vm
		}
	}
	return out
}

// links lists the links of a namespace but lo.
func links(t *testing.T, ns string) map[string]netlink.Link {
	out := map[string]netlink.Link{}
	nstest.InNS(t, ns, func(h *netlink.Handle) error {
		ls, err := h.LinkList()
		for _, l := range ls {
			if l.Attrs().Name != "lo" {
				out[l.Attrs().Name] = l
			}
		}
		return err
	})
	return out
}

// talks says whether TCP goes from the probe VM to addr in a container.
func talks(t *testing.T, infra, ns, addr string) bool {
	t.Helper()
	return nstest.Reaches(t, nstest.NSName(infra, "probe"), ns, addr+":5001")
}

// A runtime's whole life of a pod, through libcni: ADD with Kubernetes'
// CNI_ARGS, host-local's address and the mac and bandwidth capabilities,
// chained with Debian's portmap and tuning; the container is a VM named
// for its pod, reachable from a VM of vnet's own, its port shaped as the
// runtime asked; CHECK; DEL, twice, and for a container never added, and
// after the namespace is gone.
func TestLibcniPodLifecycle(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	list := w.list("1.0.0", "web", `{"type": "host-local", "ranges": [[{"subnet": "10.41.0.0/24", "rangeStart": "10.41.0.100", "gateway": "10.41.0.1"}]], "dataDir": "`+t.TempDir()+`"}`, chainTuning)
	rt, ns := w.container("pod1", "web-0")
	rt.CapabilityArgs = map[string]any{
		"mac":       "02:42:0a:29:00:64",
		"bandwidth": map[string]any{"ingressRate": 50_000_000, "ingressBurst": 800_000, "egressRate": 20_000_000, "egressBurst": 800_000},
	}
	r, err := w.cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IPs) != 1 || res.IPs[0].Address.String() != "10.41.0.100/24" {
		t.Fatalf("ADD gave %v, want host-local's 10.41.0.100/24", res.IPs)
	}
	vmName := service.ContainerVMName(rt.ContainerID, "default", "web-0")
	if !strings.HasPrefix(vmName, "p-default-web-0-") || len(res.Interfaces) != 2 || res.Interfaces[1].Sandbox != rt.NetNS || res.Interfaces[1].Mac != "02:42:0a:29:00:64" {
		t.Fatalf("result %s", res)
	}
	eth0, ok := links(t, ns)["eth0"]
	if !ok || eth0.Attrs().HardwareAddr.String() != "02:42:0a:29:00:64" {
		t.Fatalf("the container's links: %v", links(t, ns))
	}
	if !talks(t, w.infra, ns, "10.41.0.100") {
		t.Error("no TCP from the probe VM to the pod")
	}
	st, err := w.svc.Status(ctx, []string{w.infra})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, vm := range st[0].VMs {
		if vm.Name == vmName {
			found = true
			if vm.Namespace != ns || vm.NICs[0].State != "up" || vm.NICs[0].IP != "10.41.0.100/24" {
				t.Errorf("vnet status shows the pod as %+v", vm)
			}
		}
	}
	if !found {
		t.Errorf("vnet status has no VM %s", vmName)
	}
	vm := w.containerVMs()[rt.ContainerID]
	if sh := vm.NICs[0].Shaping; sh == nil || sh.Ingress == nil || uint64(sh.Ingress.Average) != 50_000_000 || uint64(sh.Egress.Burst) != 100_000 {
		t.Errorf("the bandwidth capability made shaping %+v", sh)
	}
	hostNS := nstest.NSName(w.infra, "hv1")
	if !nstest.Contains(nstest.LinkState(t, hostNS, plan.VNICPortName(w.infra, vmName, 0)), "tbf") {
		t.Errorf("the pod's switch port has no shaper: %v", nstest.LinkState(t, hostNS, plan.VNICPortName(w.infra, vmName, 0)))
	}
	var sysctl []byte
	nstest.Do(t, ns, func() (err error) {
		sysctl, err = os.ReadFile("/proc/sys/net/ipv4/conf/all/arp_notify")
		return err
	})
	if strings.TrimSpace(string(sysctl)) != "1" {
		t.Errorf("tuning, chained after vnet, did not set arp_notify (%q)", sysctl)
	}

	if err := w.cni.CheckNetworkList(ctx, list, rt); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	// A vNIC taken out behind vnet's back fails CHECK.
	nstest.InNS(t, ns, func(h *netlink.Handle) error { return h.LinkSetDown(eth0) })
	if err := w.cni.CheckNetworkList(ctx, list, rt); err == nil {
		t.Error("CHECK passed with the pod's eth0 down")
	}
	nstest.InNS(t, ns, func(h *netlink.Handle) error { return h.LinkSetUp(eth0) })

	for i := 0; i < 2; i++ {
		if err := w.cni.DelNetworkList(ctx, list, rt); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	if len(w.containerVMs()) != 0 || len(links(t, ns)) != 0 {
		t.Errorf("after DEL: VMs %v, links in the pod %v", w.containerVMs(), links(t, ns))
	}
	never, _ := w.container("never", "")
	if err := w.cni.DelNetworkList(ctx, list, never); err != nil {
		t.Errorf("DEL of a container never added: %v", err)
	}

	// DEL after the runtime deleted the namespace, of a pod added through
	// a list that chains the bandwidth plugin.
	bw := w.list("1.0.0", "web", `{"type": "vnet"}`, chainBandwidth)
	rt2, ns2 := w.container("pod2", "web-1")
	if _, err := w.cni.AddNetworkList(ctx, bw, rt2); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "delete", ns2).CombinedOutput(); err != nil {
		t.Fatalf("ip netns delete: %v %s", err, out)
	}
	if err := w.cni.DelNetworkList(ctx, bw, rt2); err != nil {
		t.Errorf("DEL after the namespace went: %v", err)
	}
	if vms := w.containerVMs(); len(vms) != 0 {
		t.Errorf("VMs left: %v", vms)
	}
}

// CNI 1.1.0: vnet's own IPAM from the port group's subnet, the ips
// capability, STATUS, and GC of what the runtime no longer uses.
func TestLibcniGCAndStatus(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	list := w.list("1.1.0", "web", `{"type": "vnet"}`, "")
	if err := w.cni.GetStatusNetworkList(ctx, list); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	a, nsA := w.container("gca", "")
	b, nsB := w.container("gcb", "")
	ra, err := w.cni.AddNetworkList(ctx, list, a)
	if err != nil {
		t.Fatal(err)
	}
	b.CapabilityArgs = map[string]any{"ips": []string{"10.41.0.77/24"}}
	rb, err := w.cni.AddNetworkList(ctx, list, b)
	if err != nil {
		t.Fatal(err)
	}
	resA, _ := current.NewResultFromResult(ra)
	resB, _ := current.NewResultFromResult(rb)
	if resA.IPs[0].Address.String() != "10.41.0.3/24" || resA.IPs[0].Gateway.String() != "10.41.0.1" || len(resA.Routes) != 1 {
		t.Errorf("vnet's IPAM gave %s", resA)
	}
	if resB.IPs[0].Address.String() != "10.41.0.77/24" {
		t.Errorf("the ips capability gave %s", resB)
	}
	var route bool
	nstest.InNS(t, nsA, func(h *netlink.Handle) error {
		rs, err := h.RouteList(nil, netlink.FAMILY_V4)
		for _, r := range rs {
			route = route || (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && r.Gw.String() == "10.41.0.1"
		}
		return err
	})
	if !route {
		t.Error("the container has no default route through the port group's gateway")
	}
	// A runtime that lost its cache (libcni DELs what its cache holds
	// before it asks the plugins to collect): vnet's GC finds b itself.
	fresh := libcni.NewCNIConfigWithCacheDir(w.cni.Path, t.TempDir(), nil)
	if err := fresh.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: a.ContainerID, IfName: "eth0"}}}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	vms := w.containerVMs()
	if _, ok := vms[a.ContainerID]; !ok || len(vms) != 1 {
		t.Errorf("after GC keeping %s: %v", a.ContainerID, vms)
	}
	if len(links(t, nsB)) != 0 || len(links(t, nsA)) != 1 {
		t.Errorf("after GC: links in a %v, in b %v", links(t, nsA), links(t, nsB))
	}
	missing := w.listOf("1.1.0", "web", `{"type": "vnet"}`, "", "nosuchinfra", "")
	var te *types.Error
	if err := w.cni.GetStatusNetworkList(ctx, missing); !errors.As(err, &te) || te.Code != types.ErrPluginNotAvailable {
		t.Errorf("STATUS of an infrastructure not applied: %v, want code %d", err, types.ErrPluginNotAvailable)
	}
	if _, err := w.cni.AddNetworkList(ctx, list, &libcni.RuntimeConf{ContainerID: "x1", NetNS: "/proc/1/ns/net", IfName: "eth0"}); !errors.As(err, &te) || te.Code != types.ErrInvalidNetNS {
		t.Errorf("ADD into a namespace outside /run/netns: %v", err)
	}
	pm := w.listOf("1.1.0", "web", `{"type": "vnet"}`, "", w.infra, `, "portMappings": true`)
	c, _ := w.container("gcc", "")
	c.CapabilityArgs = map[string]any{"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}}}
	if _, err := w.cni.AddNetworkList(ctx, pm, c); !errors.As(err, &te) || te.Code != types.ErrUnsupportedField || !strings.Contains(te.Msg, "portmap") {
		t.Errorf("ADD with port mappings: %v", err)
	}
	if err := w.cni.DelNetworkList(ctx, list, a); err != nil {
		t.Fatal(err)
	}
}

// Twenty ADDs and DELs at once on one infrastructure: every one succeeds,
// and what is left is exactly the containers added and not deleted, each
// with an address of its own and its vNIC in its namespace.
func TestLibcniConcurrentAddsAndDels(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	list := w.list("1.1.0", "web", `{"type": "vnet"}`, "")
	const n = 20
	rts := make([]*libcni.RuntimeConf, n)
	nss := make([]string, n)
	for i := range rts {
		rts[i], nss[i] = w.container(fmt.Sprintf("c%02d", i), fmt.Sprintf("pod-%d", i))
	}
	// The odd ones are added first, so that their DELs run beside the
	// even ones' ADDs.
	for i := 1; i < n; i += 2 {
		if _, err := w.cni.AddNetworkList(ctx, list, rts[i]); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range rts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				_, errs[i] = w.cni.AddNetworkList(ctx, list, rts[i])
			} else {
				errs[i] = w.cni.DelNetworkList(ctx, list, rts[i])
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("container %d: %v", i, err)
		}
	}
	vms := w.containerVMs()
	ips := map[string]string{}
	for i, rt := range rts {
		vm, ok := vms[rt.ContainerID]
		if ok != (i%2 == 0) {
			t.Errorf("container %d attached: %v", i, ok)
			continue
		}
		if !ok {
			if l := links(t, nss[i]); len(l) != 0 {
				t.Errorf("container %d was deleted, but its namespace holds %v", i, l)
			}
			continue
		}
		if prev, dup := ips[vm.NICs[0].IP]; dup {
			t.Errorf("containers %s and %d both have %s", prev, i, vm.NICs[0].IP)
		}
		ips[vm.NICs[0].IP] = fmt.Sprint(i)
		if err := w.cni.CheckNetworkList(ctx, list, rts[i]); err != nil {
			t.Errorf("CHECK of container %d: %v", i, err)
		}
	}
	if len(vms) != n/2 {
		t.Errorf("%d container VMs, want %d", len(vms), n/2)
	}
}

// An ADD killed at each of its kill points leaves nothing once the
// runtime has DELeted it (every other point) or collected it with GC.
func TestLibcniKilledAdd(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	list := w.list("1.1.0", "web", `{"type": "vnet"}`, "")
	trace := filepath.Join(t.TempDir(), "points")
	rt, ns := w.container("killed", "")
	t.Setenv("VNET_KILL_TRACE", trace)
	if _, err := w.cni.AddNetworkList(ctx, list, rt); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("VNET_KILL_TRACE")
	if err := w.cni.DelNetworkList(ctx, list, rt); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	points := strings.Count(string(data), "\n")
	if points == 0 {
		t.Fatal("the ADD passed no kill point")
	}
	hostNS := nstest.NSName(w.infra, "hv1")
	before := links(t, hostNS)
	for at := 1; at <= points; at++ {
		t.Setenv("VNET_KILL_AT", fmt.Sprint(at))
		_, err := w.cni.AddNetworkList(ctx, list, rt)
		os.Unsetenv("VNET_KILL_AT")
		if err == nil {
			t.Errorf("the ADD killed at point %d of %d succeeded", at, points)
		}
		if at%2 == 1 {
			err = w.cni.DelNetworkList(ctx, list, rt)
		} else {
			err = w.cni.GCNetworkList(ctx, list, &libcni.GCArgs{})
		}
		if err != nil {
			t.Fatalf("point %d: cleaning up: %v", at, err)
		}
		if vms := w.containerVMs(); len(vms) != 0 {
			t.Errorf("point %d: VMs left %v", at, vms)
		}
		if l := links(t, ns); len(l) != 0 {
			t.Errorf("point %d: the container holds %v", at, l)
		}
		after := links(t, hostNS)
		for name := range after {
			if _, ok := before[name]; !ok {
				t.Errorf("point %d: %s left in the host's namespace", at, name)
			}
		}
	}
	t.Logf("an ADD has %d kill points; each killed one left nothing after DEL or GC", points)
}
