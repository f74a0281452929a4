package cni_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// serverToken is the bearer token of the test's vnet server.
const serverToken = "cni-through-the-server-0123456789"

// freeAddr is a loopback address nothing listens on, for now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

var vnetOnce sync.Once

// vnetBinary builds the whole vnet once, with the plugin's kill points,
// beside the plugin in dir: the server the plugin reaches.
func vnetBinary(t *testing.T, dir string) string {
	t.Helper()
	vnet := filepath.Join(dir, "vnet")
	var err error
	vnetOnce.Do(func() {
		var out []byte
		if out, err = exec.Command("go", "build", "-tags", "vnetkill", "-o", vnet, "../../cmd/vnet").CombinedOutput(); err != nil {
			err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(vnet); err != nil {
		t.Fatalf("vnet was not built: %v", err)
	}
	return vnet
}

// startVnetServer runs vnet server over the state directory (this
// machine's infrastructures, no etcd) on a free loopback port, waits until
// it answers, and stops it when the test ends. It returns its URL and the
// file with its token.
func startVnetServer(t *testing.T, dir, state string) (base, tokens string) {
	t.Helper()
	vnet := vnetBinary(t, dir)
	tokens = filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("cni:"+serverToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(vnet, "--state-dir", state, "server", "--no-etcd", "--listen", addr, "--token-file", tokens)
	logPath := filepath.Join(t.TempDir(), "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the server has its own descriptor of it
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("vnet server did not stop on SIGTERM:\n%s", out())
		}
	})
	base = "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, tokens
			}
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("vnet server does not answer on %s:\n%s", addr, out())
		}
	}
}

// serverList is a configuration list of vnet through a vnet server, with
// more of the plugin's fields.
func serverList(t *testing.T, version, name, infra, server, more string) *libcni.NetworkConfigList {
	t.Helper()
	src := fmt.Sprintf(`{"cniVersion": %q, "name": %q, "plugins": [{"type": "vnet-cni", "infra": %q, "portgroup": "pg-web",
		"server": %q%s, "capabilities": {"mac": true, "ips": true}, "ipam": {"type": "vnet"}}]}`, version, name, infra, server, more)
	l, err := libcni.ConfListFromBytes([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The plugin through a running vnet server, as libcni runs it: ADD, CHECK,
// DEL twice and of a container never added, GC and STATUS, each a request
// to the server. The plugin never opens the store: its state directory is
// one that cannot be opened (under a file), so a plugin that read it would
// fail, whatever the number of containers the infrastructure holds.
func TestLibcniThroughServer(t *testing.T) {
	w := newWorld(t)
	dir := plugin(t)
	base, tokens := startVnetServer(t, dir, w.state)
	blocked := filepath.Join(t.TempDir(), "not-a-directory")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VNET_STATE_DIR", filepath.Join(blocked, "state")) // what the plugin would open were it local
	ctx := context.Background()
	list := serverList(t, "1.1.0", "web", w.infra, base, fmt.Sprintf(`, "serverTokenFile": %q`, tokens))

	if err := w.cni.GetStatusNetworkList(ctx, list); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	a, nsA := w.container("srva", "web-0")
	ra, err := w.cni.AddNetworkList(ctx, list, a)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	resA, err := current.NewResultFromResult(ra)
	if err != nil {
		t.Fatal(err)
	}
	if len(resA.IPs) != 1 || resA.IPs[0].Address.String() != "10.41.0.3/24" || resA.IPs[0].Gateway.String() != "10.41.0.1" {
		t.Errorf("ADD through the server gave %s", resA)
	}
	if _, ok := links(t, nsA)["eth0"]; !ok {
		t.Errorf("the container's links: %v", links(t, nsA))
	}
	if !talks(t, w.infra, nsA, "10.41.0.3") {
		t.Error("no TCP from the probe VM to the container added through the server")
	}
	if _, ok := w.containerVMs()[a.ContainerID]; !ok {
		t.Errorf("the applied spec has no VM of %s: %v", a.ContainerID, w.containerVMs())
	}
	if err := w.cni.CheckNetworkList(ctx, list, a); err != nil {
		t.Errorf("CHECK: %v", err)
	}

	b, nsB := w.container("srvb", "")
	c, nsC := w.container("srvc", "")
	for _, rt := range []*libcni.RuntimeConf{b, c} {
		if _, err := w.cni.AddNetworkList(ctx, list, rt); err != nil {
			t.Fatalf("ADD %s: %v", rt.ContainerID, err)
		}
	}
	fresh := libcni.NewCNIConfigWithCacheDir(w.cni.Path, t.TempDir(), nil)
	keep := []types.GCAttachment{{ContainerID: a.ContainerID, IfName: "eth0"}, {ContainerID: b.ContainerID, IfName: "eth0"}}
	if err := fresh.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: keep}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if vms := w.containerVMs(); len(vms) != 2 || len(links(t, nsC)) != 0 || len(links(t, nsB)) != 1 {
		t.Errorf("after GC keeping a and b: VMs %v, links in c %v", vms, links(t, nsC))
	}

	for _, rt := range []*libcni.RuntimeConf{a, a, b} {
		if err := w.cni.DelNetworkList(ctx, list, rt); err != nil {
			t.Fatalf("DEL %s: %v", rt.ContainerID, err)
		}
	}
	never, _ := w.container("srvnever", "")
	if err := w.cni.DelNetworkList(ctx, list, never); err != nil {
		t.Errorf("DEL of a container never added: %v", err)
	}
	if vms := w.containerVMs(); len(vms) != 0 || len(links(t, nsA)) != 0 {
		t.Errorf("after DEL: VMs %v, links in a %v", vms, links(t, nsA))
	}
	if _, err := os.Stat(filepath.Join(blocked, "state")); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("the plugin's own state directory: %v", err)
	}
}

// A server that is not there is a CNI error that says so and asks the
// runtime to try again; the plugin does not fall back to this machine's
// store, which the server writes. A configuration that names a server and
// a state directory, or no token where the server needs one, is refused
// clearly.
func TestLibcniServerRefusals(t *testing.T) {
	w := newWorld(t)
	dir := plugin(t)
	base, _ := startVnetServer(t, dir, w.state)
	t.Setenv("VNET_STATE_DIR", t.TempDir()) // no api.token there
	ctx := context.Background()
	rt, _ := w.container("srvref", "")
	var te *types.Error

	gone := serverList(t, "1.1.0", "web", w.infra, "http://"+freeAddr(t), "")
	if _, err := w.cni.AddNetworkList(ctx, gone, rt); !errors.As(err, &te) || te.Code != types.ErrTryAgainLater || !strings.Contains(te.Msg, "cannot be reached") {
		t.Errorf("ADD through a server that is not there: %v, want code %d saying it cannot be reached", err, types.ErrTryAgainLater)
	}
	if err := w.cni.DelNetworkList(ctx, gone, rt); !errors.As(err, &te) || te.Code != types.ErrTryAgainLater {
		t.Errorf("DEL through a server that is not there: %v, want code %d: what it attached stays until a DEL reaches it", err, types.ErrTryAgainLater)
	}
	if err := w.cni.GetStatusNetworkList(ctx, gone); !errors.As(err, &te) || te.Code != types.ErrPluginNotAvailable {
		t.Errorf("STATUS through a server that is not there: %v, want code %d", err, types.ErrPluginNotAvailable)
	}
	both := serverList(t, "1.1.0", "web", w.infra, base, fmt.Sprintf(`, "stateDir": %q`, w.state))
	if _, err := w.cni.AddNetworkList(ctx, both, rt); !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig {
		t.Errorf("ADD with server and stateDir: %v, want code %d", err, types.ErrInvalidNetworkConfig)
	}
	noToken := serverList(t, "1.1.0", "web", w.infra, base, "")
	if _, err := w.cni.AddNetworkList(ctx, noToken, rt); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("ADD without the server's token: %v, want the server's refusal", err)
	}
	if vms := w.containerVMs(); len(vms) != 0 {
		t.Errorf("VMs after refusals: %v", vms)
	}
}
