package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/etcdserver"
)

// Member is one process of an etcd cluster the harness runs in the
// control namespace (see NewWithMembers).
type Member struct {
	Name   string
	Client string // its client URL, on the underlay
	Peer   string
	Log    string
	c      *Cluster
	args   []string
	cmd    *exec.Cmd
}

// Members is the etcd cluster of a Cluster made by NewWithMembers.
type Members []*Member

// EtcdBinary is the etcd server to run members of, or "" when there is
// none (Debian's etcd-server package installs it).
func EtcdBinary() string {
	p, _ := exec.LookPath("etcd")
	return p
}

// NewWithMembers is New with a real etcd cluster of n members of the etcd
// binary instead of vnet server's single member: member i serves clients
// on the control namespace's underlay address at port 2379+100*i, and the
// cluster's endpoint list (Etcd, given to every agent and command) names
// them all. It waits until the members have elected a leader.
func NewWithMembers(t testing.TB, bin, etcdBin string, n int, hosts ...string) (*Cluster, Members) {
	t.Helper()
	c := newMachines(t, bin, hosts)
	ms := make(Members, n)
	var initial, clients []string
	for i := range ms {
		port := 2379 + 100*i
		ms[i] = &Member{
			Name:   fmt.Sprintf("etcd%d", i+1),
			Client: fmt.Sprintf("http://%s1:%d", UnderlayNet, port),
			Peer:   fmt.Sprintf("http://%s1:%d", UnderlayNet, port+1),
			c:      c,
		}
		initial = append(initial, ms[i].Name+"="+ms[i].Peer)
		clients = append(clients, ms[i].Client)
	}
	for _, m := range ms {
		m.Log = filepath.Join(c.dir, m.Name+".log")
		m.args = []string{etcdBin, "--name", m.Name, "--data-dir", filepath.Join(c.dir, m.Name),
			"--listen-client-urls", m.Client, "--advertise-client-urls", m.Client,
			"--listen-peer-urls", m.Peer, "--initial-advertise-peer-urls", m.Peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", c.Prefix,
			// as the embedded member: a large spec is one value of several MiB
			"--max-request-bytes", strconv.Itoa(etcdserver.MaxRequestBytes)}
		m.Start()
	}
	c.Etcd = strings.Join(clients, ",")
	ms.waitLeader(30 * time.Second)
	return c, ms
}

// Start runs the member (again, on its data directory after Stop).
func (m *Member) Start() {
	m.c.t.Helper()
	if m.cmd != nil {
		m.c.t.Fatalf("etcd member %s already runs", m.Name)
	}
	f, err := os.OpenFile(m.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		m.c.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + m.c.Ctl}, m.args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	m.c.start(cmd)
	m.cmd = cmd
}

// Stop kills the member with SIGKILL, as a machine that dies does, and
// waits for it; its data stays for Start.
func (m *Member) Stop() {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	_ = m.cmd.Wait()
	m.cmd = nil
}

// Leader is the member that was last elected leader, judged by the
// members' logs, or nil when none says so.
func (ms Members) Leader() *Member {
	var leader *Member
	var last int
	for _, m := range ms {
		if m.cmd == nil {
			continue
		}
		b, _ := os.ReadFile(m.Log)
		if term := lastLeaderTerm(string(b)); term > last {
			leader, last = m, term
		}
	}
	return leader
}

// becameLeader is raft's line when a member wins an election, in etcd's
// default log ("... 8e9e05c52164694d became leader at term 2").
var becameLeader = regexp.MustCompile(`became leader at term (\d+)`)

// lastLeaderTerm is the term of the last election the log says its member
// won, 0 when none. One leader per term and terms only grow, so the
// highest term among the members' logs names the leader elected last,
// however close together the elections came.
func lastLeaderTerm(log string) int {
	all := becameLeader.FindAllStringSubmatch(log, -1)
	if len(all) == 0 {
		return 0
	}
	term, _ := strconv.Atoi(all[len(all)-1][1])
	return term
}

// waitLeader waits until a member's log says it became leader.
func (ms Members) waitLeader(limit time.Duration) {
	c := ms[0].c
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for ms.Leader() == nil {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(ms[0].Log)
			c.t.Fatalf("etcd members elected no leader within %s; %s:\n%s", limit, ms[0].Name, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
