// Package rundirtest gives a package's tests a run directory of their own
// (rundir.Env at a temporary directory): the stores they open register
// there rather than in the machine's registry, and the notes of what the
// kernel can do are kept there, so that a test run leaves nothing in
// /run/vnet. The vnet commands the tests run inherit the variable.
package rundirtest

import (
	"fmt"
	"os"
	"testing"

	"github.com/vnet-project/vnet/internal/rundir"
)

// Run runs the package's tests with rundir.Env at a new temporary
// directory, removed after, and returns their exit code. A package's
// TestMain calls it:
//
//	func TestMain(m *testing.M) { os.Exit(rundirtest.Run(m)) }
func Run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "vnet-run-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "a run directory for the tests: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Setenv(rundir.Env, dir); err != nil {
		fmt.Fprintf(os.Stderr, "a run directory for the tests: %v\n", err)
		return 1
	}
	return m.Run()
}
