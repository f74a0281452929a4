package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/etcdserver/etcdtest"
)

// startAPIServer runs vnet server with the API on a free loopback port
// and its embedded etcd, waits until the API serves over etcd, and returns
// the API's URL and etcd's endpoint.
func startAPIServer(t *testing.T, extra ...string) (base, endpoint string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	state := t.TempDir()
	tokens := filepath.Join(state, "tokens")
	if err := os.WriteFile(tokens, []byte("ci:"+apiTestToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--state-dir", state, "server", "--listen-client", "127.0.0.1:0", "--listen-peer", "127.0.0.1:0",
		"--log-level", "error", "--listen", addr, "--token-file", tokens}, extra...)
	cmd := exec.Command(vnetBin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var said []string
	for serving := false; !serving; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("vnet server ended: %s", strings.Join(said, "\n"))
			}
			said = append(said, l)
			if v, ok := strings.CutPrefix(l, "VNET_ETCD="); ok {
				endpoint = v
			}
			serving = strings.Contains(l, "the API serves the infrastructures in etcd")
			if strings.Contains(l, "the API serves this machine") {
				t.Fatalf("the API does not serve etcd: %s", l)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("vnet server did not serve the API over etcd within 60 s: %s", strings.Join(said, "\n"))
		}
	}
	go func() {
		for range lines {
		}
	}()
	base = "http://" + addr
	var lastErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var resp *http.Response
		if resp, lastErr = http.Get(base + "/healthz"); lastErr == nil {
			resp.Body.Close()
			return base, endpoint
		}
	}
	t.Fatal(lastErr)
	return
}

const apiTestToken = "s3cret-token-for-the-test"

// vnet server with its embedded etcd serves the API over that etcd: an
// apply through --server stores the spec there, and status names every
// host's agent dead while none runs.
func TestServerAPIOverEmbeddedEtcd(t *testing.T) {
	base, endpoint := startAPIServer(t)
	env := []string{"VNET_SERVER=" + base, "VNET_TOKEN=" + apiTestToken}
	if out, code := vnetEnv(t, env, "apply", "../../examples/demo.yaml"); code != 0 {
		t.Fatalf("apply through the server: exit %d\n%s", code, out)
	}
	// Stored in etcd, not applied here.
	if out, code := vnetEnv(t, nil, "status", "demo", "-o", "json", "--etcd", endpoint); code != 0 || !strings.Contains(out, `"generation": 1`) {
		t.Fatalf("etcd after the apply: exit %d\n%s", code, out)
	}
	resp, err := http.Get(base + "/api/v1/infras/demo/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		VMs     []struct{ Name string } `json:"vms"`
		Cluster struct {
			Dead []string `json:"dead_agents"`
		} `json:"cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status: %d %v", resp.StatusCode, err)
	}
	if len(st.VMs) != 3 || strings.Join(st.Cluster.Dead, ",") != "esx1,esx2,client" {
		t.Errorf("status over etcd: %d VMs, dead agents %v", len(st.VMs), st.Cluster.Dead)
	}
	if out, code := vnetEnv(t, env, "status", "demo"); code != 0 || !strings.Contains(out, "3 hosts: 3 gone") {
		t.Errorf("status through the server: exit %d\n%s", code, out)
	}
	if out, code := vnetEnv(t, env, "destroy", "demo"); code != 0 {
		t.Fatalf("destroy through the server: exit %d\n%s", code, out)
	}
}

// Over TLS, with clients' certificates asked for, the API reaches the
// embedded etcd with the server's own pair.
func TestServerAPIOverEmbeddedTLSEtcd(t *testing.T) {
	p := etcdtest.WritePKI(t, t.TempDir())
	base, _ := startAPIServer(t, "--cert", p.ServerCert, "--key", p.ServerKey, "--client-ca", p.CA)
	env := []string{"VNET_SERVER=" + base, "VNET_TOKEN=" + apiTestToken}
	if out, code := vnetEnv(t, env, "apply", "../../examples/demo.yaml"); code != 0 {
		t.Fatalf("apply through the server: exit %d\n%s", code, out)
	}
	resp, err := http.Get(base + "/api/v1/infras/demo/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Cluster struct {
			Dead []string `json:"dead_agents"`
		} `json:"cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 || len(st.Cluster.Dead) != 3 {
		t.Fatalf("status over TLS etcd: %d %v %+v", resp.StatusCode, err, st)
	}
}
