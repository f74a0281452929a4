package main

import (
	"strings"
	"testing"
)

// netserver --help names every limit with its default: a test that moves
// no data is cut after the start timeout, one that moved data and paused
// only after the longer stall timeout.
func TestNetserverHelpPrintsLimits(t *testing.T) {
	usage := netserverCmd().Flags().FlagUsages()
	for _, want := range []string{
		"--start-timeout duration     a test whose data connection has moved no data by then is cut (default 5s)",
		"--stall-timeout duration     a test whose data stopped moving for this long is cut (default 30s)",
		"--max-idle int", "--max-idle-per-client int", "--max-tests int", "--max-tests-per-client int",
		"--max-memory size", "--request-timeout duration",
	} {
		if !strings.Contains(usage, want) {
			t.Errorf("netserver --help lacks %q:\n%s", want, usage)
		}
	}
}
