package dataplane

import (
	"os"
	"testing"

	"github.com/vnet-project/vnet/internal/rundir/rundirtest"
)

// The notes of what the kernel can do go in a run directory of the tests'
// own, not the machine's.
func TestMain(m *testing.M) { os.Exit(rundirtest.Run(m)) }
