package crashtest

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// agentProcesses are the live `vnet agent run INFRA --state-dir STATE`
// processes, found by their command lines rather than by the pid file
// vnet itself goes by, so that the suite counts every agent a kill may
// have left running, not only the one holding the file. A zombie has no
// command line and is no agent.
func agentProcesses(t *testing.T, state, infra string) []int {
	t.Helper()
	want, err := filepath.EvalSymlinks(state)
	if err != nil {
		want = state
	}
	var out []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if isAgent(argv, infra, want) {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

// isAgent recognizes the command line teamagent.Ensure starts.
func isAgent(argv []string, infra, state string) bool {
	if len(argv) != 6 || !strings.Contains(filepath.Base(argv[0]), "vnet") || argv[1] != "agent" || argv[2] != "run" || argv[3] != infra || argv[4] != "--state-dir" {
		return false
	}
	dir, err := filepath.EvalSymlinks(argv[5])
	return err == nil && dir == state
}
