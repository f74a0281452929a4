package api

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vnet-project/vnet/internal/store/registrytest"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := registrytest.Run(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// repoRoot is the module's directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// vnetBinary builds vnet once for the tests that run it.
func vnetBinary(t testing.TB) string {
	t.Helper()
	root := repoRoot(t)
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "vnet-apitest-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "vnet")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/vnet")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}
