package etcdstore

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// member is one etcd process of a test cluster.
type member struct {
	name, client, peer string
	cmd                *exec.Cmd
	log                *os.File
}

func (m *member) kill() {
	if m.cmd.ProcessState == nil {
		m.cmd.Process.Kill()
		m.cmd.Wait()
	}
}

// startCluster runs a 3-member cluster of the etcd binary on loopback ports,
// each member killed when the test ends.
func startCluster(t *testing.T, bin string) []*member {
	t.Helper()
	dir := t.TempDir()
	ms := make([]*member, 3)
	var initial []string
	for i := range ms {
		ms[i] = &member{name: fmt.Sprintf("m%d", i+1), client: "http://" + closedPort(t), peer: "http://" + closedPort(t)}
		initial = append(initial, ms[i].name+"="+ms[i].peer)
	}
	for _, m := range ms {
		log, err := os.Create(filepath.Join(dir, m.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		m.log = log
		m.cmd = exec.Command(bin,
			"--name", m.name,
			"--data-dir", filepath.Join(dir, m.name),
			"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
			"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", "vnet-test")
		m.cmd.Stdout, m.cmd.Stderr = log, log
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.kill(); log.Close() })
	}
	return ms
}

func (m *member) tail() string {
	b, _ := os.ReadFile(m.log.Name())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}

// A 3-member etcd keeps serving vnet with one member dead, and with two dead
// refuses writes with a quorum error within the timeout instead of hanging.
func TestThreeMemberCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster")
	}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("SKIPPED LOUDLY: no etcd binary on PATH, so the 3-member cluster test did not run (apt-get install etcd-server)")
	}
	ms := startCluster(t, bin)
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.client)
	}
	const timeout = 2 * time.Second
	var s *Store
	waitFor(t, "the cluster to elect a leader", 30*time.Second, func() bool {
		s, err = Open(Options{Endpoints: eps, Timeout: timeout})
		return err == nil
	})
	defer s.Close()
	rev, err := s.PutIf(record("demo", 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := s.Reporter("demo", "hv1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Report(Report{Generation: 1}); err != nil {
		t.Fatal(err)
	}

	ms[0].kill()
	t.Logf("killed %s", ms[0].name)
	// The call under way when a member dies may fail; after that, every call
	// must succeed on the two left.
	waitFor(t, "the store to work on two members", 15*time.Second, func() bool {
		_, err := s.Get("demo")
		return err == nil
	})
	if rev, err = s.PutIf(record("demo", 2), rev); err != nil {
		t.Fatalf("write with 2 of 3 members: %v", err)
	}
	if recs, err := s.List(); err != nil || len(recs) != 1 || recs[0].Generation != 2 {
		t.Fatalf("list with 2 of 3 members: %v, %v", recs, err)
	}
	if err := rp.Report(Report{Generation: 2}); err != nil {
		t.Fatalf("report with 2 of 3 members: %v", err)
	}
	if got := hosts(t, s, "demo"); got != "hv1@2" {
		t.Fatalf("reports with 2 of 3 members: %q", got)
	}

	ms[1].kill()
	t.Logf("killed %s", ms[1].name)
	// A write sent on the connection to the member just killed fails with
	// the connection; the next ones reach the last member and must fail for
	// want of a quorum, each within the timeout. None may succeed.
	deadline := time.Now().Add(20 * time.Second)
	for {
		start := time.Now()
		_, err = s.PutIf(record("demo", 3), rev)
		took := time.Since(start)
		if err == nil {
			t.Fatalf("write with 1 of 3 members succeeded\n%s", ms[2].tail())
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("write with 1 of 3 members: %v, want ErrUnavailable", err)
		}
		// The timeout plus slack for a loaded machine; a hang would blow it.
		if took > timeout+8*time.Second {
			t.Errorf("write with 1 of 3 members took %s (timeout %s)", took, timeout)
		}
		t.Logf("%v (after %s)", err, took.Round(time.Millisecond))
		if strings.Contains(err.Error(), "no quorum") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write said \"no quorum\" within 20 s; last: %v", err)
		}
	}
}
