package reconcile_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// TestQEMUGuestOnTap boots a real guest under QEMU (TCG, no KVM needed) on
// a TAP that a vnet switch takes as a port (attach: {tap: ...}), and checks
// that it exchanges TCP with a namespace VM through the switch.
//
// The guest is this machine's Debian kernel (/boot/vmlinuz-*) with an
// initramfs the test builds: a static Go program as /init
// (testdata/guestinit) and the virtio network modules of that kernel
// (/lib/modules/VERSION, with their dependencies from modules.dep), which
// the init loads with finit_module. It needs qemu-system-x86_64 (Debian:
// apt-get install qemu-system-x86) and a kernel image with its modules,
// and skips, saying which is missing, without them. A boot is bounded by
// guestBootLimit: a guest still running then is killed.
func TestQEMUGuestOnTap(t *testing.T) {
	nstest.RequireRoot(t)
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("SKIPPED: no qemu-system-x86_64 on PATH (apt-get install qemu-system-x86); CI installs it")
	}
	kernel, modDir := nstest.GuestKernel(t)
	modules := nstest.GuestModules(t, modDir, "virtio_pci", "virtio_net")

	machine := nstest.Machine(t, "q")
	nstest.AddTap(t, machine, "tapq0")
	infra := nstest.Infra("qemu")
	src := fmt.Sprintf(`name: %s
hosts: [{name: hv1}]
switches:
  - {name: sw, hosts: [hv1], portgroups: [{name: pg}]}
vms:
  - {name: web1, host: hv1, nics: [{portgroup: pg, ip: 10.30.0.1/24}]}
  - {name: guest, host: hv1, nics: [{portgroup: pg, attach: {tap: tapq0}, mac: "52:54:00:30:00:09", ip: 10.30.0.9/24}]}
`, infra)
	doc, err := spec.Load("qemu.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dp.Close)
	dp.HostNS, dp.DeviceStateDir = machine, t.TempDir()
	st, err := store.OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng := &reconcile.Engine{DP: dp, Store: st, Host: "hv1", HostNS: machine}
	before := nstest.LinkState(t, machine, "tapq0")
	t.Cleanup(func() {
		eng.Destroy(infra)
		nstest.AssertGone(t, infra)
	})
	if _, err := eng.Apply(doc); err != nil {
		t.Fatal(err)
	}

	nstest.EchoLines(t, plan.NSName(infra, "web1"), "10.30.0.1:7001")

	initrd := filepath.Join(t.TempDir(), "initrd.cpio")
	nstest.BuildInitramfs(t, initrd, "./testdata/guestinit", modules)
	names := make([]string, len(modules))
	for i, m := range modules {
		names[i] = filepath.Base(m)
	}
	// loglevel=5: warnings, and a lockup's stack, reach the console; the
	// boot's chatter does not.
	args := []string{"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-accel", "tcg", "-m", "256", "-smp", "1",
		"-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 loglevel=5 vnet.ip=10.30.0.9/24 vnet.peer=10.30.0.1:7001 vnet.modules=" + strings.Join(names, ","),
		"-netdev", "tap,id=n0,ifname=tapq0,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=52:54:00:30:00:09",
		"-serial", "stdio"}
	out, err := bootGuest(t, machine, qemu, args)
	if !strings.Contains(out, "GUEST-OK") && strings.Contains(out, "soft lockup") {
		// A lockup of the guest's kernel before its echo says nothing
		// of the switch: the guest boots once more.
		t.Logf("the guest locked up before its echo (%v); booting it again:\n%s", err, out)
		out, err = bootGuest(t, machine, qemu, args)
	}
	if !strings.Contains(out, "GUEST-OK") {
		t.Fatalf("the guest did not echo through the switch (%v); its console:\n%s", err, out)
	}
	if err != nil {
		// The echo through the switch is what the test checks. A hang
		// on the way down is the guest kernel's (guestinit sets the NIC
		// down first to avoid the one known); its console, a lockup's
		// stack included, says where.
		t.Logf("WARNING: the guest echoed but did not power off (%v); its console:\n%s", err, out)
	}
	t.Logf("guest console:\n%s", lastLines(out, 8))

	if _, err := eng.Destroy(infra); err != nil {
		t.Fatal(err)
	}
	if got := nstest.LinkState(t, machine, "tapq0"); strings.Join(got, "\n") != strings.Join(before, "\n") {
		t.Errorf("the TAP was not given back as found:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}
}

// syncBuffer collects QEMU's console output from its two pipes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// bootGuest runs QEMU with args from a thread in the machine's namespace
// (QEMU opens the TAP by name in its own network namespace) until the guest
// powers off, and returns its console. A guest still running after
// guestBootLimit is killed, and the error says so: the test never waits
// longer than that for a boot.
func bootGuest(t *testing.T, machine, qemu string, args []string) (string, error) {
	t.Helper()
	console := &syncBuffer{}
	cmd := exec.Command(qemu, args...)
	cmd.Stdout, cmd.Stderr = console, console
	if err := nstest.Do(t, machine, cmd.Start); err != nil {
		t.Fatalf("start qemu: %v", err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	start := time.Now()
	select {
	case <-done:
		t.Logf("qemu exited after %s", time.Since(start).Round(time.Second))
		if waitErr != nil {
			return console.String(), fmt.Errorf("qemu: %w", waitErr)
		}
		return console.String(), nil
	case <-time.After(guestBootLimit):
		cmd.Process.Kill()
		<-done
		return console.String(), fmt.Errorf("the guest was still running after %s", guestBootLimit)
	}
}

// guestBootLimit bounds one boot: under TCG a boot takes 6-8 s on a quiet
// 2-core machine, up to 30 s with both cores busy.
const guestBootLimit = 90 * time.Second

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
