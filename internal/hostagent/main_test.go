package hostagent

import (
	"os"
	"testing"

	"github.com/vnet-project/vnet/internal/store/registrytest"
)

// The stores the tests leave records in register in a registry of the
// tests' own.
func TestMain(m *testing.M) { os.Exit(registrytest.Run(m)) }
