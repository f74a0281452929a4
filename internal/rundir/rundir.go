// Package rundir says where vnet keeps what lasts until the machine boots
// again: the store registry and the notes of what the running kernel can
// do. It is in /run, which goes with a reboot, as the namespaces do.
package rundir

import "os"

// Env names the variable that moves the run directory away from Default.
// Tests set it to a temporary directory so that they leave nothing in the
// machine's, and the vnet commands they run inherit it.
const Env = "VNET_RUN_DIR"

// Default is the run directory when Env is unset.
const Default = "/run/vnet"

// Dir is Env's directory, else Default. It is read at each use, so that a
// test's main can set it before anything is kept.
func Dir() string {
	if dir := os.Getenv(Env); dir != "" {
		return dir
	}
	return Default
}
