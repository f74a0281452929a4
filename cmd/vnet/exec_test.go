package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// vnet exec NODE -- vnet ... runs the same vnet binary inside the node,
// whether or not vnet is on PATH, and a shell in the node finds it too.
func TestExecFindsVnet(t *testing.T) {
	requireRoot(t)
	state := t.TempDir()
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte("name: cliexec\nhosts:\n  - {name: h1, native: true, nics: [{name: eth0, speed: 1Gbit, ip: 10.9.1.1/24}]}\n"), 0o644)
	defer run(t, state, "destroy", "cliexec")
	if out, code := run(t, state, "apply", f); code != 0 {
		t.Fatalf("apply: %d %s", code, out)
	}
	version, _ := run(t, state, "version")
	for _, tc := range []struct {
		name string
		cmd  []string
		want string
	}{
		{"directly", []string{"vnet", "version"}, version},
		{"from a shell in the node", []string{"sh", "-c", "vnet version && ip -o link show eth0 >/dev/null"}, version},
	} {
		cmd := exec.Command(vnetBin, append([]string{"--state-dir", state, "exec", "h1", "--"}, tc.cmd...)...)
		cmd.Env = append(os.Environ(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin") // no vnet on it
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != tc.want {
			t.Errorf("%s: vnet exec h1 -- %s: %v, output %q; want %q", tc.name, strings.Join(tc.cmd, " "), err, out, tc.want)
		}
	}
}
