package teamagent

import (
	"errors"
	"os"
	"testing"
)

// A second claim of the same infrastructure fails while the first holds
// it, and succeeds once it is released; the holder is the one running.
func TestClaimIsExclusive(t *testing.T) {
	dir := t.TempDir()
	c, err := Take(dir, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Take(dir, "x"); !errors.Is(err, ErrRunning) {
		t.Fatalf("a second claim while the first holds it: %v", err)
	}
	if pid, ok := Running(dir, "x"); !ok || pid != os.Getpid() {
		t.Errorf("Running = %d, %v; want this process", pid, ok)
	}
	if all := All(dir); len(all) != 1 || all["x"] != os.Getpid() {
		t.Errorf("All = %v", all)
	}
	c.Release()
	if _, ok := Running(dir, "x"); ok {
		t.Error("a released pid file still runs")
	}
	again, err := Take(dir, "x")
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	again.Release()
}

// A pid file nobody holds is stale, whatever pid it names, and harmless.
func TestStalePIDFileIsNoAgent(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(PIDFile(dir, "x"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid, ok := Running(dir, "x"); ok {
		t.Fatalf("a stale pid file runs as %d", pid)
	}
	if len(Orphans(dir, func(string) bool { return false })) != 0 {
		t.Error("a stale pid file is an orphan agent")
	}
	if err := Stop(dir, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(PIDFile(dir, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stop left the stale pid file: %v", err)
	}
}

// An agent whose pid file was removed claims it again, so that the next
// apply finds it; one whose file another agent took ends.
func TestKeepReclaimsALostPIDFile(t *testing.T) {
	dir := t.TempDir()
	c, err := Take(dir, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Release() }()
	if err := c.Keep(); err != nil {
		t.Fatalf("keep, untouched: %v", err)
	}
	os.Remove(PIDFile(dir, "x"))
	if _, ok := Running(dir, "x"); ok {
		t.Fatal("a removed pid file runs")
	}
	if err := c.Keep(); err != nil {
		t.Fatalf("keep after the file went: %v", err)
	}
	if pid, ok := Running(dir, "x"); !ok || pid != os.Getpid() {
		t.Fatalf("after keep: %d, %v", pid, ok)
	}
	os.Remove(PIDFile(dir, "x"))
	other, err := Take(dir, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if err := c.Keep(); !errors.Is(err, ErrRunning) {
		t.Errorf("keep after another agent took the file: %v", err)
	}
}
