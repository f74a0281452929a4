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
)

// vnet server with its embedded etcd serves the API over that etcd: an
// apply through --server stores the spec there, and status names every
// host's agent dead while none runs.
func TestServerAPIOverEmbeddedEtcd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	state := t.TempDir()
	tokens := filepath.Join(state, "tokens")
	if err := os.WriteFile(tokens, []byte("ci:s3cret-token-for-the-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(vnetBin, "--state-dir", state, "server", "--listen-client", "127.0.0.1:0", "--listen-peer", "127.0.0.1:0",
		"--log-level", "error", "--listen", addr, "--token-file", tokens)
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
	var endpoint string
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for serving := false; !serving; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("vnet server ended")
			}
			if v, ok := strings.CutPrefix(l, "VNET_ETCD="); ok {
				endpoint = v
			}
			serving = strings.Contains(l, "the API serves the infrastructures in etcd")
		case <-time.After(60 * time.Second):
			t.Fatal("vnet server did not serve the API over etcd within 60 s")
		}
	}
	go func() {
		for range lines {
		}
	}()
	base := "http://" + addr
	var err2 error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var resp *http.Response
		if resp, err2 = http.Get(base + "/healthz"); err2 == nil {
			resp.Body.Close()
			break
		}
	}
	if err2 != nil {
		t.Fatal(err2)
	}
	env := []string{"VNET_SERVER=" + base, "VNET_TOKEN=s3cret-token-for-the-test"}
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
	if out, code := vnetEnv(t, env, "destroy", "demo"); code != 0 {
		t.Fatalf("destroy through the server: exit %d\n%s", code, out)
	}
}
