package clustertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// A host that cannot remove its part of a destroyed infrastructure (here:
// another command holds its lock on the host) keeps reporting it, failed:
// destroy --wait exits 1 naming the host and its error, and vnet status
// shows the host failed. Once the lock is free the agent's next pass
// removes the part and withdraws the report.
func TestClusterDestroyWaitFailedHost(t *testing.T) {
	c := faultCluster(t, 120*time.Second, "hv1", "hv2")
	hv2 := c.Machine("hv2")
	// Passes every 2 s, so the retry after the lock is freed comes soon.
	hv2.KillAgent()
	hv2.StartAgent("--interval", "2s")
	infra := c.Infra()
	file := c.WriteSpec(infra, specOn(c, infra, []string{"hv1", "hv2"}, switchOnTwo))
	vnetOK(t, c, "apply", file, "--wait=60s")

	// As another vnet command on hv2 would while it changes the
	// infrastructure.
	lockDir := filepath.Join(c.dir, "state-hv2", "hostagent", "locks")
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(lockDir, infra+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// Who holds it, as a vnet command says.
	if err := lock.Truncate(0); err == nil {
		fmt.Fprintf(lock, "pid %d: the test\n", os.Getpid())
	}
	locked := true
	unlock := func() {
		if locked {
			_ = unix.Flock(int(lock.Fd()), unix.LOCK_UN)
			locked = false
		}
	}
	defer unlock()

	out, err := c.Vnet("destroy", infra, "--wait=60s")
	t.Logf("destroy --wait with hv2 locked:\n%s", out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("destroy --wait with hv2 locked: %v, want exit status 1", err)
	}
	for _, want := range []string{"hv1 withdrew its report after ", "hv2 failed to remove its part after ",
		"a host failed to remove its part: hv2: ", "being changed by another vnet command (pid"} {
		if !strings.Contains(out, want) {
			t.Errorf("destroy --wait with hv2 locked does not say %q", want)
		}
	}
	if len(vnetLinks(hv2)) == 0 {
		t.Errorf("hv2 holds no link of vnet, yet its removal failed")
	}

	out, err = c.Vnet("status", infra, "-o", "json")
	var got []struct {
		Removed bool                 `json:"removed"`
		Hosts   []etcdstore.HostView `json:"hosts"`
	}
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 {
		t.Fatalf("status of the destroyed infrastructure: %v\n%s", err, out)
	}
	if h := got[0].Hosts; !got[0].Removed || len(h) != 1 || h[0].Host != "hv2" || h[0].State != etcdstore.HostFailed ||
		h[0].Report == nil || len(h[0].Report.Errors) == 0 || !strings.Contains(h[0].Report.Errors[0], "being changed by another vnet command") {
		t.Errorf("status of the destroyed infrastructure, want hv2 failed with its error:\n%s", out)
	}
	if out, _ := c.Vnet("status", infra); !strings.Contains(out, "hv2") || !strings.Contains(out, "failed") {
		t.Errorf("status of the destroyed infrastructure does not show hv2 failed:\n%s", out)
	}

	unlock()
	took := waitFor(t, 30*time.Second, "hv2 to remove its part and withdraw its report", func() (bool, string) {
		out, err := c.Vnet("status", infra)
		return err != nil && strings.Contains(out, "no such infrastructure"), out
	})
	t.Logf("hv2 removed its part %s after the lock was freed", took.Round(time.Millisecond))
	if links := vnetLinks(hv2); len(links) > 0 {
		t.Errorf("hv2 holds links of vnet after its removal succeeded:\n%s", strings.Join(links, "\n"))
	}
}
