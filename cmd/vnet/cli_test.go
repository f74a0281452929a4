package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store"
)

// vnetStdin runs the vnet binary with stdin on an empty state directory.
func vnetStdin(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(vnetBin, append([]string{"--state-dir", t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), "VNET_SERVER=", "VNET_ETCD=")
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return o.String(), e.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// -o takes the formats a command prints, refuses any other with exit 2
// before doing anything, and an empty list is an empty list in each.
func TestOutputFormats(t *testing.T) {
	for _, tt := range []struct {
		args []string
		out  string
		code int
	}{
		{[]string{"status", "-o", "json"}, "[]\n", 0},
		{[]string{"status", "-o", "yaml"}, "---\n[]\n", 0},
		{[]string{"status"}, "no infrastructures\n", 0},
		{[]string{"status", "-o", "xml"}, "", 2},
		{[]string{"status", "-o", "JSON"}, "", 2},
		{[]string{"stats", "demo", "-o", "table"}, "", 2},
		{[]string{"ioc", "stats", "-o", "wide"}, "", 2},
		{[]string{"pause", "demo", "-o", "csv"}, "", 2},
	} {
		out, errOut, code := vnetStdin(t, "", tt.args...)
		if code != tt.code || out != tt.out {
			t.Errorf("vnet %s: exit %d, %q (stderr %q); want exit %d, %q", strings.Join(tt.args, " "), code, out, errOut, tt.code, tt.out)
		}
		if tt.code == 2 && !strings.Contains(errOut, "want text, json or yaml") {
			t.Errorf("vnet %s: %q does not say which formats there are", strings.Join(tt.args, " "), errOut)
		}
	}
}

// validate and apply read the spec from standard input for -; a mistake
// there is reported with its line, exit 2.
func TestSpecFromStdin(t *testing.T) {
	demo, err := os.ReadFile("../../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := vnetStdin(t, string(demo), "validate", "-")
	if code != 0 || !strings.HasPrefix(out, "<stdin>: valid (") {
		t.Errorf("validate - of the demo: exit %d, %q %q", code, out, errOut)
	}
	bad := "name: demo\nhosts:\n  - name: a\n    nics: 3\n"
	for _, verb := range []string{"validate", "apply"} {
		_, errOut, code = vnetStdin(t, bad, verb, "-")
		if code != 2 || !strings.Contains(errOut, "line 4") {
			t.Errorf("%s - of a bad spec: exit %d, %q; want 2 and its line", verb, code, errOut)
		}
	}
}

// Every command's --help ends with examples.
func TestEveryCommandHasExamples(t *testing.T) {
	root := newRoot()
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			if sub.Example == "" {
				t.Errorf("%s has no examples", sub.CommandPath())
			} else if sub.Name() != "netperf" { // netperf prints netperf's own usage, then its examples
				var buf bytes.Buffer
				sub.SetOut(&buf)
				if err := sub.Usage(); err != nil {
					t.Fatal(err)
				}
				if !strings.HasSuffix(buf.String(), sub.Example+"\n") {
					t.Errorf("%s --help does not end with its examples:\n%s", sub.CommandPath(), buf.String())
				}
			}
			walk(sub)
		}
	}
	walk(root)
}

// Completion offers the lab's experiments and each command's -o formats
// without reading any state.
func TestCompletion(t *testing.T) {
	out, _, code := vnetStdin(t, "", "__complete", "lab", "run", "s4-sc")
	if code != 0 || !strings.Contains(out, "s4-scenario1\n") || strings.Contains(out, "s0-") {
		t.Errorf("completing lab run s4-sc: exit %d, %q", code, out)
	}
	out, _, code = vnetStdin(t, "", "__complete", "status", "-o", "")
	if code != 0 || !strings.HasPrefix(out, "text\njson\nyaml\n") {
		t.Errorf("completing status -o: exit %d, %q", code, out)
	}
	out, _, code = vnetStdin(t, "", "__complete", "pause", "")
	if code != 0 || !strings.HasPrefix(out, ":0\n") {
		t.Errorf("completing pause with nothing applied: exit %d, %q, want the shell's own (spec files)", code, out)
	}
}

// vnet graph draws a spec file as Graphviz dot that Graphviz itself reads,
// and as SVG; --out takes the format from the extension and refuses one
// it does not know.
func TestGraphOfASpecFile(t *testing.T) {
	dot, errOut, code := vnetStdin(t, "", "graph", "../../examples/demo.yaml")
	if code != 0 || !strings.HasPrefix(dot, "digraph ") {
		t.Fatalf("graph -o dot: exit %d, %q", code, errOut)
	}
	if _, err := exec.LookPath("dot"); err != nil {
		t.Log("SKIP the Graphviz check: no dot (Debian package graphviz)")
	} else {
		cmd := exec.Command("dot", "-Tsvg")
		cmd.Stdin = strings.NewReader(dot)
		if out, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(out, []byte("<svg")) {
			t.Errorf("Graphviz does not read vnet's dot: %v %.300s", err, out)
		}
	}
	svgFile := t.TempDir() + "/demo.svg"
	if _, errOut, code := vnetStdin(t, "", "graph", "../../examples/demo.yaml", "--out", svgFile); code != 0 {
		t.Fatalf("graph --out demo.svg: exit %d, %q", code, errOut)
	}
	if b, err := os.ReadFile(svgFile); err != nil || !bytes.HasPrefix(b, []byte("<svg")) || !bytes.Contains(b, []byte(`data-id="vm/web1"`)) {
		t.Errorf("graph --out demo.svg wrote %.200s (%v)", b, err)
	}
	if _, errOut, code := vnetStdin(t, "", "graph", "../../examples/demo.yaml", "--out", t.TempDir()+"/demo.png"); code != 2 || !strings.Contains(errOut, "-o") {
		t.Errorf("graph --out demo.png: exit %d, %q; want 2 and what to do", code, errOut)
	}
	if _, _, code := vnetStdin(t, "", "graph", "nothing-applied"); code != 1 {
		t.Errorf("graph of an infrastructure not applied: exit %d, want 1", code)
	}
}

// status of a networks-only spec shows its networks with their VNIs, and
// what is paused.
func TestPrintNetworksAndPaused(t *testing.T) {
	var b bytes.Buffer
	printStatus(&b, &status.Infra{Name: "tenants", Generation: 2, SpecFile: "t.yaml", Paused: []string{"network/blue"},
		Networks: []status.Network{{Name: "blue", VNI: 4242, Subnet: "10.1.0.0/24", Router: "r1", Hosts: []string{"hv1", "hv2"}, VMs: 3},
			{Name: "red", VNI: 4243, PortGroup: "pg-vxlan", Hosts: []string{"hv1"}, VMs: 1}}})
	out := b.String()
	for _, want := range []string{"paused: network blue", "NETWORK", "blue     4242  10.1.0.0/24  r1", "red      4243  -",
		"port group pg-vxlan"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// Pause and resume through the binary on one machine: the paused vNIC has
// no carrier inside its VM, status says so in text and JSON, a second
// pause changes nothing, a pause of a VM the spec lacks is refused with
// exit 2, graph draws the port paused, and resume brings the carrier back.
func TestPauseThroughTheCLI(t *testing.T) {
	state, infra := appliedOne(t, "clipause", "10.9.7")
	carrier := func() string {
		t.Helper()
		out, _ := run(t, state, "exec", "vm1", "--", "cat", "/sys/class/net/eth0/carrier")
		return strings.TrimSpace(out)
	}
	if out, code := run(t, state, "pause", infra, "--vm", "vm1"); code != 0 || !strings.Contains(out, "paused: VM vm1") {
		t.Fatalf("pause: %d %s", code, out)
	}
	if c := carrier(); c != "0" {
		t.Errorf("paused vm1's eth0 carrier: %q, want 0", c)
	}
	if out, _ := run(t, state, "status", infra); !strings.Contains(out, "paused: VM vm1") || !strings.Contains(out, " paused ") {
		t.Errorf("status of a paused VM:\n%s", out)
	}
	if out, _ := run(t, state, "status", infra, "-o", "json"); !strings.Contains(out, `"paused": [`) || !strings.Contains(out, `"state": "paused"`) {
		t.Errorf("status -o json of a paused VM:\n%s", out)
	}
	if out, code := run(t, state, "pause", infra, "--vm", "vm1"); code != 0 || !strings.Contains(out, "was paused already") {
		t.Errorf("a second pause: %d %s", code, out)
	}
	if out, code := run(t, state, "pause", infra, "--vm", "nosuch"); code != 2 {
		t.Errorf("pausing a VM the spec lacks: %d %s, want exit 2", code, out)
	}
	if out, _ := run(t, state, "graph", infra, "-o", "svg"); !strings.Contains(out, `data-state="paused"`) {
		t.Errorf("graph does not draw the paused port as paused")
	}
	if out, code := run(t, state, "resume", infra); code != 0 || !strings.Contains(out, "nothing is paused") {
		t.Fatalf("resume: %d %s", code, out)
	}
	if c := carrier(); c != "1" {
		t.Errorf("resumed vm1's eth0 carrier: %q, want 1", c)
	}

	// The pause and the resume are in the history, under the generation
	// they kept; a diff from it to the next lists them beside the spec's
	// change, and its exit status goes by the spec alone.
	if out, code := run(t, state, "apply", writeSpec(t, infra, "10.9.8")); code != 0 {
		t.Fatalf("apply of generation 2: %d %s", code, out)
	}
	out, code := run(t, state, "history", infra)
	if code != 0 || !regexp.MustCompile(`(?m)^2\s+1\s.*pause\s.*paused VM vm1$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^3\s+1\s.*resume\s.*resumed everything paused$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^4\s+2\*\s.*apply\s`).MatchString(out) {
		t.Errorf("history after a pause, a resume and an apply: %d\n%s", code, out)
	}
	out, code = run(t, state, "diff", infra, "--from", "1")
	if code != 1 || !strings.Contains(out, "between them, beside the spec") || !strings.Contains(out, "paused VM vm1") ||
		!strings.Contains(out, "resumed everything paused") {
		t.Errorf("diff --from 1 across a pause: %d\n%s", code, out)
	}
}

// Completion offers what an applied infrastructure holds: its name, its
// VMs, port groups and the kinds describe shows, read from the state
// directory the command line names; and the lab's experiments.
func TestCompletionOfLiveNames(t *testing.T) {
	state, infra := appliedOne(t, "clicomp", "10.9.9")
	for _, tt := range []struct {
		args []string
		want string // the names offered, a line each, then the directive
	}{
		{[]string{"pause", ""}, infra + "\n:4\n"},
		{[]string{"pause", infra, "--vm", ""}, "vm1\n:4\n"},
		{[]string{"resume", infra, "--portgroup", ""}, "pg\n:4\n"},
		{[]string{"pause", infra, "--network", ""}, ":4\n"}, // the spec has none
		{[]string{"describe", ""}, infra + "\n:4\n"},
		{[]string{"describe", infra, ""}, "vm\nportgroup\nnetwork\n:4\n"},
		{[]string{"describe", infra, "vm", ""}, "vm1\n:4\n"},
		{[]string{"describe", infra, "pg", ""}, "pg\n:4\n"},
		{[]string{"history", ""}, infra + "\n:4\n"},
		{[]string{"rollback", infra[:3]}, infra + "\n:4\n"},
		{[]string{"diff", infra, ""}, ":0\n"}, // then a spec file: the shell's own
		{[]string{"snapshot", infra, ""}, ":0\n"},
		{[]string{"exec", ""}, infra + "/esx1\n" + infra + "/vm1\nesx1\nvm1\n:4\n"},
		{[]string{"lab", "run", "s4-sc"}, "s4-scenario1\n"},
	} {
		out, code := run(t, state, append([]string{"__complete"}, tt.args...)...)
		if i := strings.Index(out, "Completion ended with directive"); i >= 0 {
			out = out[:i]
		}
		if code != 0 || !strings.HasPrefix(out, tt.want) {
			t.Errorf("vnet __complete %q: exit %d, %q; want %q", tt.args, code, out, tt.want)
		}
	}
}

// Over etcd too, status shows the networks with their VNIs, and what is
// paused.
func TestPrintClusterNetworksAndPaused(t *testing.T) {
	var b bytes.Buffer
	printClusterStatus(&b, clusterStatus{Name: "tenants", Generation: 3, Paused: []string{"*"},
		Networks: []status.Network{{Name: "blue", VNI: 4242, Subnet: "10.1.0.0/24", Hosts: []string{"hv1"}, VMs: 2}}}, time.Now())
	for _, want := range []string{"paused: every port", "NETWORK", "blue     4242"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
}

// vnet history with no infrastructure prints the retention as it acts, in
// every format: the defaults written out, not the stored form's zeroes.
func TestHistoryRetentionEffective(t *testing.T) {
	for _, tt := range []struct{ format, want string }{
		{"text", "each infrastructure keeps the newest 100 entries (and the entry of the generation in force)\n"},
		{"json", "{\n  \"max_entries\": 100,\n  \"max_age\": \"any\"\n}\n"},
		{"yaml", "---\nmax_entries: 100\nmax_age: any\n"},
	} {
		out, errOut, code := vnetStdin(t, "", "history", "-o", tt.format)
		if code != 0 || out != tt.want {
			t.Errorf("history -o %s: exit %d, %q %s; want %q", tt.format, code, out, errOut, tt.want)
		}
	}
}

// vnet history INFRA prints the retention as it acts too, in every format
// alike, and as vnet history says it: the stored default's zero values
// written out, and a set age as set.
func TestHistoryOfAnInfraPrintsTheEffectiveRetention(t *testing.T) {
	for _, tt := range []struct {
		name    string
		set     history.Retention
		keeps   string // the text's line
		entries int
		age     string
	}{
		{"defaults", history.Retention{}, "keeps the newest 100 entries (and the entry of the generation in force)", 100, "any"},
		{"set", history.Retention{MaxEntries: 7, MaxAge: 30 * 24 * time.Hour}, "keeps the newest 7 entries of at most 30d (and the entry of the generation in force)", 7, "30d"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			st, err := store.OpenBolt(state)
			if err != nil {
				t.Fatal(err)
			}
			if tt.set != (history.Retention{}) {
				if err := st.SetHistoryRetention(tt.set); err != nil {
					t.Fatal(err)
				}
			}
			// A destroyed infrastructure: its history alone, no record.
			if _, err := st.AppendHistory(history.Entry{Infra: "hist1", Verb: history.Destroy, Who: "t", Via: history.CLI, Spec: []byte("name: hist1\n")}); err != nil {
				t.Fatal(err)
			}
			st.Close()
			out, code := run(t, state, "history", "hist1")
			if code != 0 || !strings.Contains(out, "\n"+tt.keeps+"\n") {
				t.Errorf("history hist1: exit %d, want the line %q:\n%s", code, tt.keeps, out)
			}
			var j struct {
				Retention map[string]any `json:"retention"`
			}
			out, code = run(t, state, "history", "hist1", "-o", "json")
			if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil {
				t.Fatalf("history hist1 -o json: exit %d, %v:\n%s", code, err, out)
			}
			if want := map[string]any{"max_entries": float64(tt.entries), "max_age": tt.age}; !maps.Equal(j.Retention, want) {
				t.Errorf("-o json: retention %v, want %v", j.Retention, want)
			}
			out, code = run(t, state, "history", "hist1", "-o", "yaml")
			if want := fmt.Sprintf("retention:\n  max_entries: %d\n  max_age: %s\n", tt.entries, tt.age); code != 0 || !strings.Contains(out, want) {
				t.Errorf("-o yaml: exit %d, want %q in:\n%s", code, want, out)
			}
		})
	}
}

// appliedOne applies writeSpec's infrastructure, named after base and
// this run, in a state directory of its own, and destroys it when the test
// ends; it skips without root.
func appliedOne(t *testing.T, base, subnet string) (state, infra string) {
	t.Helper()
	requireRoot(t)
	state, infra = t.TempDir(), nstest.Infra(base)
	f := writeSpec(t, infra, subnet)
	t.Cleanup(func() { run(t, state, "destroy", infra) })
	if out, code := run(t, state, "apply", f); code != 0 {
		t.Fatalf("apply: %d %s", code, out)
	}
	return state, infra
}

// On one machine a change of the spec that changes nothing in the kernel
// (an empty port group added) is a generation of its own, so that
// rollback --to names one spec.
func TestSpecOnlyChangeIsAGeneration(t *testing.T) {
	requireRoot(t)
	state := t.TempDir()
	infra := nstest.Infra("cligen")
	f := writeSpec(t, infra, "10.73.0")
	t.Cleanup(func() { run(t, state, "destroy", infra) })
	if out, code := run(t, state, "apply", f); code != 0 {
		t.Fatalf("apply: %d %s", code, out)
	}
	src, _ := os.ReadFile(f)
	os.WriteFile(f, []byte(strings.Replace(string(src), "portgroups: [{name: pg}]", "portgroups: [{name: pg}, {name: pg-empty}]", 1)), 0o644)
	if out, code := run(t, state, "apply", f); code != 0 {
		t.Fatalf("apply of the empty port group: %d %s", code, out)
	}
	out, code := run(t, state, "history", infra)
	if code != 0 || !regexp.MustCompile(`(?m)^1\s+1\s.*apply\s`).MatchString(out) || !regexp.MustCompile(`(?m)^2\s+2\*\s.*apply\s`).MatchString(out) {
		t.Errorf("history after a spec-only change:\n%s", out)
	}
	if out, code := run(t, state, "rollback", infra, "--to", "1"); code != 0 {
		t.Fatalf("rollback --to 1: %d %s", code, out)
	}
	if out, _ := run(t, state, "get", infra); strings.Contains(out, "pg-empty") {
		t.Errorf("rollback --to 1 kept the port group generation 2 added:\n%s", out)
	}
}
