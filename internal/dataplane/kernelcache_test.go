package dataplane

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/rundir"
)

// TestProbeCached: a success is noted for its key and read back instead of
// loading again; another key (a boot, a kernel, a build of the programs),
// a refusal, a dropped note and a note others could have written all make
// the next command load.
func TestProbeCached(t *testing.T) {
	t.Setenv(rundir.Env, t.TempDir())
	key := "programs a boot b release 6.18"
	loads := 0
	refuse := errors.New("refused")
	var loadErr error
	probe := func() error {
		return probeCached("probe", func() (string, error) { return key, nil }, func() error { loads++; return loadErr })
	}
	step := func(name string, wantLoads int, wantErr error) {
		t.Helper()
		loads = 0
		if err := probe(); !errors.Is(err, wantErr) {
			t.Fatalf("%s: probe = %v, want %v", name, err, wantErr)
		}
		if loads != wantLoads {
			t.Fatalf("%s: loaded %d times, want %d", name, loads, wantLoads)
		}
	}
	step("first", 1, nil)
	step("noted", 0, nil)
	key = "programs a boot c release 6.18"
	step("another boot", 1, nil)
	step("noted again", 0, nil)
	dropNote("probe")
	step("dropped", 1, nil)
	key, loadErr = "programs d boot c release 6.18", refuse
	step("refused", 1, refuse)
	step("a refusal is not noted", 1, refuse)
	loadErr = nil
	step("loads", 1, nil)
	if err := os.Chmod(filepath.Join(kernelCacheDir(), "probe"), 0o666); err != nil {
		t.Fatal(err)
	}
	step("others could write it", 1, nil)
	step("rewritten", 0, nil)

	noKey := func() (string, error) { return "", errors.New("no boot id") }
	loads = 0
	for i := 0; i < 2; i++ {
		if err := probeCached("probe", noKey, func() error { loads++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if loads != 2 {
		t.Fatalf("without a key: loaded %d times, want 2", loads)
	}
}

// TestPortProgKey: the key names the build's programs, the boot and the
// kernel release.
func TestPortProgKey(t *testing.T) {
	k, err := portProgKey()
	if err != nil {
		t.Skip("no boot id here:", err)
	}
	rel, _ := kernelRelease()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	for _, part := range []string{string(boot[:8]), rel, "programs "} {
		if !strings.Contains(k, part) {
			t.Errorf("key %q lacks %q", k, part)
		}
	}
}

// TestFastPathKey: the note of the fast path holds for its own probe, the
// boot and the release, never for the port programs' note.
func TestFastPathKey(t *testing.T) {
	k, err := kernelKey("fast path")()
	if err != nil {
		t.Skip("no boot id here:", err)
	}
	p, _ := portProgKey()
	rel, _ := kernelRelease()
	if !strings.HasPrefix(k, "fast path boot ") || !strings.HasSuffix(k, "release "+rel) || k == p {
		t.Errorf("fast path key %q (port programs' %q)", k, p)
	}
}
