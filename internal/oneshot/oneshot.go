// Package oneshot holds the settings of a process that makes one change
// and exits: a command such as apply, or a CNI plugin's call.
package oneshot

import (
	"os"
	"runtime/debug"
)

// CollectLessOften trades memory for time from the process's start:
// planning a large infrastructure allocates much that lives until the
// command ends, and collecting it as it goes costs a one-VM change at
// 1,000 VMs about a sixth of its CPU time (a CNI plugin's ADD at 1,000
// containers about a tenth), while the whole command allocates under
// 100 MB there. The collector then runs only when the heap nears the
// limit, which keeps it bounded. GOGC and GOMEMLIMIT, when set, decide
// instead.
func CollectLessOften() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(-1)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(512 << 20)
	}
}
