package service

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store/etcdstore/etcdtest"
)

const editVMBase = `name: ev
hosts:
  - {name: hv1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: vmnic0}}]
    portgroups: [{name: pg, subnet: 10.9.0.0/24}]
vms:
  - {name: web1, host: hv1, nics: [{portgroup: pg, ip: 10.9.0.1/24}]}
  - name: web2
    host: hv1
    nics: [{portgroup: pg, ip: 10.9.0.2/24}]
`

// TestVMEditApplyTo: the edit is the spec in force with one VM written in
// or taken out, as spec.EditVMs makes it; its problems are the entry's.
func TestVMEditApplyTo(t *testing.T) {
	now, err := spec.Load("ev.yaml", []byte(editVMBase))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, vm, body string // body "": take the VM out
		noSpec         bool
		want           string // the VMs after, with their first address
		wantErr        error
		errPath        string
		errLine        int
	}{
		{name: "replace keeps the place", vm: "web1", body: "host: hv1\nnics: [{portgroup: pg, ip: 10.9.0.7/24}]\n", want: "web1=10.9.0.7/24 web2=10.9.0.2/24"},
		{name: "add goes last", vm: "web3", body: `{"name": "web3", "host": "hv1", "nics": [{"portgroup": "pg", "ip": "10.9.0.3/24"}]}`, want: "web1=10.9.0.1/24 web2=10.9.0.2/24 web3=10.9.0.3/24"},
		{name: "delete", vm: "web1", want: "web2=10.9.0.2/24"},
		{name: "delete an unknown VM", vm: "web9", wantErr: ErrNoVM},
		{name: "an unknown VM is not found", vm: "web9", wantErr: ErrNotFound},
		{name: "nothing applied", vm: "web1", noSpec: true, wantErr: ErrNotFound},
		{name: "the entry names another VM", vm: "web1", body: "name: web5\nhost: hv1\nnics: [{portgroup: pg}]\n", wantErr: spec.ErrInvalid, errPath: "name", errLine: 1},
		{name: "a problem of the entry, at its line", vm: "web2", body: "host: hv1\nnics:\n  - {portgroup: nope}\n", wantErr: spec.ErrInvalid, errPath: "nics[0].portgroup", errLine: 3},
		{name: "a taken address", vm: "web3", body: "host: hv1\nnics:\n  - {portgroup: pg, ip: 10.9.0.1/24}\n", wantErr: spec.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := VMEdit{Infra: "ev", VM: tt.vm, File: "api:ev"}
			if tt.body != "" {
				if e.Entry, err = spec.DecodeVM("body", []byte(tt.body)); err != nil {
					t.Fatal(err)
				}
			}
			in := now
			if tt.noSpec {
				in = nil
			}
			var next *spec.Document
			vm, err := e.Written()
			if err == nil {
				next, err = e.applyTo(in, vm)
			}
			if tt.wantErr != nil || err != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
				var errs spec.Errors
				if tt.errPath != "" && (!errors.As(err, &errs) || errs[0].Path != tt.errPath || errs[0].Pos.Line != tt.errLine) {
					t.Errorf("error %v, want %s at line %d", err, tt.errPath, tt.errLine)
				}
				return
			}
			var got []string
			for _, vm := range next.Spec.VMs {
				got = append(got, vm.Name+"="+vm.NICs[0].IP)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("VMs %s, want %s", strings.Join(got, " "), tt.want)
			}
			if next.File != "api:ev" {
				t.Errorf("file %q", next.File)
			}
			// The edited spec is what loading its text gives.
			again, err := spec.Load(next.File, next.Source)
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Spec.VMs) != len(next.Spec.VMs) {
				t.Errorf("reloaded %d VMs, edit holds %d", len(again.Spec.VMs), len(next.Spec.VMs))
			}
		})
	}
}

// Over etcd a one-VM edit stores the spec in force with the edit as the
// next generation, as an apply of that spec stores it: a dry run stores
// nothing, the history entry is an apply's.
func TestClusterEditVM(t *testing.T) {
	c := ClusterOf(etcdtest.Store(t), nil)
	ctx := context.Background()
	if _, err := c.Apply(ctx, Source{File: specFile(t, twoHosts)}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	entry, err := spec.DecodeVM("body", []byte("host: hv2\nnics: [{portgroup: pg-vm, ip: 10.20.0.3/24}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	add := VMEdit{Infra: "c1", VM: "vm3", Entry: entry, File: "api:c1"}
	res, err := c.EditVM(ctx, add, ApplyOptions{DryRun: true, Detail: true})
	if err != nil || res.Stored.Generation != 2 || len(res.Plan) == 0 {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if in, _ := c.Get(ctx, "c1"); in.Generation != 1 {
		t.Fatalf("a dry run stored generation %d", in.Generation)
	}
	if res, err = c.EditVM(ctx, add, ApplyOptions{}); err != nil || res.Stored.Generation != 2 {
		t.Fatalf("add: %+v %v", res, err)
	}
	if res, err = c.EditVM(ctx, VMEdit{Infra: "c1", VM: "vm1", File: "api:c1"}, ApplyOptions{}); err != nil || res.Stored.Generation != 3 {
		t.Fatalf("remove: %+v %v", res, err)
	}
	if _, err = c.EditVM(ctx, VMEdit{Infra: "c1", VM: "vm1"}, ApplyOptions{}); !errors.Is(err, ErrNoVM) {
		t.Errorf("remove again: %v", err)
	}
	if _, err = c.EditVM(ctx, VMEdit{Infra: "c9", VM: "vm1"}, ApplyOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("an infrastructure not applied: %v", err)
	}
	doc, err := c.Spec(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, vm := range doc.Spec.VMs {
		got = append(got, vm.Name+"@"+vm.Host+"="+vm.NICs[0].IP)
	}
	if strings.Join(got, " ") != "vm2@hv2=10.20.0.2/24 vm3@hv2=10.20.0.3/24" {
		t.Errorf("the spec in force: %v", got)
	}
	h, err := c.History(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if last := h.Entries[len(h.Entries)-1]; h.Current != 3 || last.Verb != history.Apply {
		t.Errorf("history: current %d, last %+v", h.Current, last)
	}
}
