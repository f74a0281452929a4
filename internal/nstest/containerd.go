package nstest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pauseImage is the sandbox image the tests' containerd runs every pod
// sandbox from: no registry is reachable, so the tests build it.
const pauseImage = "vnet.test/pause:1"

// shimRunDir is the directory of containerd's own state that its shims use
// whatever the configuration says.
const shimRunDir = "/run/containerd"

// pauseSource waits for the signal containerd stops a sandbox with. As the
// first process of its PID namespace it gets no signal it has no handler
// for, so it installs them.
const pauseSource = `#include <signal.h>
#include <unistd.h>
static void done(int sig) { (void)sig; _exit(0); }
int main(void) { signal(SIGINT, done); signal(SIGTERM, done); for (;;) pause(); }
`

// Containerd is Debian's containerd run by the test as a daemon of its
// own: its root, state, sockets, runc root and CNI configuration are in
// one temporary directory, and crictl talks to it as an administrator of
// a node does.
type Containerd struct {
	t      *testing.T
	dir    string
	sock   string
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{}
	// madeShimDir: containerd 1.6's shims put their sockets in
	// /run/containerd/s whatever the configuration says; the test removes
	// that directory if it made it.
	madeShimDir bool
}

// StartContainerd starts containerd with the CNI configuration list
// conflist, the CNI plugins of plugins (a name and the program it is) in
// its one plugin directory, and the pause image imported. containerd's
// CRI plugin sets up each sandbox's lo with the standard loopback plugin:
// plugins must have it. The test's cleanup removes every sandbox, stops
// containerd and removes its directory.
func StartContainerd(t *testing.T, plugins map[string]string, conflist string) *Containerd {
	t.Helper()
	RequireContainerd(t)
	// Short: the sockets' paths must fit a sockaddr_un.
	dir, err := os.MkdirTemp("", "vcri")
	if err != nil {
		t.Fatal(err)
	}
	c := &Containerd{t: t, dir: dir, sock: filepath.Join(dir, "containerd.sock"), exited: make(chan struct{})}
	_, err = os.Stat(shimRunDir)
	c.madeShimDir = os.IsNotExist(err)
	t.Cleanup(c.stop)
	bin := c.path("cni-bin")
	for _, d := range []string{bin, c.path("net.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range plugins {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	c.write("net.d/10-vnet.conflist", conflist)
	c.write("config.toml", c.config())
	c.write("crictl.yaml", fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n", c.sock, c.sock))

	c.log, err = os.Create(c.path("containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	keepLockFromChildren(t)
	c.cmd = exec.Command("containerd", "--config", c.path("config.toml"))
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.cmd.Wait(); close(c.exited) }()
	c.waitReady()
	c.importPause()
	return c
}

// RequireContainerd skips, loudly, a test that needs containerd and
// crictl, before it sets anything up.
func RequireContainerd(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	for _, bin := range []string{"containerd", "ctr", "crictl", "runc", "gcc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("SKIPPED: %s missing: apt-get install containerd runc gcc, and crictl from "+
				"sigs.k8s.io/cri-tools/cmd/crictl (scripts/deps.sh installs them)", bin)
		}
	}
}

// config is containerd's configuration: everything under the test's
// directory, runc as the runtime, and the CRI plugin's CNI on the test's
// configuration list. restrict_oom_score_adj: a sandbox asks for an OOM
// score below containerd's own, which a machine without CAP_SYS_RESOURCE
// (a container) refuses; restricted, it gets containerd's.
func (c *Containerd) config() string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, c.path("root"), c.path("state"), c.sock, c.sock+".ttrpc", c.path("opt"), pauseImage,
		c.path("runc"), c.path("cni-bin"), c.path("net.d"))
}

func (c *Containerd) path(rel string) string { return filepath.Join(c.dir, rel) }

func (c *Containerd) write(rel, body string) {
	c.t.Helper()
	if err := os.WriteFile(c.path(rel), []byte(body), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// keepLockFromChildren marks every descriptor the test process inherited
// close-on-exec. The suite runs under flock on the kernel lock, whose
// descriptor a daemon the test starts would otherwise inherit, and so
// would its shims, which containerd leaves running on their own.
func keepLockFromChildren(t *testing.T) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

func (c *Containerd) waitReady() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.Crictl("info"); err == nil {
			return
		}
		select {
		case <-c.exited:
			c.t.Fatalf("containerd exited:\n%s", c.logTail())
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("containerd did not answer within 30s:\n%s", c.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Crictl runs crictl against the test's containerd and returns what it
// printed on stdout; its stderr (where it warns) goes into the error.
func (c *Containerd) Crictl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "crictl", append([]string{"--config", c.path("crictl.yaml")}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return strings.TrimSpace(stdout.String()), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

func (c *Containerd) Must(args ...string) string {
	c.t.Helper()
	out, err := c.Crictl(args...)
	if err != nil {
		c.t.Fatalf("crictl %s: %v\n%s\ncontainerd:\n%s", strings.Join(args, " "), err, out, c.logTail())
	}
	return out
}

func (c *Containerd) logTail() string {
	b, _ := os.ReadFile(c.path("containerd.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// importPause builds the pause program, packs it as a docker archive and
// imports it into the CRI plugin's namespace of containerd's image store.
func (c *Containerd) importPause() {
	c.t.Helper()
	src := c.path("pause.c")
	c.write("pause.c", pauseSource)
	if out, err := exec.Command("gcc", "-static", "-Os", "-s", "-o", c.path("pause"), src).CombinedOutput(); err != nil {
		c.t.Fatalf("gcc -static: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(c.path("pause"))
	if err != nil {
		c.t.Fatal(err)
	}
	archive, err := dockerArchive(pauseImage, "pause", bin)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(c.path("pause.tar"), archive, 0o644); err != nil {
		c.t.Fatal(err)
	}
	out, err := exec.Command("ctr", "--address", c.sock, "--namespace", "k8s.io", "images", "import",
		"--snapshotter", "native", c.path("pause.tar")).CombinedOutput()
	if err != nil {
		c.t.Fatalf("ctr images import: %v\n%s", err, out)
	}
}

// dockerArchive is an image of one layer holding one static program, as
// `docker save` writes it (which ctr imports): the layer, the image's
// configuration named by its digest, and manifest.json naming the image.
func dockerArchive(ref, name string, program []byte) ([]byte, error) {
	var layer bytes.Buffer
	if err := tarFiles(&layer, map[string][]byte{name: program}, 0o755); err != nil {
		return nil, err
	}
	diffID := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": []string{"/" + name}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	if err != nil {
		return nil, err
	}
	configDigest := sha256.Sum256(config)
	configName := hex.EncodeToString(configDigest[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{ref}, "Layers": []string{"layer.tar"}}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	err = tarFiles(&out, map[string][]byte{"layer.tar": layer.Bytes(), configName: config, "manifest.json": manifest}, 0o644)
	return out.Bytes(), err
}

func tarFiles(w *bytes.Buffer, files map[string][]byte, mode int64) error {
	tw := tar.NewWriter(w)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	return tw.Close()
}

// stop removes every pod sandbox, stops containerd, kills a shim left
// behind, unmounts what is left under the directory, and removes it.
func (c *Containerd) stop() {
	t := c.t
	if c.cmd != nil && c.cmd.Process != nil {
		select {
		case <-c.exited:
			t.Errorf("containerd exited during the test:\n%s", c.logTail())
		default:
			if out, err := c.Crictl("rmp", "--force", "--all"); err != nil {
				t.Errorf("crictl rmp --all: %v\n%s", err, out)
			}
			c.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.exited:
			case <-time.After(20 * time.Second):
				c.cmd.Process.Kill()
				<-c.exited
			}
		}
	}
	c.killShims()
	c.unmountAll()
	if c.madeShimDir {
		// Empty once the shims are gone; Remove leaves a directory that is not.
		os.Remove(filepath.Join(shimRunDir, "s"))
		os.Remove(shimRunDir)
	}
	if c.log != nil {
		c.log.Close()
	}
	if err := os.RemoveAll(c.dir); err != nil {
		t.Errorf("remove containerd's directory: %v", err)
	}
}

// killShims kills the runc shims of this containerd (their command line
// names its socket) that outlived it: those of sandboxes rmp could not
// remove.
func (c *Containerd) killShims() {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte("containerd-shim")) && bytes.Contains(cmdline, []byte(c.sock)) {
			c.t.Errorf("a shim of the test's containerd outlived it (pid %d): killed", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountAll unmounts what is mounted under the directory, deepest first
// (a sandbox's /dev/shm and root that a failed removal left).
func (c *Containerd) unmountAll() {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], c.dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(mounts[i], unix.MNT_DETACH); err != nil {
			c.t.Errorf("unmount %s: %v", mounts[i], err)
		}
	}
}

// Pod is a pod sandbox as the CRI plugin reports it.
type Pod struct {
	ID, IP, NetNS string
}

// RunPod asks for a pod sandbox, as kubelet does for each pod, and
// returns its ID, address and network namespace's name.
func (c *Containerd) RunPod(namespace, name string) Pod {
	c.t.Helper()
	config, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": name, "namespace": namespace, "uid": namespace + "-" + name + "-" + RunTag},
		"linux":    map[string]any{},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	file := c.path("pod-" + namespace + "-" + name + ".json")
	c.write(filepath.Base(file), string(config))
	id := c.Must("runp", file)
	var inspect struct {
		Status struct {
			Network struct{ IP string }
		}
		Info struct {
			RuntimeSpec struct {
				Linux struct {
					Namespaces []struct{ Type, Path string }
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(c.Must("inspectp", "--output", "json", id)), &inspect); err != nil {
		c.t.Fatal(err)
	}
	p := Pod{ID: id, IP: inspect.Status.Network.IP}
	for _, ns := range inspect.Info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			p.NetNS = filepath.Base(ns.Path)
		}
	}
	if p.IP == "" || p.NetNS == "" {
		c.t.Fatalf("pod %s/%s: no address or network namespace in crictl inspectp", namespace, name)
	}
	return p
}

// Reaches says whether TCP from namespace from reaches a listener the
// test opens at addr in namespace to, and is answered.
func Reaches(t testing.TB, from, to, addr string) bool {
	t.Helper()
	l := Listen(t, to, addr)
	go func() {
		if conn, err := l.Accept(); err == nil {
			conn.Write([]byte("ok"))
			conn.Close()
		}
	}()
	conn, err := Dial(t, from, addr, net.Dialer{Timeout: 3 * time.Second})
	if err != nil {
		return false
	}
	defer conn.Close()
	buf := make([]byte, 2)
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = conn.Read(buf)
	return err == nil && string(buf) == "ok"
}

// PodsTalkBut checks that two pods reach each other over TCP on port open
// and that a's connections to b's port closed, which the pods' port
// group's ACL denies, do not get through.
func PodsTalkBut(t testing.TB, a, b Pod, open, closed int) {
	t.Helper()
	to := func(p Pod, port int) string { return net.JoinHostPort(p.IP, strconv.Itoa(port)) }
	if !Reaches(t, a.NetNS, b.NetNS, to(b, open)) || !Reaches(t, b.NetNS, a.NetNS, to(a, open)) {
		t.Errorf("the pods %s and %s do not reach each other on port %d", a.IP, b.IP, open)
	}
	if Reaches(t, a.NetNS, b.NetNS, to(b, closed)) {
		t.Errorf("pod %s reaches %s on port %d through the ACL that denies it", a.IP, b.IP, closed)
	}
}
