package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/spec/spectest"
	"github.com/vnet-project/vnet/internal/store/registrytest"
)

var vnetBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vnet-bin")
	if err != nil {
		panic(err)
	}
	vnetBin = filepath.Join(dir, "vnet")
	if out, err := exec.Command("go", "build", "-o", vnetBin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := registrytest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, stateDir string, args ...string) (string, int) {
	t.Helper()
	return vnetIn(t, stateDir, nil, args...)
}

// specName is a spec's top-level name, as written.
func specName(src []byte) string {
	m := regexp.MustCompile(`(?m)^name:[ \t]*"?([^"\s#]*)`).FindSubmatch(src)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// Every bad spec is refused by validate and apply alike: its field path and
// line in the message, exit status 2, and the host untouched.
func TestBadSpecsExit2AndChangeNothing(t *testing.T) {
	files, _ := filepath.Glob("../../internal/spec/testdata/bad/*.yaml")
	if len(files) < 20 {
		t.Fatalf("want at least 20 bad specs, have %d", len(files))
	}
	state := t.TempDir()
	var infras []string
	for _, f := range files {
		src, _ := os.ReadFile(f)
		if name := specName(src); name != "" {
			infras = append(infras, name)
		}
	}
	// Only these specs' own namespaces: the rest of the host is others' business.
	before := nstest.Namespaces(infras...)
	for _, f := range files {
		src, _ := os.ReadFile(f)
		want := spectest.WantedError(src)
		for _, verb := range []string{"validate", "apply"} {
			out, code := run(t, state, verb, f)
			if code != 2 || !strings.Contains(out, want) {
				t.Errorf("vnet %s %s: exit %d, output %q; want exit 2 and %q", verb, filepath.Base(f), code, out, want)
			}
		}
	}
	if after := nstest.Namespaces(infras...); !slices.Equal(before, after) {
		t.Errorf("the bad specs' namespaces changed: %v -> %v", before, after)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	state := t.TempDir()
	for _, args := range [][]string{{"apply"}, {"validate", "a", "b"}, {"exec", "x"}, {"apply", "--bogus", "x"},
		{"diff", "nothing"}, {"diff", "nothing", "--from", "1"}, {"history", "nothing", "-o", "table"},
		{"exec", "--server", "http://127.0.0.1:1", "a", "--", "true"}, {"gc", "--dry-run", "--server=http://127.0.0.1:1"}} {
		if _, code := run(t, state, args...); code != 2 {
			t.Errorf("vnet %v: exit %d, want 2", args, code)
		}
	}
}

func TestApplyStatusExecDestroy(t *testing.T) {
	requireRoot(t)
	state := t.TempDir()
	infra := nstest.Infra("clitest")
	src := `name: ` + infra + `
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - {name: sw0, uplinks: [{name: u1, nics: {esx1: vmnic0}}], portgroups: [{name: pg}]}
vms:
  - {name: vm1, host: esx1, cpus: 0.5, nics: [{portgroup: pg, ip: 10.9.0.1/24}]}
`
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte(src), 0o644)
	defer run(t, state, "destroy", infra)
	if out, code := run(t, state, "apply", f); code != 0 || !strings.Contains(out, "+ create veth") {
		t.Fatalf("apply: %d %s", code, out)
	}
	if out, _ := run(t, state, "apply", f); !strings.Contains(out, "no changes") {
		t.Errorf("second apply: %s", out)
	}
	// The second status reads the spec the first kept in the state directory.
	for i := 0; i < 2; i++ {
		if out, _ := run(t, state, "status", "-o", "json"); !strings.Contains(out, `"ip": "10.9.0.1/24"`) || !strings.Contains(out, `"state": "up"`) {
			t.Errorf("status: %s", out)
		}
	}
	if kept, _ := filepath.Glob(filepath.Join(state, "spec-cache", "*.spec")); len(kept) != 1 {
		t.Errorf("status keeps %d specs in the state directory, want 1", len(kept))
	}
	out, code := run(t, state, "exec", "vm1", "--", "sh", "-c", "cat /sys/class/net/eth0/address; exit 3")
	if code != 3 || !strings.Contains(out, ":") {
		t.Errorf("exec: exit %d, output %q", code, out)
	}
	if out, code := run(t, state, "destroy", f); code != 0 {
		t.Errorf("destroy: %d %s", code, out)
	}
	if _, code := run(t, state, "destroy", infra); code == 0 {
		t.Error("destroying an unknown infra succeeded")
	}
}

func TestNotRootSaysSo(t *testing.T) {
	if os.Geteuid() != 0 {
		out, code := run(t, t.TempDir(), "apply", "../../examples/demo.yaml")
		if code == 0 || !strings.Contains(out, "needs root") {
			t.Errorf("exit %d: %s", code, out)
		}
		return
	}
	// As root, drop to nobody for the one command.
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", vnetBin, "--state-dir", t.TempDir(), "apply", "../../examples/demo.yaml")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "needs root") {
		t.Errorf("as nobody: %s", out)
	}
}

// vnet's own --state-dir must not reach netperf's option parser.
func TestNetperfIgnoresStateDir(t *testing.T) {
	out, code := run(t, t.TempDir(), "netperf", "--help")
	if code != 0 || !strings.Contains(out, "usage: vnet netperf") {
		t.Errorf("exit %d: %s", code, out)
	}
}

func TestIOCStats(t *testing.T) {
	requireRoot(t)
	state := t.TempDir()
	infra := nstest.Infra("iocstat")
	src := `name: ` + infra + `
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: sw0
    uplinks: [{name: u1, nics: {esx1: vmnic0}}]
    ioc: {enabled: true, pools: {backup: {shares: low}}}
    portgroups:
      - {name: pg, pool: backup, shaping: {egress: {average: 100Mbit, burst: 64KiB}}}
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg, ip: 10.8.0.1/24}]}
`
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte(src), 0o644)
	if out, code := run(t, state, "apply", f); code != 0 {
		t.Fatalf("apply: %s", out)
	}
	defer run(t, state, "destroy", infra)
	out, code := run(t, state, "ioc", "stats", infra, "-o", "json", "-i", "100ms")
	if code != 0 {
		t.Fatalf("ioc stats: %s", out)
	}
	var s struct {
		Uplinks []struct {
			Pools []struct{ Pool string } `json:"pools"`
		} `json:"uplinks"`
		Shapers []struct {
			Average uint64 `json:"average_bps"`
		} `json:"shapers"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(s.Uplinks) != 1 || len(s.Uplinks[0].Pools) != 8 || s.Uplinks[0].Pools[7].Pool != "backup" {
		t.Errorf("uplinks %+v", s.Uplinks)
	}
	if len(s.Shapers) != 1 || s.Shapers[0].Average != 100e6 {
		t.Errorf("shapers %+v", s.Shapers)
	}
	if out, _ := run(t, state, "ioc", "stats"); !strings.Contains(out, "backup") || !strings.Contains(out, "SHAPED PORT") {
		t.Errorf("text: %s", out)
	}
}

// One experiment end to end through the CLI: results.db, report.html and
// summary.md written, the report rebuilt from the database, nothing left.
func TestLabRunAndReport(t *testing.T) {
	requireRoot(t)
	// The lab suffixes its testbeds' names per run, so another lab run on
	// the host cannot collide with this one; what this run leaves behind is
	// what names the lab's temporary state directory once it is gone.
	before := nstest.OrphanedNamespaces(t, "lab-")
	state, out := t.TempDir(), t.TempDir()
	got, code := run(t, state, "lab", "run", "s4-shares-example", "--quick", "--out", out)
	if code != 0 || !strings.Contains(got, "| s4-shares-example | S4 |") {
		t.Fatalf("lab run: exit %d\n%s", code, got)
	}
	for _, f := range []string{"results.db", "report.html", "summary.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s missing", f)
		}
	}
	os.Remove(filepath.Join(out, "report.html"))
	if got, code := run(t, state, "lab", "report", out); code != 0 || !strings.Contains(got, "s4-shares-example") {
		t.Errorf("lab report: exit %d\n%s", code, got)
	}
	if _, err := os.Stat(filepath.Join(out, "report.html")); err != nil {
		t.Error("report.html not rebuilt")
	}
	var left []string
	for _, ns := range nstest.OrphanedNamespaces(t, "lab-") {
		if !slices.Contains(before, ns) {
			left = append(left, ns)
		}
	}
	if len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
	for _, args := range [][]string{{"lab", "run"}, {"lab", "run", "s9-nothing"}, {"lab", "run", "--all", "s0-smp"}, {"lab", "report", t.TempDir()}} {
		if _, code := run(t, state, args...); code != 2 {
			t.Errorf("vnet %v: exit %d, want 2", args, code)
		}
	}
}

// An infrastructure that teams uplinks gets an agent from apply, which
// destroy stops; link and unlink move a vNIC and show in status.
func TestTeamingAgentLinkUnlink(t *testing.T) {
	requireRoot(t)
	state := t.TempDir()
	infra := nstest.Infra("cliteam")
	src := `name: ` + infra + `
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}, {name: vmnic1, speed: 1Gbit}]}
switches:
  - name: sw0
    uplinks: [{name: u1, nics: {esx1: vmnic0}}, {name: u2, nics: {esx1: vmnic1}}]
    teaming: {policy: failover}
    portgroups: [{name: pg-a}, {name: pg-b}]
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg-a, ip: 10.9.1.1/24}]}
`
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte(src), 0o644)
	defer run(t, state, "destroy", infra)
	if out, code := run(t, state, "apply", f); code != 0 || !strings.Contains(out, "agent for "+infra+" started") {
		t.Fatalf("apply: %d %s", code, out)
	}
	pid, err := os.ReadFile(filepath.Join(state, "agent-"+infra+".pid"))
	if err != nil {
		t.Fatalf("no agent pid file: %v", err)
	}
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(pid))); err != nil {
		t.Fatalf("agent %s not running", pid)
	}
	if out, _ := run(t, state, "status", infra); !strings.Contains(out, "u1 (failover order") || !strings.Contains(out, "agent: running") {
		t.Errorf("status does not show the port's uplink:\n%s", out)
	}
	if out, code := run(t, state, "link", "vm1", "eth0", "pg-b"); code != 0 {
		t.Errorf("link: %d %s", code, out)
	}
	if out, _ := run(t, state, "status", "-o", "json", infra); !strings.Contains(out, `"portgroup": "pg-b"`) {
		t.Errorf("after link, status: %s", out)
	}
	if out, code := run(t, state, "unlink", "vm1", "eth1"); code != 2 || !strings.Contains(out, "has 1 vNICs") {
		t.Errorf("unlink of a missing vNIC: %d %s", code, out)
	}
	if out, code := run(t, state, "unlink", "vm1", "eth0"); code != 0 {
		t.Errorf("unlink: %d %s", code, out)
	}
	if out, _ := run(t, state, "status", infra); !strings.Contains(out, "disconnected") {
		t.Errorf("after unlink, status:\n%s", out)
	}
	if out, code := run(t, state, "destroy", infra); code != 0 {
		t.Errorf("destroy: %d %s", code, out)
	}
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(pid))); err == nil {
		if stat, _ := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/stat"); !strings.Contains(string(stat), ") Z") {
			t.Errorf("agent %s still runs after destroy", pid)
		}
	}
}

func TestCountedAgreesInNumber(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 switches"}, {1, "1 switch"}, {2, "2 switches"}} {
		if got := counted(c.n, "switch", "switches"); got != c.want {
			t.Errorf("counted(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// A valid spec that may mean other than it seems is valid, with a warning
// that names the field and line; a dry run shows the same warning.
func TestOverlappingSubnetsWarn(t *testing.T) {
	f := filepath.Join(t.TempDir(), "overlap.yaml")
	src := `name: warnme
hosts: [{name: esx1}]
switches:
  - {name: sw0, hosts: [esx1], portgroups: [{name: pg}]}
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg, ip: 10.0.0.1/24}]}
  - {name: vm2, host: esx1, nics: [{portgroup: pg, ip: 10.0.0.2/16}]}
`
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "warning: vms[1].nics[0].ip: subnet 10.0.0.0/16 overlaps 10.0.0.0/24 (vms[0].nics[0].ip)"
	out, code := run(t, t.TempDir(), "validate", f)
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "valid") {
		t.Errorf("vnet validate: exit %d, output %q; want exit 0, valid and %q", code, out, want)
	}
	if os.Geteuid() != 0 {
		return
	}
	out, code = run(t, t.TempDir(), "apply", "--dry-run", f)
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("vnet apply --dry-run: exit %d, output %q; want exit 0 and %q", code, out, want)
	}
}
