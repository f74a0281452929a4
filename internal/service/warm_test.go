package service

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// What a Local keeps warm belongs to one store file: the same file gives
// the same value and models; a file put in its place (a recovery) or a
// state directory made again (another store ID) gives new ones.
func TestWarmFollowsTheStoreFile(t *testing.T) {
	dir := t.TempDir()
	var w warm
	st1, memo1, err := w.get(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st2, memo2, err := w.get(dir, nil)
	if err != nil || st2 != st1 || memo2 != memo1 {
		t.Fatalf("the same file gave another value (%v)", err)
	}

	// A file renamed into the path, as a recovery puts one there.
	file := st1.File()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file+".new", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	st3, memo3, err := w.get(dir, nil)
	if err != nil || st3 == st1 || memo3 == memo1 {
		t.Fatalf("a file put in the path kept the old value and models (%v)", err)
	}
	if st3.ID() != st1.ID() {
		t.Fatalf("the recovered store's ID %s is not the store's %s", st3.ID(), st1.ID())
	}

	// A state directory made again is another store, with another ID.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	st4, memo4, err := w.get(dir, nil)
	if err != nil || st4 == st3 || memo4 == memo3 {
		t.Fatalf("a store made again kept the old value and models (%v)", err)
	}
	if st4.ID() == st3.ID() {
		t.Fatalf("a store made again kept the old ID %s", st4.ID())
	}
	if err := w.drop(); err != nil {
		t.Fatal(err)
	}
	if w.st != nil || w.memo != nil {
		t.Fatal("drop kept the store's value")
	}
}

// warmSpec is one host and a switch with the named VMs, each address
// 10.31.0.N/24 unless addrs says another.
func warmSpec(name string, vms []string, addrs map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nhosts:\n  - name: h1\nswitches:\n  - name: sw0\n    hosts: [h1]\n    portgroups: [{name: pg}]\nvms:\n", name)
	for i, vm := range vms {
		ip := addrs[vm]
		if ip == "" {
			ip = fmt.Sprintf("10.31.0.%d/24", i+1)
		}
		fmt.Fprintf(&b, "  - {name: %s, host: h1, nics: [{portgroup: pg, ip: %s}]}\n", vm, ip)
	}
	return b.String()
}

// A server's warm back end and commands of their own (each a Local of one
// operation, as a vnet command is) change the same infrastructure in
// turn. Whatever the server keeps must never plan against a state that is
// no longer there: after each step a fresh Local's full apply, which reads
// the whole infrastructure, finds nothing to repair, and the status the
// server gives is the spec last applied, by whoever applied it.
func TestWarmServerBesideCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the network; runs without -short")
	}
	nstest.RequireRoot(t)
	infra := nstest.Infra("warm")
	dir := t.TempDir()
	ctx := context.Background()
	server := &Local{StateDir: dir, ReadsFresh: time.Second}
	command := func() *Local { return &Local{StateDir: dir} }
	t.Cleanup(func() {
		if _, err := command().Destroy(ctx, infra, DestroyOptions{}); err != nil && !strings.Contains(err.Error(), "no such") {
			t.Errorf("cleanup: %v", err)
		}
		nstest.AssertGone(t, infra)
	})
	apply := func(l *Local, src string) *ApplyResult {
		t.Helper()
		doc, err := l.Load("", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Apply(ctx, Source{Doc: doc}, ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	exact := func(step string, vms int) {
		t.Helper()
		doc, err := command().Spec(ctx, infra)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		full, err := command().Apply(ctx, Source{Doc: doc}, ApplyOptions{DryRun: true, Full: true})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if len(full.Plan) != 0 {
			t.Fatalf("%s: the host is not what the record says; a full apply would do:\n%s", step, PlanText(full.Plan))
		}
		time.Sleep(time.Second) // the server's copy of the records is a second old at most
		sts, err := server.Status(ctx, []string{infra})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got := len(sts[0].VMs); got != vms {
			t.Fatalf("%s: the server's status has %d VMs, the spec %d", step, got, vms)
		}
	}

	two := warmSpec(infra, []string{"vm1", "vm2"}, nil)
	three := warmSpec(infra, []string{"vm1", "vm2", "vm3"}, map[string]string{"vm2": "10.31.0.22/24"})
	apply(server, two)
	exact("the server's first apply", 2)
	apply(server, two) // the server now holds the record's value and model

	if res := apply(command(), three); res.Executed == 0 {
		t.Fatal("a command's change did nothing")
	}
	exact("a command's change", 3)
	// The server's model is of the spec before the command's change: its
	// apply must undo that change, not plan against what it kept.
	if res := apply(server, two); res.Executed == 0 {
		t.Fatal("the server's apply after a command's change did nothing: it planned against what it kept")
	}
	exact("the server's apply after a command's", 2)
	if res := apply(server, two); len(res.Plan) != 0 {
		t.Fatalf("a second apply changes something:\n%s", PlanText(res.Plan))
	}

	// A command destroys it; the server's next apply makes it all again.
	if _, err := command().Destroy(ctx, infra, DestroyOptions{}); err != nil {
		t.Fatal(err)
	}
	if res := apply(server, two); res.Executed == 0 {
		t.Fatal("the server's apply after a destroy did nothing")
	}
	exact("the server's apply after a command's destroy", 2)

	// The store damaged and recovered from its good copy, which puts
	// another file in its place: the server's next change reads it afresh.
	if err := os.WriteFile(filepath.Join(dir, "state.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rec, err := store.Recover(dir, store.RecoverOptions{})
	if err != nil || !rec.Restored {
		t.Fatalf("recover: %+v %v", rec, err)
	}
	if res := apply(server, three); res.Executed == 0 {
		t.Fatal("the server's apply after a recovery did nothing")
	}
	exact("the server's apply after a recovery", 3)
}

// A server's edit of a VM reads the spec in force it kept and shows
// where its time goes before the engine's (Trace); the record it writes
// and a fresh Local's reading of it agree.
func TestWarmEditVMTraced(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the network; runs without -short")
	}
	nstest.RequireRoot(t)
	infra := nstest.Infra("wedit")
	dir := t.TempDir()
	ctx := context.Background()
	var trace bytes.Buffer
	server := &Local{StateDir: dir, Trace: &trace}
	t.Cleanup(func() {
		if _, err := (&Local{StateDir: dir}).Destroy(ctx, infra, DestroyOptions{}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		nstest.AssertGone(t, infra)
	})
	doc, err := server.Load("api:"+infra, []byte(warmSpec(infra, []string{"vm1", "vm2"}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Apply(ctx, Source{Doc: doc}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, addr := range []string{"10.31.0.7/24", "10.31.0.8/24"} {
		entry, err := spec.DecodeVM("api:"+infra, []byte("{host: h1, nics: [{portgroup: pg, ip: "+addr+"}]}"))
		if err != nil {
			t.Fatal(err)
		}
		trace.Reset()
		res, err := server.EditVM(ctx, VMEdit{Infra: infra, VM: "vm2", Entry: entry, File: "api:" + infra}, ApplyOptions{})
		if err != nil || res.Executed == 0 {
			t.Fatalf("edit %d: executed %v, %v", i, res, err)
		}
		for _, lap := range []string{"service: last record", "service: spec in force", "service: reworked", "service: warnings", "service: history entry", "service: applied"} {
			if !strings.Contains(trace.String(), lap) {
				t.Errorf("edit %d: no lap %q in the trace:\n%s", i, lap, trace.String())
			}
		}
		got, err := (&Local{StateDir: dir}).Spec(ctx, infra)
		if err != nil {
			t.Fatal(err)
		}
		if ip := got.Spec.VMs[1].NICs[0].IP; ip != addr {
			t.Fatalf("edit %d: the record holds %s, want %s", i, ip, addr)
		}
	}
}
