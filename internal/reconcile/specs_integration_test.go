package reconcile_test

import (
	"path/filepath"
	"testing"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/spec/speccache"
)

// An engine with a spec cache keeps each spec it recorded, and a change
// read against the last spec from the cache plans and applies what one
// without the cache does: a full apply after it finds nothing to do.
func TestSpecCacheKeepsTheAppliedSpec(t *testing.T) {
	eng := nstest.Engine(t)
	dir := filepath.Join(t.TempDir(), "spec-cache")
	eng.Specs = speccache.New(dir)
	infra := nstest.Infra("itspecs")
	base := twoHosts(infra)
	nstest.Apply(t, eng, base)
	if files, _ := filepath.Glob(filepath.Join(dir, "*.spec")); len(files) != 1 {
		t.Fatalf("%d specs kept after an apply, want 1", len(files))
	}
	added := withExtraVM(base)
	// Another process's engine: the last spec comes from the cache's file.
	eng.Specs = speccache.New(dir)
	scoped := planOf(t, eng, added, false)
	full := planOf(t, eng, added, true)
	if scoped != full || scoped == "" {
		t.Fatalf("scoped plan:\n%s\nfull plan:\n%s", scoped, full)
	}
	nstest.Apply(t, eng, added)
	if p := planOf(t, eng, added, true); p != "" {
		t.Errorf("a full apply after the change would do:\n%s", p)
	}
}
