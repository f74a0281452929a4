package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/store"
)

// requireRoot skips, loudly, a test that makes namespaces: without root,
// and under -short, which runs the unit tests alone (make unit).
func requireRoot(t *testing.T) {
	t.Helper()
	nstest.RequireRoot(t)
}

func writeSpec(t *testing.T, name, subnet string) string {
	t.Helper()
	src := `name: ` + name + `
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - {name: sw0, uplinks: [{name: u1, nics: {esx1: vmnic0}}], portgroups: [{name: pg}]}
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg, ip: ` + subnet + `.1/24}]}
`
	f := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// A damaged state file is reported, not panicked over; recover restores
// the good copy, and without one starts empty and still finds (and lets
// destroy remove) the infrastructure by its marks.
func TestRecoverDamagedState(t *testing.T) {
	requireRoot(t)
	state := t.TempDir()
	rec := nstest.Infra("clirec")
	f := writeSpec(t, rec, "10.72.0")
	t.Cleanup(func() { run(t, state, "destroy", rec) })
	if out, code := run(t, state, "apply", f); code != 0 {
		t.Fatalf("apply: %d %s", code, out)
	}
	db := filepath.Join(state, "state.db")
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	for i := 2 * 4096; i < len(b); i++ {
		b[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, state, "status")
	t.Logf("vnet status:\n%s", out)
	if code != 1 || strings.Contains(out, "panic") || !strings.Contains(out, db) || !strings.Contains(out, "recover") {
		t.Fatalf("status of a damaged store: exit %d\n%s", code, out)
	}
	out, code = run(t, state, "recover")
	t.Logf("vnet recover:\n%s", out)
	if code != 0 || !strings.Contains(out, "restored") || !strings.Contains(out, rec+": 3 namespaces recorded") {
		t.Fatalf("recover: exit %d\n%s", code, out)
	}
	if out, code := run(t, state, "apply", f); code != 0 || !strings.Contains(out, "no changes") {
		t.Errorf("apply after recovery: %d %s", code, out)
	}

	// No good copy: an empty store with the same ID.
	os.Remove(filepath.Join(state, "state.db.good"))
	os.WriteFile(db, []byte("garbage"), 0o600)
	out, code = run(t, state, "status")
	if code != 1 || !strings.Contains(out, "invalid database") || !strings.Contains(out, "recover") {
		t.Fatalf("status of a garbage store: exit %d\n%s", code, out)
	}
	out, code = run(t, state, "recover")
	t.Logf("vnet recover:\n%s", out)
	if code != 0 || !strings.Contains(out, "started an empty store") || !strings.Contains(out, "made by this store, not recorded") {
		t.Fatalf("recover without a good copy: exit %d\n%s", code, out)
	}
	if out, code := run(t, state, "destroy", rec); code != 0 || !strings.Contains(out, "destroyed "+rec) {
		t.Fatalf("destroy from marks: %d %s", code, out)
	}
	for _, ns := range nstest.Namespaces(rec) {
		t.Errorf("%s left behind", ns)
	}
}

// While one infrastructure is being changed, others can be read and
// changed, and the same one is refused with a message naming the holder.
func TestLocksArePerInfrastructure(t *testing.T) {
	requireRoot(t)
	state := t.TempDir()
	lka, lkb := nstest.Infra("clilka"), nstest.Infra("clilkb")
	fa, fb := writeSpec(t, lka, "10.73.0"), writeSpec(t, lkb, "10.74.0")
	t.Cleanup(func() { run(t, state, "destroy", lka); run(t, state, "destroy", lkb) })
	for _, f := range []string{fa, fb} {
		if out, code := run(t, state, "apply", f); code != 0 {
			t.Fatalf("apply: %d %s", code, out)
		}
	}
	// This test holds lka's lock, as a long destroy of it would.
	st, err := store.OpenBolt(state)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := st.Lock(lka)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out, code := run(t, state, "status", lkb); code != 0 || !strings.Contains(out, lkb) {
		t.Errorf("status of another infrastructure: %d %s", code, out)
	}
	if out, code := run(t, state, "status"); code != 0 || !strings.Contains(out, lka) {
		t.Errorf("status of all: %d %s", code, out)
	}
	if out, code := run(t, state, "exec", lkb+"/vm1", "--", "true"); code != 0 {
		t.Errorf("exec in another infrastructure: %d %s", code, out)
	}
	if out, code := run(t, state, "ioc", "stats", lkb, "-i", "100ms"); code != 0 {
		t.Errorf("ioc stats of another infrastructure: %d %s", code, out)
	}
	if out, code := run(t, state, "apply", fb); code != 0 {
		t.Errorf("apply of another infrastructure: %d %s", code, out)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("reads and another apply took %s under the lock", d)
	}
	for _, args := range [][]string{{"apply", fa}, {"destroy", lka}} {
		out, code := run(t, state, args...)
		if code == 0 || !strings.Contains(out, lka+" is being changed by another vnet command (pid ") {
			t.Errorf("%s while locked: %d %s", args[0], code, out)
		}
	}
	unlock()
	st.Close()
	if out, code := run(t, state, "destroy", lka); code != 0 {
		t.Errorf("destroy after the lock is released: %d %s", code, out)
	}
}

// Namespaces whose store cannot be found (its directory removed, as a
// crashed run's temporary state directory is, or moved and not opened
// since) are refused by another store, and recover --adopt takes them only
// when told that store is gone for good.
func TestOrphanedNamespacesAreAdopted(t *testing.T) {
	requireRoot(t)
	gone, state := t.TempDir(), t.TempDir()
	orph := nstest.Infra("cliorph")
	f := writeSpec(t, orph, "10.75.0")
	t.Cleanup(func() { run(t, state, "destroy", orph) })
	if out, code := run(t, gone, "apply", f); code != 0 {
		t.Fatalf("apply: %d %s", code, out)
	}
	goneID := store.IDAt(gone)
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	adoptGone := "vnet recover --adopt " + orph + " --store-gone " + goneID
	out, code := run(t, state, "apply", f)
	if code == 0 || !strings.Contains(out, adoptGone) {
		t.Fatalf("apply over an orphan: %d %s", code, out)
	}
	out, code = run(t, state, "recover", "--adopt", orph)
	t.Logf("vnet recover --adopt:\n%s", out)
	if code == 0 || !strings.Contains(out, "adopted nothing") || !strings.Contains(out, adoptGone) || !strings.Contains(out, "not there") {
		t.Fatalf("recover --adopt of a store not found: %d %s", code, out)
	}
	out, code = run(t, state, "recover", "--adopt", orph, "--store-gone", goneID)
	t.Logf("vnet recover --adopt --store-gone:\n%s", out)
	if code != 0 || !strings.Contains(out, "adopted 3 namespaces of "+orph) || !strings.Contains(out, orph+": 3 namespaces made by this store, not recorded") {
		t.Fatalf("recover --adopt --store-gone: %d %s", code, out)
	}
	if out, code := run(t, state, "apply", f); code != 0 || !strings.Contains(out, "no changes") {
		t.Errorf("apply after adopting: %d %s", code, out)
	}
	if out, code := run(t, state, "destroy", orph); code != 0 {
		t.Errorf("destroy: %d %s", code, out)
	}
	for _, ns := range nstest.Namespaces(orph) {
		t.Errorf("%s left behind", ns)
	}
}
