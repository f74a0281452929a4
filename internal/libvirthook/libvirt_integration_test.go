package libvirthook_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

// hookDir is where libvirt's QEMU driver looks for its hooks.
const hookDir = "/etc/libvirt/hooks/qemu.d"

// guestBootLimit bounds the wait for the guest to boot and echo through
// the switch: under TCG a boot takes 6-8 s on a quiet 2-core machine, up
// to 30 s with both cores busy.
const guestBootLimit = 120 * time.Second

// A libvirt domain defined from the documented example (examples/libvirt)
// joins the port group of the documented spec through vnet's hook: its
// guest, booted under QEMU without KVM, echoes with a VM of vnet's own;
// the port group's ACL keeps the guest's port 8080 closed while another
// port answers; its TAP carries the port group's shaping; once the guest
// forges its MAC its frames are dropped and counted; when the domain stops
// it leaves the infrastructure.
//
// It runs its own libvirtd and virtlogd, since libvirt finds hooks as it
// starts, and skips, saying why, when libvirt or QEMU is missing or a
// libvirtd runs already.
func TestLibvirtGuestOnAPortGroup(t *testing.T) {
	nstest.RequireRoot(t)
	for _, bin := range []string{"libvirtd", "virtlogd", "virsh", "qemu-system-x86_64"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("SKIPPED: %s missing: apt-get install --no-install-recommends libvirt-daemon-system qemu-system-x86 (CI installs them)", bin)
		}
	}
	if out, err := exec.Command("pgrep", "-x", "libvirtd").Output(); err == nil {
		t.Skipf("SKIPPED: a libvirtd runs already (pid %s); the test starts its own, which loads vnet's hook", strings.TrimSpace(string(out)))
	}
	kernel, modDir := nstest.GuestKernel(t)
	modules := nstest.GuestModules(t, modDir, "virtio_pci", "virtio_net")

	dir, err := os.MkdirTemp("", "vnet-libvirt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// QEMU runs as libvirt's user: it must reach the kernel, the
	// initramfs and the console's file.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	vnetBin := filepath.Join(dir, "vnet")
	if out, err := exec.Command("go", "build", "-o", vnetBin, "../../cmd/vnet").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// The infrastructure, from the documented spec.
	src, err := os.ReadFile("../../examples/libvirt/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	specSrc, infra := nstest.Rename(t, string(src))
	doc, err := spec.Load("lab.yaml", []byte(specSrc))
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	svc := service.NewLocal(state, "")
	ctx := context.Background()
	if _, err := svc.Apply(ctx, service.Source{Doc: doc}, service.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := svc.Destroy(context.Background(), infra, service.DestroyOptions{}); err != nil {
			t.Errorf("destroy %s: %v", infra, err)
		}
		nstest.AssertGone(t, infra)
	})
	nstest.EchoLines(t, nstest.NSName(infra, "web1"), "10.44.0.1:7001")

	// The domain, from the documented XML: the test's names, and the
	// guest's kernel, initramfs, command line and console.
	initrd := filepath.Join(dir, "initrd.img")
	nstest.BuildInitramfs(t, initrd, "../reconcile/testdata/guestinit", modules)
	guestKernel := filepath.Join(dir, "vmlinuz")
	copyFile(t, kernel, guestKernel)
	names := make([]string, len(modules))
	for i, m := range modules {
		names[i] = filepath.Base(m)
	}
	domain, tap, console := "vnet-lv-"+nstest.RunTag, "tap-g1-"+nstest.RunTag, filepath.Join(dir, "console.log")
	xmlSrc, err := os.ReadFile("../../examples/libvirt/guest1.xml")
	if err != nil {
		t.Fatal(err)
	}
	xml := string(xmlSrc)
	for _, r := range [][2]string{
		{"<name>guest1</name>", "<name>" + domain + "</name>"},
		{"infra='lab'", fmt.Sprintf("infra='%s' stateDir='%s'", infra, state)},
		{"tap-guest1", tap},
		{"/var/lib/libvirt/boot/vmlinuz", guestKernel},
		{"/var/lib/libvirt/boot/initrd.img", initrd},
		{"<cmdline>console=ttyS0</cmdline>", "<cmdline>console=ttyS0 panic=-1 loglevel=5 vnet.ip=10.44.0.9/24 vnet.peer=10.44.0.1:7001 " +
			"vnet.serve=7002,8080 vnet.forge=52:54:00:44:00:99 vnet.modules=" + strings.Join(names, ",") + "</cmdline>"},
		{"/var/log/libvirt/qemu/guest1-console.log", console},
	} {
		if !strings.Contains(xml, r[0]) {
			t.Fatalf("examples/libvirt/guest1.xml no longer has %q, which the test replaces", r[0])
		}
		xml = strings.ReplaceAll(xml, r[0], r[1])
	}
	xmlFile := filepath.Join(dir, "guest1.xml")
	if err := os.WriteFile(xmlFile, []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}

	installHook(t, vnetBin)
	startLibvirt(t, dir)
	virsh(t, "define", xmlFile)
	t.Cleanup(func() {
		exec.Command("virsh", "-c", "qemu:///system", "destroy", domain).Run()
		if out, err := exec.Command("virsh", "-c", "qemu:///system", "undefine", domain).CombinedOutput(); err != nil {
			t.Errorf("virsh undefine %s: %v\n%s", domain, err, out)
		}
	})
	start := time.Now()
	virsh(t, "start", domain)
	out := waitConsole(t, console, "GUEST-SERVING", guestBootLimit)
	t.Logf("the guest echoed through the switch %s after its start", time.Since(start).Round(time.Second))

	// The domain is a VM of the infrastructure, its TAP a port of the
	// switch with the port group's shaping.
	vmName := service.GuestVMName(domain)
	got, err := svc.Spec(ctx, infra)
	if err != nil {
		t.Fatal(err)
	}
	vm, ok := got.Spec.VM(vmName)
	if !ok || len(vm.NICs) != 1 || vm.NICs[0].TapName() != tap || vm.NICs[0].MAC != "52:54:00:44:00:09" || vm.NICs[0].PortGroup != "pg-web" {
		t.Fatalf("the applied spec's VM %s: %+v (found %v)", vmName, vm, ok)
	}
	lab := nstest.NSName(infra, "hv1")
	tapState := strings.Join(nstest.LinkState(t, lab, tap), "\n")
	if !strings.Contains(tapState, "master dvs0") || !strings.Contains(tapState, "up true") || !strings.Contains(tapState, "qdisc") {
		t.Errorf("the TAP in the host's namespace is not a shaped port of dvs0:\n%s", tapState)
	}

	// The port group's ACL: the guest's 7002 answers, its 8080 does not.
	web1 := nstest.NSName(infra, "web1")
	if reply, err := ask(t, web1, "10.44.0.9:7002", "hello"); err != nil || reply != "ok hello" {
		t.Errorf("web1 -> guest:7002: %q, %v", reply, err)
	}
	if reply, err := ask(t, web1, "10.44.0.9:8080", "hello"); err == nil {
		t.Errorf("web1 reached the guest's port 8080 (%q) through the ACL that denies it", reply)
	}

	// Port security: the guest forges its MAC and is cut off, counted.
	if reply, err := ask(t, web1, "10.44.0.9:7002", "forge"); err != nil || reply != "ok forge" {
		t.Fatalf("ask the guest to forge its MAC: %q, %v", reply, err)
	}
	out = waitConsole(t, console, "GUEST-FORGED-CUT", 60*time.Second)
	st, err := svc.Status(ctx, []string{infra})
	if err != nil {
		t.Fatal(err)
	}
	var forged, denied uint64
	for _, ps := range st[0].Security {
		if strings.HasPrefix(ps.Port, vmName+" ") {
			forged, denied = ps.Counters["forged-mac"], ps.Counters["acl[0]"]
		}
	}
	if forged == 0 || denied == 0 {
		t.Errorf("on the guest's port %d forged-mac drops and %d of the ACL's deny rule, want some of each: %+v", forged, denied, st[0].Security)
	}
	t.Logf("guest console:\n%s", lastLines(out, 8))

	// The domain stops: it leaves the infrastructure.
	virsh(t, "destroy", domain)
	if got, err = svc.Spec(ctx, infra); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Spec.VM(vmName); ok || len(got.Spec.VMs) != 1 {
		t.Errorf("after the domain stopped the spec has %d VMs, %s among them: %v", len(got.Spec.VMs), vmName, ok)
	}
	// libvirt deleted the TAP before the hook ran: no record of it is left.
	if recs, _ := filepath.Glob(filepath.Join(state, "devices", "*", "*.json")); len(recs) > 0 {
		t.Errorf("after the domain stopped, records of devices are left: %v", recs)
	}

	// A domain whose TAP cannot join does not start, and says why.
	bad := strings.Replace(xml, "portgroup='pg-web'", "portgroup='pg-none'", 1)
	if err := os.WriteFile(xmlFile, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	virsh(t, "undefine", domain) // the example has no UUID: the domain is defined anew
	virsh(t, "define", xmlFile)
	startOut, err := exec.Command("virsh", "-c", "qemu:///system", "start", domain).CombinedOutput()
	if err == nil || !strings.Contains(string(startOut), `no port group "pg-none"`) {
		t.Errorf("virsh start of a domain on a port group the spec lacks: %v\n%s", err, startOut)
	}
	if state, _ := exec.Command("virsh", "-c", "qemu:///system", "domstate", domain).Output(); !strings.Contains(string(state), "shut off") {
		t.Errorf("the domain whose TAP could not join is %q", strings.TrimSpace(string(state)))
	}
	if got, err = svc.Spec(ctx, infra); err != nil || len(got.Spec.VMs) != 1 {
		t.Errorf("after the refused start: %v, %+v", err, got)
	}
}

// ask sends a line to addr from the namespace and returns the line back.
func ask(t *testing.T, ns, addr, line string) (string, error) {
	c, err := nstest.Dial(t, ns, addr, net.Dialer{Timeout: 3 * time.Second})
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(reply), err
}

// installHook links vnet into libvirt's directory of QEMU hooks, and takes
// it out (and the directory, if it made it) at cleanup.
func installHook(t *testing.T, vnetBin string) {
	made := false
	if _, err := os.Stat(hookDir); os.IsNotExist(err) {
		made = true
	}
	if err := os.MkdirAll(hookDir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(hookDir, "vnet-test-"+nstest.RunTag)
	if err := os.Symlink(vnetBin, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(link)
		if made {
			os.Remove(hookDir)
		}
	})
}

// startLibvirt runs virtlogd and libvirtd until the test ends, and waits
// for libvirtd to answer.
func startLibvirt(t *testing.T, dir string) {
	// libvirt makes its cgroup partition (machine) in each hierarchy for
	// the domain; once its daemon is gone the test removes the empty ones
	// it made.
	before, _ := filepath.Glob("/sys/fs/cgroup/*/machine")
	t.Cleanup(func() {
		after, _ := filepath.Glob("/sys/fs/cgroup/*/machine")
		for _, d := range after {
			if !slices.Contains(before, d) {
				os.Remove(d)
			}
		}
	})
	for _, d := range []string{"virtlogd", "libvirtd"} {
		log, err := os.Create(filepath.Join(dir, d+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(d)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", d, err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			log.Close()
			if t.Failed() {
				data, _ := os.ReadFile(log.Name())
				t.Logf("%s's output:\n%s", d, lastLines(string(data), 30))
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command("virsh", "-c", "qemu:///system", "version").CombinedOutput()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("libvirtd does not answer after 30s: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func virsh(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("virsh", append([]string{"-c", "qemu:///system"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// waitConsole waits for the guest's console to show text, and fails the
// test when it shows GUEST-FAIL or the wait runs out.
func waitConsole(t *testing.T, path, text string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		data, _ := os.ReadFile(path)
		out := string(data)
		switch {
		case strings.Contains(out, text):
			return out
		case strings.Contains(out, "GUEST-FAIL"):
			t.Fatalf("the guest failed; its console:\n%s", out)
		case time.Now().After(deadline):
			t.Fatalf("no %s on the guest's console after %s; its console:\n%s", text, limit, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func copyFile(t *testing.T, from, to string) {
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
