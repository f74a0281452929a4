package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/nstest"
)

// linkFace is what one face made of the link scenario: after each step
// the applied spec as vnet get prints it, and at the end the history.
type linkFace struct {
	Specs []string
	Verbs []string // of the history's entries, oldest first
	// Generations are the entries' generations: on this machine a change
	// that changes nothing in the kernel keeps the generation, over etcd
	// every stored change of the spec is one.
	Generations []int
}

// link and unlink are one use case whichever way they go: the same
// scenario (apply, link to another port group, unlink, link back) on this
// machine, through a server and over etcd leaves the same applied spec
// after each step and the same history, an entry per change (over etcd
// each a generation of its own); over etcd nothing runs on this machine, and a --wait for hosts whose agents do not run says so with
// exit 3. Through a server it prints what it prints on this machine.
func TestLinkFacesAgree(t *testing.T) {
	requireRoot(t)
	infra := nstest.Infra("clilink")
	file := filepath.Join(t.TempDir(), "link.yaml")
	src := `name: ` + infra + `
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - {name: sw0, uplinks: [{name: u1, nics: {esx1: vmnic0}}], portgroups: [{name: pg-a}, {name: pg-b}]}
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg-a, ip: 10.9.61.1/24}]}
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := [][]string{
		{"link", "vm1", "eth0", "pg-b"},
		{"unlink", "vm1", "eth0"},
		{"link", "--infra", infra, "vm1", "eth0", "pg-a"},
	}
	scenario := func(vnet func(args ...string) string) (linkFace, []string) {
		var f linkFace
		var said []string
		vnet("apply", file)
		f.Specs = append(f.Specs, vnet("get", infra))
		for _, step := range steps {
			said = append(said, vnet(step...))
			f.Specs = append(f.Specs, vnet("get", infra))
		}
		var h struct {
			Entries []struct {
				Verb       string `json:"verb"`
				Generation int    `json:"generation"`
			} `json:"entries"`
		}
		if err := json.Unmarshal([]byte(vnet("history", infra, "-o", "json")), &h); err != nil {
			t.Fatalf("history -o json: %v", err)
		}
		for _, e := range h.Entries {
			f.Verbs, f.Generations = append(f.Verbs, e.Verb), append(f.Generations, e.Generation)
		}
		return f, said
	}
	cli := func(state string, env, extra []string) func(args ...string) string {
		return func(args ...string) string {
			t.Helper()
			out, code := vnetIn(t, state, env, append(args, extra...)...)
			if code != 0 {
				t.Fatalf("vnet %s: exit %d\n%s", strings.Join(args, " "), code, out)
			}
			return out
		}
	}

	state := t.TempDir()
	t.Cleanup(func() {
		run(t, state, "destroy", infra)
		nstest.AssertGone(t, infra)
	})
	local, saidLocally := scenario(cli(state, nil, nil))
	if out, code := vnetIn(t, state, nil, "exec", "vm1", "--", "cat", "/sys/class/net/eth0/carrier"); code != 0 || strings.TrimSpace(out) != "1" {
		t.Errorf("vm1's eth0 after the link back: carrier %q (exit %d), want 1", out, code)
	}
	run(t, state, "destroy", infra)

	// A state directory of its own, so that the history starts afresh.
	served := t.TempDir()
	t.Cleanup(func() { run(t, served, "destroy", infra) })
	base, _ := apiServer(t, served)
	viaServer, saidRemotely := scenario(cli(served, []string{"VNET_SERVER=" + base, "VNET_TOKEN=" + facesToken}, nil))
	run(t, served, "destroy", infra)

	ep := startServer(t)
	overEtcd, saidOverEtcd := scenario(cli(t.TempDir(), nil, []string{"--etcd", ep}))

	if want := []string{"apply", "link", "unlink", "link"}; !reflect.DeepEqual(local.Verbs, want) {
		t.Errorf("history on this machine: %v, want %v", local.Verbs, want)
	}
	if !reflect.DeepEqual(viaServer.Generations, local.Generations) {
		t.Errorf("generations through a server: %v, on this machine %v", viaServer.Generations, local.Generations)
	}
	if want := []int{1, 2, 3, 4}; !reflect.DeepEqual(overEtcd.Generations, want) {
		t.Errorf("generations over etcd: %v, want %v", overEtcd.Generations, want)
	}
	if !strings.Contains(local.Specs[2], "connected: false") || strings.Contains(local.Specs[3], "connected: false") ||
		!strings.Contains(local.Specs[1], "portgroup: pg-b") {
		t.Errorf("the applied specs on this machine do not follow the steps:\n%s", strings.Join(local.Specs, "---\n"))
	}
	for face, f := range map[string]linkFace{"through a server": viaServer, "over etcd": overEtcd} {
		if !reflect.DeepEqual(f.Verbs, local.Verbs) {
			t.Errorf("history %s: %v, on this machine %v", face, f.Verbs, local.Verbs)
		}
		for i := range local.Specs {
			if f.Specs[i] != local.Specs[i] {
				t.Errorf("applied spec after step %d %s:\n%s\non this machine:\n%s", i, face, f.Specs[i], local.Specs[i])
			}
		}
	}
	if !reflect.DeepEqual(saidRemotely, saidLocally) {
		t.Errorf("link prints otherwise through a server:\n%s\nthan on this machine:\n%s", saidRemotely, saidLocally)
	}
	for i, s := range saidOverEtcd {
		if !strings.Contains(s, fmt.Sprintf("stored %s generation %d in etcd for hosts esx1", infra, i+2)) {
			t.Errorf("over etcd, step %d says:\n%s", i+1, s)
		}
	}
	out, code := vnetIn(t, t.TempDir(), nil, "unlink", "vm1", "eth0", "--etcd", ep, "--wait=300ms")
	if code != 3 || !strings.Contains(out, "stored "+infra+" generation 5") || !strings.Contains(out, "ran out") {
		t.Errorf("unlink --wait with no agent running: exit %d, want 3\n%s", code, out)
	}
	if out, code := vnetIn(t, state, nil, "link", "vm1", "eth0", "pg-b", "--wait"); code != 2 || !strings.Contains(out, "--wait needs --etcd") {
		t.Errorf("link --wait on this machine: exit %d, want 2\n%s", code, out)
	}
}
