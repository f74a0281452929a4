// Package registrytest gives a package's tests a store registry of their
// own. Tests whose temporary stores end with records would otherwise
// leave a file per store in the machine's registry (store.RegistryDir),
// naming a directory that is gone once the test is.
package registrytest

import (
	"fmt"
	"os"
	"testing"

	"github.com/vnet-project/vnet/internal/store"
)

// Run runs the package's tests with store.RunDirEnv at a new temporary
// directory, removed after, and returns their exit code. The stores the
// tests open register there, and so do the vnet commands they run, which
// inherit the environment. Tests of the registry itself still have one,
// only not the machine's. A package's TestMain calls it:
//
//	func TestMain(m *testing.M) { os.Exit(registrytest.Run(m)) }
func Run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "vnet-run-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "a run directory for the tests: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Setenv(store.RunDirEnv, dir); err != nil {
		fmt.Fprintf(os.Stderr, "a run directory for the tests: %v\n", err)
		return 1
	}
	return m.Run()
}
