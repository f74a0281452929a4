package reconcile_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/faultfs"
	"github.com/vnet-project/vnet/internal/store/registrytest"
)

func TestMain(m *testing.M) {
	faultfs.ServeIfChild()
	os.Exit(registrytest.Run(m))
}

// oneHost is a host with one VM, and with vms VMs more.
func oneHost(name string, vms int) string {
	src := fmt.Sprintf(`name: %s
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: sw
    uplinks: [{name: up, nics: {esx1: vmnic0}}]
    portgroups: [{name: pg}]
vms:
  - {name: vm0, host: esx1, nics: [{portgroup: pg, ip: 10.1.0.10/24}]}
`, name)
	for i := 1; i <= vms; i++ {
		src += fmt.Sprintf("  - {name: vm%d, host: esx1, nics: [{portgroup: pg, ip: 10.1.0.%d/24}]}\n", i, 10+i)
	}
	return src
}

// recordedSpec is the spec the record of infra in the store file path
// holds ("" for no record, "-" for no file), read through a store of its
// own so that the file is checked whole.
func recordedSpec(t *testing.T, path, infra string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "-"
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.db"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenBolt(dir)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer st.Close()
	rec, err := st.Get(infra)
	if errors.Is(err, store.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(rec.Spec)
}

// Whatever write of an apply fails (state.db, its good copy, the pending
// note, the spec cache, the event journal the commands append to), and
// however (no space, a file system gone read-only), both store files name
// exactly what the host holds: the spec before, with the host rolled back,
// or the new one, with the host changed (or, when the store could keep
// the write but not its good copy, state.db the new and the copy gone or
// the spec before). The next apply converges and a further one changes
// nothing, status shows no drift, and both files name the spec. Each
// request that changes something in the state directory fails in turn,
// for a first apply and for one that adds a VM.
func TestEveryStateWriteOfAnApplyFailingInTurn(t *testing.T) {
	nstest.RequireRoot(t)
	ffs := faultfs.Mount(t)
	for _, tc := range []struct{ name, from string }{{"first apply", ""}, {"one VM added", "from"}} {
		for _, f := range []struct {
			name  string
			fault faultfs.Fault
		}{{"no space", faultfs.Fault{Errno: syscall.ENOSPC}}, {"read-only from then on", faultfs.Fault{Errno: syscall.EROFS, Persist: true}}} {
			t.Run(tc.name+"/"+f.name, func(t *testing.T) {
				dir, err := os.MkdirTemp(ffs.Dir, "state-")
				if err != nil {
					t.Fatal(err)
				}
				everyWriteFailing(t, dir, tc.from != "", func(k int) { ffs.Arm(t, k, f.fault) }, func() bool {
					_, fired := ffs.Disarm(t)
					return fired
				})
			})
		}
	}
}

// The same on a real file system that fills: the state directory on a
// tmpfs with no space left, then 4 KiB, 8 KiB... until the apply fits.
func TestApplyOnAFileSystemFillingAtEachWrite(t *testing.T) {
	nstest.RequireRoot(t)
	root := faultfs.Tmpfs(t, 32<<20)
	for _, tc := range []struct{ name, from string }{{"first apply", ""}, {"one VM added", "from"}} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp(root, "state-")
			if err != nil {
				t.Fatal(err)
			}
			free, failed := func() {}, true
			everyWriteFailing(t, dir, tc.from != "", func(k int) { free = faultfs.Fill(t, root, int64(k-1)*4096) }, func() bool {
				free()
				return failed
			}, func(err error) { failed = err != nil })
		})
	}
}

// everyWriteFailing applies a spec of one VM more than the one before
// (from nothing unless incremental) with the state in dir, arming a
// failure of the kth write for k = 1, 2, ... until disarm says none was
// met, and checks what each apply that met one left (see
// TestEveryStateWriteOfAnApplyFailingInTurn).
func everyWriteFailing(t *testing.T, dir string, incremental bool, arm func(k int), disarm func() bool, seen ...func(error)) {
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	st, err := store.OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	infra := nstest.Infra("itwrite")
	from, to := "", oneHost(infra, 1)
	if incremental {
		from = oneHost(infra, 0)
	}
	load := func(src string) *spec.Document {
		doc, err := spec.Load("spec.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	toDoc := load(to)
	eng := &reconcile.Engine{DP: dp, Store: st, Log: io.Discard, Specs: speccache.New(filepath.Join(dir, "spec-cache"))}
	journal := events.In(dir)
	t.Cleanup(func() {
		if _, err := eng.Destroy(infra); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		nstest.AssertGone(t, infra)
		st.Close()
	})
	// An apply as the commands make it: the apply, then its event, whose
	// failure fails nothing.
	apply := func(doc *spec.Document) error {
		res, err := eng.Apply(doc)
		_ = journal.Append(events.Event{Action: events.Apply, Infra: infra, OK: err == nil, Changes: res.Executed})
		return err
	}
	reset := func() {
		t.Helper()
		if from == "" {
			if _, err := eng.Destroy(infra); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := apply(load(from)); err != nil {
			t.Fatal(err)
		}
	}
	path, good := filepath.Join(dir, "state.db"), filepath.Join(dir, "state.db.good")
	reset()
	if err := apply(toDoc); err != nil {
		t.Fatal(err)
	}
	applied := nstest.Snapshot(t, infra)
	outcomes := map[string]int{}
	defer func() { t.Logf("outcomes: %v", outcomes) }()
	for k, fired := 1, true; fired; k++ {
		reset()
		before := nstest.Snapshot(t, infra)
		arm(k)
		err := apply(toDoc)
		for _, s := range seen {
			s(err)
		}
		fired = disarm()
		host, inFile, inCopy := nstest.Snapshot(t, infra), recordedSpec(t, path, infra), recordedSpec(t, good, infra)
		switch {
		case errors.Is(err, store.ErrWriteUnknown):
			t.Fatalf("write %d failed: the store cannot tell what it holds: %v", k, err)
		case err == nil:
			outcomes["applied"]++
			if !slices.Equal(host, applied) || inFile != to || inCopy != to {
				t.Fatalf("write %d failed and the apply succeeded, yet the host %s, state.db holds %q, its copy %q",
					k, diffLines(applied, host), inFile, inCopy)
			}
		case errors.Is(err, store.ErrWriteKept):
			outcomes["applied, its good copy not kept"]++
			if !slices.Equal(host, applied) || inFile != to || inCopy != "-" && inCopy != from {
				t.Fatalf("write %d failed: %v; the host %s, state.db holds %q, its copy %q", k, err, diffLines(applied, host), inFile, inCopy)
			}
		default:
			outcomes["rolled back"]++
			if !slices.Equal(host, before) || inFile != from || inCopy != from && !(from == "" && inCopy == "-") {
				t.Fatalf("write %d failed: %v; the host %s, state.db holds %q, its copy %q, not the spec before",
					k, err, diffLines(before, host), inFile, inCopy)
			}
		}
		// With nothing failing, the next apply converges, status agrees,
		// and a further apply would change nothing.
		if err := apply(toDoc); err != nil {
			t.Fatalf("after write %d failed: %v", k, err)
		}
		if host := nstest.Snapshot(t, infra); !slices.Equal(host, applied) {
			t.Fatalf("after write %d failed, the next apply left the host %s", k, diffLines(applied, host))
		}
		if p, err := eng.Plan(toDoc); err != nil || !p.Empty() {
			t.Fatalf("after write %d failed, a further apply would change %v (%v)", k, p, err)
		}
		s, err := eng.Status(toDoc)
		if err != nil || len(s.Drift) > 0 {
			t.Fatalf("after write %d failed, status: drift %q (%v)", k, s.Drift, err)
		}
		if inFile, inCopy := recordedSpec(t, path, infra), recordedSpec(t, good, infra); inFile != to || inCopy != to {
			t.Fatalf("after write %d failed, state.db holds %q, its copy %q", k, inFile, inCopy)
		}
	}
	if outcomes["rolled back"] == 0 {
		t.Fatal("no apply failed")
	}
}
