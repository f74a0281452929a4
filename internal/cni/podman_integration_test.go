package cni_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/service"
)

// closedPortInfra is one host with a port group for containers whose ACL
// keeps TCP port 8080 closed to everyone.
func closedPortInfra(name string) string {
	return fmt.Sprintf(`name: %s
hosts:
  - {name: hv1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: vmnic0}}]
    portgroups:
      - name: pg-web
        subnet: 10.43.0.0/24
        gateway: 10.43.0.1
        acl:
          rules:
            - {action: deny, direction: ingress, proto: tcp, dport: 8080, from: 0.0.0.0/0}
`, name)
}

// podman runs Debian's podman with storage of its own, the CNI backend,
// runc, and vnet's network configuration in a directory of its own.
type podman struct {
	t    *testing.T
	dir  string
	conf string
}

func newPodman(t *testing.T, pluginDir string) *podman {
	t.Helper()
	for _, bin := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("SKIPPED: %s missing: apt-get install podman runc (CI installs them)", bin)
		}
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("SKIPPED: /bin/busybox missing: apt-get install busybox-static (CI installs it)")
	}
	dir, err := os.MkdirTemp("", "vnet-podman")
	if err != nil {
		t.Fatal(err)
	}
	p := &podman{t: t, dir: dir, conf: filepath.Join(dir, "containers.conf")}
	for _, d := range []string{"net.d", "root", "run", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// runc, not crun: crun refuses a machine whose cgroups are hybrid.
	conf := fmt.Sprintf(`[network]
network_backend = "cni"
cni_plugin_dirs = [%q, %q]
network_config_dir = %q

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
`, pluginDir, debianPlugins, filepath.Join(dir, "net.d"))
	if err := os.WriteFile(p.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := p.run("rm", "--all", "--force", "--time", "0"); err != nil {
			t.Errorf("podman rm: %v\n%s", err, out)
		}
		_, _ = p.run("system", "reset", "--force")
		os.RemoveAll(dir)
	})
	return p
}

func (p *podman) run(args ...string) (string, error) {
	global := []string{"--root", filepath.Join(p.dir, "root"), "--runroot", filepath.Join(p.dir, "run"),
		"--tmpdir", filepath.Join(p.dir, "tmp"), "--storage-driver", "vfs"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", append(global, args...)...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+p.conf)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (p *podman) must(args ...string) string {
	p.t.Helper()
	out, err := p.run(args...)
	if err != nil {
		p.t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// image imports a busybox root file system as the image "vnet-busybox":
// no registry is needed.
func (p *podman) image() {
	p.t.Helper()
	rootfs := filepath.Join(p.dir, "rootfs")
	for _, d := range []string{"bin", "www", "tmp", "proc", "sys", "dev", "etc"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			p.t.Fatal(err)
		}
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin/busybox"), bb, 0o755); err != nil {
		p.t.Fatal(err)
	}
	for _, applet := range []string{"sh", "httpd", "ip", "sleep", "ping", "cat"} {
		if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", applet)); err != nil {
			p.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(rootfs, "www/ok"), []byte("ok\n"), 0o644); err != nil {
		p.t.Fatal(err)
	}
	tarball := filepath.Join(p.dir, "rootfs.tar")
	if out, err := exec.Command("tar", "-C", rootfs, "-cf", tarball, ".").CombinedOutput(); err != nil {
		p.t.Fatalf("tar: %v\n%s", err, out)
	}
	p.must("import", "--change", "CMD=/bin/sh", tarball, "vnet-busybox")
}

// network writes a CNI configuration list podman finds as a network.
func (p *podman) network(name, body string) {
	p.t.Helper()
	if err := os.WriteFile(filepath.Join(p.dir, "net.d", name+".conflist"), []byte(body), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// container starts a container on a network serving /www on port, and
// returns its ID and address.
func (p *podman) container(name, network string, port int, extra ...string) (id, ip string) {
	p.t.Helper()
	args := append([]string{"run", "-d", "--name", name, "--network", network,
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}, extra...)
	args = append(args, "vnet-busybox", "httpd", "-f", "-p", fmt.Sprint(port), "-h", "/www")
	id = p.must(args...)
	ip = p.must("inspect", "-f", "{{(index .NetworkSettings.Networks \""+network+"\").IPAddress}}", name)
	return id, ip
}

// fetches says whether container from gets /ok from addr, port (busybox's
// static wget crashes in this image: nc speaks the HTTP).
func (p *podman) fetches(from, addr string, port int) bool {
	out, err := p.run("exec", from, "sh", "-c", fmt.Sprintf(`printf 'GET /ok HTTP/1.0\r\n\r\n' | nc -w 3 %s %d`, addr, port))
	return err == nil && strings.HasSuffix(out, "\nok")
}

// Podman with its CNI backend runs containers on a vnet port group: two
// talk; the port group's ACL keeps a third's closed port closed; a
// container that forges its MAC is cut off and the drops are counted on
// its port; podman's rm takes the containers' VMs out.
func TestPodmanOnAPortGroup(t *testing.T) {
	dir := plugin(t)
	p := newPodman(t, dir)
	infra, state, svc := applied(t, "pod", closedPortInfra)
	ctx := context.Background()
	p.image()
	p.network("vnetweb", fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "vnetweb", "plugins": [
  {"type": "vnet-cni", "infra": %q, "portgroup": "pg-web", "stateDir": %q,
   "capabilities": {"mac": true, "ips": true}, "ipam": {"type": "vnet"}},
  {"type": "tuning"}]}`, infra, state))

	id1, _ := p.container("c1", "vnetweb", 8000, "--cap-add", "NET_ADMIN")
	_, ip2 := p.container("c2", "vnetweb", 8000)
	_, ip3 := p.container("c3", "vnetweb", 8080)
	// Each serves: to its own address, which no port or ACL is on the way of.
	for _, c := range []struct {
		name, ip string
		port     int
	}{{"c2", ip2, 8000}, {"c3", ip3, 8080}} {
		if !p.fetches(c.name, c.ip, c.port) {
			t.Fatalf("%s does not serve on %s:%d", c.name, c.ip, c.port)
		}
	}
	if !p.fetches("c1", ip2, 8000) {
		t.Errorf("c1 does not reach c2 (%s:8000) on the port group", ip2)
	}
	if p.fetches("c1", ip3, 8080) {
		t.Errorf("c1 reaches c3 (%s:8080) through the ACL that denies port 8080", ip3)
	}
	st, err := svc.Status(ctx, []string{infra})
	if err != nil {
		t.Fatal(err)
	}
	vm1 := service.ContainerVMName(id1, "", "")
	if n := len(st[0].VMs); n != 3 {
		t.Errorf("vnet status shows %d VMs, want the 3 containers", n)
	}

	// c1 forges its MAC: its frames are dropped at its port, and counted.
	p.must("exec", "c1", "ip", "link", "set", "eth0", "address", "02:00:00:00:00:99")
	if p.fetches("c1", ip2, 8000) {
		t.Error("c1 reaches c2 from a forged MAC")
	}
	if st, err = svc.Status(ctx, []string{infra}); err != nil {
		t.Fatal(err)
	}
	var forged uint64
	for _, ps := range st[0].Security {
		if ps.Port == vm1+" eth0" {
			forged = ps.Counters["forged-mac"]
		}
	}
	if forged == 0 {
		t.Errorf("no forged-mac drops counted on c1's port: %+v", st[0].Security)
	}

	p.must("rm", "--force", "--time", "0", "c1", "c2", "c3")
	doc, err := svc.Spec(ctx, infra)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(doc.Spec.VMs); n != 0 {
		t.Errorf("after podman rm, %d VMs are left", n)
	}
}
