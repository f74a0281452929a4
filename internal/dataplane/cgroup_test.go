package dataplane

import (
	"os"
	"testing"
)

// Where the usual places hold the hierarchies, they are the ones the mount
// table names first: looking there alone finds what reading it finds.
func TestUsualCgroupsAreTheMountedOnes(t *testing.T) {
	usual, ok := usualCgroups(cgroupRoot)
	if !ok {
		t.Skipf("%s holds no hierarchies vnet limits CPUs with: the mount table is read (as here)", cgroupRoot)
	}
	if mounted := mountedCgroups(); *usual != *mounted {
		t.Errorf("at %s: %+v; the mount table: %+v", cgroupRoot, *usual, *mounted)
	}
}

// A directory that is no cgroup mount, or holds none, is not taken for one.
func TestUsualCgroupsElsewhere(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/cpu", 0o755); err != nil {
		t.Fatal(err)
	}
	if c, ok := usualCgroups(dir); ok {
		t.Errorf("%s taken for cgroup mounts: %+v", dir, *c)
	}
	if c, ok := usualCgroups(dir + "/absent"); ok {
		t.Errorf("a missing directory taken for cgroup mounts: %+v", *c)
	}
}
