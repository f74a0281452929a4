package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The plugin's binary exists to start fast: it must not link what only
// the server and the lab need, whose package initialization every call
// of the plugin would pay.
func TestLinksOnlyThePlugin(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Skipf("SKIPPED: go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, heavy := range []string{
			"go.etcd.io/etcd/server/",                   // the embedded etcd member
			"github.com/vnet-project/vnet/internal/lab", // the lab and its results
			"modernc.org/sqlite",                        // the lab's database
			"github.com/vnet-project/vnet/internal/etcdserver",
			"github.com/spf13/cobra", // the CLI
		} {
			if strings.HasPrefix(pkg, heavy) {
				t.Errorf("vnet-cni links %s", pkg)
			}
		}
	}
}
