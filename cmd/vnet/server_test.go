package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/etcdserver/etcdtest"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// startServer runs `vnet server` on loopback ports it picks and returns the
// endpoint it prints; the test stops it with SIGTERM and checks it exits 0.
func startServer(t *testing.T, extra ...string) string {
	t.Helper()
	state := t.TempDir()
	args := append([]string{"--state-dir", state, "server", "--no-api", "--listen-client", "127.0.0.1:0", "--listen-peer", "127.0.0.1:0", "--log-level", "error"}, extra...)
	cmd := exec.Command(vnetBin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var endpoint string
	timeout := time.After(60 * time.Second)
	for endpoint == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("vnet server exited before printing its endpoint")
			}
			if v, ok := strings.CutPrefix(l, "VNET_ETCD="); ok {
				endpoint = v
			}
		case <-timeout:
			t.Fatal("vnet server printed no endpoint within 60 s")
		}
	}
	if _, err := os.Stat(filepath.Join(state, "etcd", "member")); err != nil {
		t.Errorf("data dir under --state-dir: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		var rest []string
		for l := range lines {
			rest = append(rest, l)
		}
		err := cmd.Wait()
		stopped = true
		if err != nil {
			t.Errorf("vnet server after SIGTERM: %v", err)
		}
		if !strings.Contains(strings.Join(rest, "\n"), "stopped") {
			t.Errorf("vnet server said %q on SIGTERM, want it stopped", rest)
		}
	})
	return endpoint
}

func vnetEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	return vnetIn(t, t.TempDir(), env, args...)
}

// apply, status and destroy with --etcd keep the spec in etcd, version it by
// generation, and show each host's standing from the agents' reports; the
// host running them is not touched.
func TestServerApplyStatusDestroy(t *testing.T) {
	ep := startServer(t)
	etcd := func(args ...string) (string, int) { return vnetEnv(t, nil, append(args, "--etcd", ep)...) }

	out, code := etcd("apply", "../../examples/demo.yaml")
	if code != 0 || !strings.Contains(out, "stored demo generation 1 in etcd for hosts esx1, esx2, client") {
		t.Fatalf("first apply: exit %d\n%s", code, out)
	}
	if out, code = etcd("apply", "../../examples/demo.yaml"); code != 0 || !strings.Contains(out, "unchanged, generation 1") {
		t.Fatalf("second apply: exit %d\n%s", code, out)
	}
	src, err := os.ReadFile("../../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), "demo.yaml")
	if err := os.WriteFile(changed, append(src, "# changed\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code = etcd("apply", changed, "--dry-run"); code != 0 || !strings.Contains(out, "would store demo generation 2") {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	// VNET_ETCD works as --etcd does.
	if out, code = vnetEnv(t, []string{"VNET_ETCD=" + ep}, "apply", changed); code != 0 || !strings.Contains(out, "generation 2") {
		t.Fatalf("apply of a changed spec: exit %d\n%s", code, out)
	}

	// One host's agent reports the applied generation; the others are silent.
	st, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{ep}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The spec is stored with its encoding, which makes the spec the YAML
	// makes, VNIs pinned.
	rec, err := st.Get("demo")
	if err != nil {
		t.Fatal(err)
	}
	want, err := spec.Load(rec.SpecFile, rec.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := speccache.DecodeValidated(rec.SpecFile, rec.Spec, rec.SpecEncoded); len(rec.SpecEncoded) == 0 || err != nil ||
		!reflect.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("stored encoding (%d bytes) makes another spec than the YAML: %v", len(rec.SpecEncoded), err)
	}
	rp, err := st.Reporter("demo", "esx1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	if err := rp.Report(etcdstore.Report{Generation: 2, Resources: 7, Security: []status.PortSecurity{
		{Port: "web1 eth0", PortGroup: "pg-web", Link: "vn0", Policy: "mac, ra, unicast", Counters: map[string]uint64{"forged-mac": 3}}}}); err != nil {
		t.Fatal(err)
	}
	rp2, err := st.Reporter("demo", "esx2", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rp2.Close()
	if err := rp2.Report(etcdstore.Report{Generation: 1, Resources: 5}); err != nil {
		t.Fatal(err)
	}

	out, code = etcd("status", "demo")
	if code != 0 || !strings.Contains(out, "3 hosts: 1 current, 1 lagging, 1 gone") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "SECURITY PORT ON esx1") || !strings.Contains(out, "forged-mac 3") {
		t.Errorf("status lacks esx1's port security counters:\n%s", out)
	}
	out, code = etcd("status", "-o", "json")
	var got []clusterStatus
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("status -o json: exit %d, %v\n%s", code, err, out)
	}
	if len(got) != 1 || got[0].Generation != 2 || got[0].Converged || len(got[0].Hosts) != 3 ||
		got[0].Hosts[0].State != etcdstore.HostCurrent || got[0].Hosts[1].State != etcdstore.HostLagging || got[0].Hosts[2].State != etcdstore.HostGone {
		t.Errorf("status -o json = %+v", got)
	}
	if sec := got[0].Hosts[0].Report.Security; len(sec) != 1 || sec[0].Counters["forged-mac"] != 3 {
		t.Errorf("status -o json: esx1's counters %+v", sec)
	}

	if out, code = etcd("destroy", "demo"); code != 0 || !strings.Contains(out, "removed demo (generation 2)") {
		t.Fatalf("destroy: exit %d\n%s", code, out)
	}
	if out, code = etcd("destroy", "demo"); code != 1 || !strings.Contains(out, "no such infrastructure") {
		t.Errorf("second destroy: exit %d\n%s", code, out)
	}
	// Hosts that still report it show until their reports go.
	if out, code = etcd("status"); code != 0 || !strings.Contains(out, "infra demo (destroyed: no longer in etcd, but hosts still report it)") ||
		!strings.Contains(out, "2 hosts: 2 unexpected") {
		t.Errorf("status after destroy, hosts still reporting: exit %d\n%s", code, out)
	}
	if out, code = etcd("status", "demo"); code != 0 || !strings.Contains(out, "destroyed") {
		t.Errorf("status demo after destroy, hosts still reporting: exit %d\n%s", code, out)
	}
	rp.Close()
	rp2.Close()
	if out, code = etcd("status"); code != 0 || !strings.Contains(out, "no infrastructures") {
		t.Errorf("status after destroy: exit %d\n%s", code, out)
	}
	if out, code = etcd("status", "demo"); code != 1 || !strings.Contains(out, "no such infrastructure") {
		t.Errorf("status demo after destroy: exit %d\n%s", code, out)
	}
}

// With etcd unreachable a command fails within its timeout, saying so.
func TestEtcdUnreachableExits1(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	out, code := vnetEnv(t, []string{"VNET_ETCD=" + addr}, "status")
	if code != 1 || !strings.Contains(out, "unreachable") || !strings.Contains(out, addr) {
		t.Errorf("status with etcd down: exit %d\n%s", code, out)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("status with etcd down took %s", took)
	}
}

// vnet server with a certificate and a client CA lets in the commands that
// bring a client certificate (flags or variables) and refuses the others.
func TestServerTLS(t *testing.T) {
	p := etcdtest.WritePKI(t, t.TempDir())
	ep := startServer(t, "--cert", p.ServerCert, "--key", p.ServerKey, "--client-ca", p.CA)
	if !strings.HasPrefix(ep, "https://") {
		t.Fatalf("endpoint %s, want https", ep)
	}
	out, code := vnetEnv(t, nil, "apply", "../../examples/demo.yaml", "--etcd", ep, "--etcd-ca", p.CA, "--etcd-cert", p.ClientCert, "--etcd-key", p.ClientKey)
	if code != 0 || !strings.Contains(out, "stored demo generation 1") {
		t.Fatalf("apply with a client certificate: exit %d\n%s", code, out)
	}
	env := []string{"VNET_ETCD=" + ep, "VNET_ETCD_CA=" + p.CA, "VNET_ETCD_CERT=" + p.ClientCert, "VNET_ETCD_KEY=" + p.ClientKey}
	if out, code = vnetEnv(t, env, "status", "demo"); code != 0 || !strings.Contains(out, "3 hosts: 3 gone") {
		t.Fatalf("status with the variables: exit %d\n%s", code, out)
	}
	if out, code = vnetEnv(t, env[:2], "status", "demo"); code != 1 || !strings.Contains(out, "certificate required") {
		t.Errorf("status without a client certificate: exit %d\n%s", code, out)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for in, want := range map[string]bool{
		"127.0.0.1:2379": true, "http://127.0.0.1:0": true, "localhost:2379": true, "[::1]:2379": true,
		"0.0.0.0:2379": false, "10.0.0.1:2379": false, "http://[::]:2379": false,
	} {
		if got := loopbackOnly(in); got != want {
			t.Errorf("loopbackOnly(%q) = %v, want %v", in, got, want)
		}
	}
}
