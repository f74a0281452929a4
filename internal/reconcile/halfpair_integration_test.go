package reconcile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
)

// unnameHeld takes a namespace's name away while an open file of it keeps
// the namespace, and the pairs with an end in it, alive: what a killed
// destroy leaves for a while, until the kernel's teardown of the unmounted
// namespace gets to it. Closing the returned file lets the kernel go on.
func unnameHeld(t *testing.T, name string) *os.File {
	t.Helper()
	path := filepath.Join(dataplane.NetnsDir, name)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	return f
}

// A VM's vNIC whose port was in a host namespace that is gone is a half
// pair: the apply replaces it, and a rollback of that apply cannot make it
// again and does not try to; the next apply converges.
func TestRollbackWithHalfPairs(t *testing.T) {
	eng := nstest.Engine(t)
	infra := nstest.Infra("ithalf")
	src := twoHosts(infra)
	nstest.Apply(t, eng, src)
	held := unnameHeld(t, ns(infra, "esx1"))

	doc, err := spec.Load("twohosts.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	eng.Full = true
	p, err := eng.Plan(doc)
	if err != nil {
		t.Fatal(err)
	}
	halves := 0
	for _, a := range p.Actions {
		if a.Old != nil && a.Old.HalfPair() {
			halves++
		}
	}
	if halves == 0 {
		t.Fatalf("no half pair in the plan:\n%s", p)
	}
	last := len(p.Actions) - 1
	eng.FailBefore = func(i int, _ plan.Action) error {
		if i == last {
			return errInjected
		}
		return nil
	}
	_, err = eng.Apply(doc)
	eng.FailBefore = nil
	if !errors.Is(err, reconcile.ErrRolledBack) || strings.Contains(err.Error(), "rollback incomplete") {
		t.Fatalf("apply failing at its last step, with %d half pairs replaced: %v", halves, err)
	}

	held.Close()
	if _, err := eng.Apply(doc); err != nil {
		t.Fatal(err)
	}
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Fatalf("after the repairing apply, a full one would change (%v):\n%s", err, p)
	}
}
