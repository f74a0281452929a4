package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/examples"
	"github.com/vnet-project/vnet/internal/api"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/service"
)

// outcome is what one face made of the scenario: its answers and what the
// kernel held after the apply.
type outcome struct {
	Plan     []string // the dry run's steps, before the apply
	Executed int      // changes the apply made
	Again    []string // a second dry run's steps: none
	Status   string   // status -o json, pids left out
	Agent    bool     // the teaming agent ran after the apply
	Kernel   []string // nstest.Snapshot after the apply
	Removed  int      // objects destroy removed
	After    []string // what the kernel holds after destroy
}

// The CLI and the HTTP API are two faces of one service: the same scenario
// (dry run, apply of an infrastructure that teams uplinks, a second dry
// run, status, destroy) through the CLI, through the API, and through the
// CLI with --server gives the same answers and leaves the kernel the same,
// agent included, so the faces cannot drift.
func TestFacesAgree(t *testing.T) {
	nstest.RequireRoot(t)
	src, err := examples.FS.ReadFile("teaming.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml, infra := nstest.Rename(t, string(src))
	file := filepath.Join(t.TempDir(), "team.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	// One state directory for every face, so that the namespaces' marks
	// (which name the store) are the same too.
	state := t.TempDir()
	t.Cleanup(func() {
		run(t, state, "destroy", infra)
		nstest.AssertGone(t, infra)
	})
	base, client := apiServer(t, state)

	cli := func(env []string, args ...string) string {
		t.Helper()
		out, code := vnetIn(t, state, env, args...)
		if code != 0 {
			t.Fatalf("vnet %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	throughCLI := func(env []string) (outcome, map[string]string) {
		var o outcome
		said := map[string]string{}
		said["plan"] = timeless(cli(env, "apply", "--dry-run", file))
		o.Plan = lines(said["plan"])
		said["apply"] = timeless(cli(env, "apply", file))
		o.Executed = changesIn(t, said["apply"])
		o.Again = lines(cli(env, "apply", "--dry-run", file))
		o.Status, o.Agent = statusOf(t, cli(env, "status", infra, "-o", "json"))
		said["status"] = timeless(pidless.ReplaceAllString(cli(env, "status", infra), "pid N"))
		o.Kernel = snapshot(t, infra)
		said["destroy"] = cli(env, "destroy", infra)
		o.Removed = removedIn(t, said["destroy"])
		o.After = snapshot(t, infra)
		return o, said
	}
	throughAPI := func() outcome {
		var o outcome
		ctx := context.Background()
		dry, err := client.Apply(ctx, infra, file, []byte(yaml), true)
		if err != nil {
			t.Fatal(err)
		}
		o.Plan = texts(dry.Plan)
		res, err := client.Apply(ctx, infra, file, []byte(yaml), false)
		if err != nil {
			t.Fatal(err)
		}
		o.Executed = res.Executed
		if again, err := client.Apply(ctx, infra, file, []byte(yaml), true); err != nil {
			t.Fatal(err)
		} else if o.Again = texts(again.Plan); len(o.Again) == 0 {
			o.Again = lines(service.PlanText(nil))
		}
		st, err := client.Status(ctx, infra)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]*service.InfraStatus{st})
		o.Status, o.Agent = statusOf(t, string(b))
		o.Kernel = snapshot(t, infra)
		gone, err := client.Destroy(ctx, infra)
		if err != nil {
			t.Fatal(err)
		}
		o.Removed = gone.Removed
		o.After = snapshot(t, infra)
		return o
	}

	local, saidLocally := throughCLI(nil)
	viaAPI := throughAPI()
	remote, saidRemotely := throughCLI([]string{"VNET_SERVER=" + base, "VNET_TOKEN=" + facesToken})

	if !local.Agent || len(local.Plan) == 0 || local.Executed != len(local.Plan) || len(local.Kernel) == 0 || len(local.After) != 0 {
		t.Fatalf("the CLI's own run does not make a case: %+v", local)
	}
	for face, o := range map[string]outcome{"the API": viaAPI, "the CLI through the API": remote} {
		for _, d := range differences(local, o) {
			t.Errorf("the CLI and %s differ in %s", face, d)
		}
	}
	for step, text := range saidLocally {
		if saidRemotely[step] != text {
			t.Errorf("vnet %s prints otherwise through the server:\n%s\nthan on this machine:\n%s", step, saidRemotely[step], text)
		}
	}
}

const facesToken = "faces-token-for-the-test"

// apiServer serves the API over this machine's state directory, as vnet
// server --no-etcd does, with the vnet binary to run agents.
func apiServer(t *testing.T, state string) (string, *api.Client) {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tf, []byte("ci:"+facesToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{Backend: &service.Local{StateDir: state, Exe: vnetBin}, TokenFile: tf})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	c, err := api.NewClient(srv.URL, facesToken)
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, c
}

// vnetIn runs the vnet binary on a state directory with more environment,
// without a server unless env names one.
func vnetIn(t *testing.T, state string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(vnetBin, append([]string{"--state-dir", state}, args...)...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "VNET_SERVER=") || strings.HasPrefix(kv, "VNET_ETCD=")
	}), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func texts(plan []api.PlanAction) []string {
	out := make([]string, 0, len(plan))
	for _, a := range plan {
		out = append(out, timeless(a.Text))
	}
	return out
}

var (
	appliedLine   = regexp.MustCompile(`(?m)^applied \S+: (\d+) changes?$`)
	destroyedLine = regexp.MustCompile(`(?m)^destroyed \S+: (\d+) objects? removed$`)
	pidless       = regexp.MustCompile(`pid \d+`)
	// A port's steering says when its uplink was assigned: in the plan
	// and the kernel as " @2006-01-02T15:04:05Z", in status as " at
	// 2006-01-02 15:04:05".
	assignedAt = regexp.MustCompile(` (@|at )\d{4}-\d\d-\d\d[T ][0-9:]+Z?`)
)

// timeless is a face's text without the times ports were assigned their
// uplinks, which differ from run to run.
func timeless(s string) string { return assignedAt.ReplaceAllString(s, "") }

func changesIn(t *testing.T, out string) int { return number(t, appliedLine, out) }
func removedIn(t *testing.T, out string) int { return number(t, destroyedLine, out) }

func number(t *testing.T, re *regexp.Regexp, out string) int {
	t.Helper()
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q in:\n%s", re, out)
	}
	n := 0
	for _, c := range m[1] {
		n = 10*n + int(c-'0')
	}
	return n
}

// statusOf is status -o json of one infrastructure without the agent's
// pid, and whether the agent runs.
func statusOf(t *testing.T, out string) (string, bool) {
	t.Helper()
	var all []map[string]any
	if err := json.Unmarshal([]byte(out), &all); err != nil || len(all) != 1 {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	agent, _ := all[0]["agent"].(map[string]any)
	running, _ := agent["running"].(bool)
	delete(agent, "pid")
	b, _ := json.MarshalIndent(all[0], "", " ")
	return timeless(string(b)), running
}

func snapshot(t *testing.T, infra string) []string {
	var out []string
	for _, l := range nstest.Snapshot(t, infra) {
		out = append(out, timeless(l))
	}
	return out
}

// differences says in which fields two outcomes differ, and how.
func differences(a, b outcome) []string {
	var out []string
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		x, y := va.Field(i).Interface(), vb.Field(i).Interface()
		if reflect.DeepEqual(x, y) {
			continue
		}
		name := va.Type().Field(i).Name
		xs, ok1 := x.([]string)
		ys, ok2 := y.([]string)
		if ok1 && ok2 {
			out = append(out, name+": only the CLI's: "+strings.Join(missing(xs, ys), "; ")+"\n  only the other's: "+strings.Join(missing(ys, xs), "; "))
			continue
		}
		out = append(out, fmt.Sprintf("%s: %v, the other %v", name, x, y))
	}
	return out
}

// missing are the lines of a that b lacks.
func missing(a, b []string) []string {
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, l)
		}
	}
	return out
}
