package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A "%p" in VNET_CPUPROFILE is the process's ID, so that the calls of a
// plugin a runtime starts anew each time keep a profile each.
func TestCPUProfileNamedByProcess(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("VNET_CPUPROFILE", filepath.Join(dir, "add.%p"))
	startCPUProfile()()
	want := filepath.Join(dir, "add."+strconv.Itoa(os.Getpid()))
	if info, err := os.Stat(want); err != nil || info.Size() == 0 {
		t.Fatalf("no profile at %s: %v", want, err)
	}
}
