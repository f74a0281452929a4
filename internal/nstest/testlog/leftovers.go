package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/rundir"
	"github.com/vnet-project/vnet/internal/store"
)

// place is where a run may leave something of vnet's on the machine: a
// glob, what a match is, and whether only directories count.
type place struct {
	glob, what string
	dirs       bool
}

// places are the named namespaces, the machine's store registry (a run's
// tests keep their own), the rest of vnet's run directory, and the
// cgroups under vnet's in each hierarchy (their control files aside).
func places() []place {
	return []place{
		{glob: filepath.Join(dataplane.NetnsDir, "*"), what: "namespace"},
		{glob: filepath.Join(store.RegistryDir(), "*"), what: "store registry entry"},
		{glob: filepath.Join(rundir.Dir(), "*"), what: "in vnet's run directory"},
		{glob: "/sys/fs/cgroup/vnet/*", what: "cgroup", dirs: true},
		{glob: "/sys/fs/cgroup/*/vnet/*", what: "cgroup", dirs: true},
	}
}

// machineState lists what the places hold now, one "what path" each.
func machineState(places []place) map[string]bool {
	out := map[string]bool{}
	for _, p := range places {
		matches, _ := filepath.Glob(p.glob)
		for _, m := range matches {
			if p.dirs {
				if fi, err := os.Stat(m); err != nil || !fi.IsDir() {
					continue
				}
			}
			out[p.what+" "+m] = true
		}
	}
	return out
}

// leftBehind is what after holds that before did not, sorted, each with
// what it names when it is a registry entry (the store's directory).
func leftBehind(before, after map[string]bool) []string {
	var out []string
	for k := range after {
		if before[k] {
			continue
		}
		if path, ok := strings.CutPrefix(k, "store registry entry "); ok {
			if b, err := os.ReadFile(path); err == nil {
				k += " (" + strings.TrimSpace(string(b)) + ")"
			}
		}
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
