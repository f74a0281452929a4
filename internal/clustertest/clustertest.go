// Package clustertest runs a vnet cluster on one machine for tests: each
// "machine" is a network namespace on an underlay bridge (itself in a
// namespace the test made, never the root one), `vnet server` runs in a
// control namespace on that underlay, and `vnet agent host` runs inside
// each machine's namespace, reaching etcd over the underlay as agents on
// real hosts do. Everything it makes, processes included, goes at the
// test's cleanup, whether the test passed or not.
package clustertest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// UnderlayNet is the test underlay's prefix (TEST-NET-1): the control
// namespace is .1, machine i (from 0) is .11+i.
const UnderlayNet = "192.0.2."

// Cluster is one test cluster.
type Cluster struct {
	t        testing.TB
	Bin      string // the vnet binary
	Prefix   string // starts every namespace the cluster makes
	Underlay string // namespace of the underlay bridge
	Ctl      string // namespace of vnet server
	Etcd     string // the server's endpoint, reachable from every machine
	dir      string
	Machines []*Machine

	mu     sync.Mutex
	procs  []*exec.Cmd
	server *exec.Cmd
	// etcds counts the etcds ReplaceEtcd started afresh.
	etcds int
}

// Machine is one emulated hypervisor.
type Machine struct {
	Host   string // the spec's host name
	NS     string
	IP     string // its underlay address
	c      *Cluster
	agent  *exec.Cmd
	waited chan struct{}
	Log    string // the agent's output file
}

// Build compiles the vnet binary for the test.
func Build(t testing.TB) string {
	t.Helper()
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "vnet")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/vnet")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// New makes the underlay, the control namespace with vnet server, and one
// machine per host name (agents are not started: see StartAgent).
func New(t testing.TB, bin string, hosts ...string) *Cluster {
	t.Helper()
	c := newMachines(t, bin, hosts)
	c.startServer()
	return c
}

// newMachines makes the underlay, the control namespace and one machine per
// host name, with nothing running in them.
func newMachines(t testing.TB, bin string, hosts []string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Bin: bin, Prefix: "vnetm" + strconv.FormatInt(int64(os.Getpid()), 36), dir: t.TempDir()}
	c.Underlay, c.Ctl = c.Prefix+"-ul", c.Prefix+"-ctl"
	t.Cleanup(c.teardown)
	c.ip("netns", "add", c.Underlay)
	c.ip("-n", c.Underlay, "link", "add", "ul", "type", "bridge")
	c.ip("-n", c.Underlay, "link", "set", "ul", "up")
	c.attach(c.Ctl, UnderlayNet+"1")
	for i, h := range hosts {
		m := &Machine{Host: h, NS: c.Prefix + "-" + h, IP: UnderlayNet + strconv.Itoa(11+i), c: c}
		c.attach(m.NS, m.IP)
		c.Machines = append(c.Machines, m)
	}
	return c
}

// attach makes a namespace with eth0 on the underlay bridge at ip/24.
func (c *Cluster) attach(ns, ip string) {
	c.ip("netns", "add", ns)
	port := "u" + strings.TrimPrefix(ip, UnderlayNet)
	c.ip("-n", c.Underlay, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
	c.ip("-n", c.Underlay, "link", "set", port, "master", "ul", "up")
	c.ip("-n", ns, "link", "set", "lo", "up")
	c.ip("-n", ns, "addr", "add", ip+"/24", "dev", "eth0")
	c.ip("-n", ns, "link", "set", "eth0", "up")
}

func (c *Cluster) ip(args ...string) {
	c.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		c.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// command runs the vnet binary inside a namespace (its network namespace
// only: /run/netns stays the machine's, as on a real host).
func (c *Cluster) command(ns string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + ns, c.Bin}, args...)...)
}

func (c *Cluster) start(cmd *exec.Cmd) {
	c.t.Helper()
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", strings.Join(cmd.Args, " "), err)
	}
	c.mu.Lock()
	c.procs = append(c.procs, cmd)
	c.mu.Unlock()
}

func (c *Cluster) startServer() {
	c.t.Helper()
	listen := UnderlayNet + "1:2379"
	cmd := c.command(c.Ctl, "server", "--no-api", "--data-dir", c.etcdDir(), "--listen-client", listen,
		"--listen-peer", "127.0.0.1:2380", "--state-dir", filepath.Join(c.dir, "ctl"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c.start(cmd)
	c.server = cmd
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VNET_ETCD="); ok {
				ready <- v
			}
		}
		close(ready)
	}()
	select {
	case v, ok := <-ready:
		if !ok {
			c.t.Fatalf("vnet server ended: %s", stderr.String())
		}
		c.Etcd = v
	case <-time.After(30 * time.Second):
		c.t.Fatalf("vnet server did not serve within 30s: %s", stderr.String())
	}
}

// StopServer stops vnet server with SIGTERM and waits for it to end; its
// data directory stays for StartServer.
func (c *Cluster) StopServer() {
	c.t.Helper()
	if c.server == nil {
		return
	}
	_ = c.server.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.server.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.server.Process.Signal(syscall.SIGKILL)
		<-done
	}
	c.server = nil
}

// StartServer starts vnet server again on the same address and data
// directory after StopServer.
func (c *Cluster) StartServer() {
	c.t.Helper()
	if c.server != nil {
		c.t.Fatal("vnet server already runs")
	}
	c.startServer()
}

// Cut takes the machine off the underlay (its port on the underlay bridge
// goes down): it keeps its namespace, agent and everything in it, but
// reaches neither etcd nor the other machines until Heal.
func (m *Machine) Cut() { m.c.ip("-n", m.c.Underlay, "link", "set", m.port(), "down") }

// Heal puts the machine back on the underlay.
func (m *Machine) Heal() { m.c.ip("-n", m.c.Underlay, "link", "set", m.port(), "up") }

func (m *Machine) port() string { return "u" + strings.TrimPrefix(m.IP, UnderlayNet) }

// Vnet runs a vnet command against the cluster's etcd from the control
// namespace, as an operator would.
func (c *Cluster) Vnet(args ...string) (string, error) {
	args = append(args, "--etcd", c.Etcd)
	out, err := c.command(c.Ctl, args...).CombinedOutput()
	return string(out), err
}

// Machine returns the machine of a host.
func (c *Cluster) Machine(host string) *Machine {
	for _, m := range c.Machines {
		if m.Host == host {
			return m
		}
	}
	c.t.Fatalf("no machine %s", host)
	return nil
}

// StartAgent starts `vnet agent host` inside the machine, with a state
// directory kept across restarts.
func (m *Machine) StartAgent(extra ...string) {
	m.c.t.Helper()
	if m.agent != nil {
		m.c.t.Fatalf("agent of %s already runs", m.Host)
	}
	m.Log = filepath.Join(m.c.dir, m.Host+".log")
	f, err := os.OpenFile(m.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		m.c.t.Fatal(err)
	}
	args := append([]string{"agent", "host", "--etcd", m.c.Etcd, "--host", m.Host,
		"--state-dir", filepath.Join(m.c.dir, "state-"+m.Host)}, extra...)
	cmd := m.c.command(m.NS, args...)
	cmd.Stdout, cmd.Stderr = f, f
	m.c.start(cmd)
	f.Close()
	m.agent = cmd
	m.waited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(m.waited) }()
}

// KillAgent kills the machine's agent with SIGKILL and waits for it.
func (m *Machine) KillAgent() {
	if m.agent == nil {
		return
	}
	// nsenter execs vnet, so the pid is the agent's.
	_ = m.agent.Process.Signal(syscall.SIGKILL)
	<-m.waited
	m.agent = nil
}

// AgentLog is what the agent has printed so far.
func (m *Machine) AgentLog() string {
	b, _ := os.ReadFile(m.Log)
	return string(b)
}

// Exec runs a command in the machine's namespace.
func (m *Machine) Exec(args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"--net=/run/netns/" + m.NS}, args...)...).CombinedOutput()
	return string(out), err
}

// teardown kills every process the cluster started, removes the
// namespaces of infrastructures whose names start with the cluster's
// infra prefix (see Infra), then the machines, the control namespace and
// the underlay.
func (c *Cluster) teardown() {
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	for _, p := range procs {
		if p.Process != nil {
			_ = p.Process.Signal(syscall.SIGKILL)
		}
	}
	for _, m := range c.Machines {
		if m.waited != nil {
			<-m.waited
		}
	}
	for _, p := range procs {
		if p.ProcessState == nil && !c.isAgent(p) {
			_ = p.Wait()
		}
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "vnet."+c.Infra()) {
			_ = exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
	for _, m := range c.Machines {
		_ = exec.Command("ip", "netns", "del", m.NS).Run()
	}
	_ = exec.Command("ip", "netns", "del", c.Ctl).Run()
	_ = exec.Command("ip", "netns", "del", c.Underlay).Run()
}

func (c *Cluster) isAgent(p *exec.Cmd) bool {
	for _, m := range c.Machines {
		if m.agent == p {
			return true
		}
	}
	return false
}

// Infra is an infrastructure name unique to this run; teardown removes
// whatever namespaces of names starting with it are left.
func (c *Cluster) Infra() string { return "c" + strings.TrimPrefix(c.Prefix, "vnetm") }

// Spec is a spec whose hosts are the cluster's machines with their
// underlay addresses; body adds switches and VMs.
func (c *Cluster) Spec(name, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nhosts:\n", name)
	for _, m := range c.Machines {
		fmt.Fprintf(&b, "  - {name: %s, underlay: %s}\n", m.Host, m.IP)
	}
	b.WriteString(body)
	return b.String()
}

// WriteSpec writes a spec file for vnet apply.
func (c *Cluster) WriteSpec(name, src string) string {
	p := filepath.Join(c.dir, name+".yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}
