package api

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/service"
)

// vmEditBase is the spec both infrastructures start from: MACs written
// out, so that two infrastructures' kernels compare once their names are
// made one.
const vmEditBase = `name: NAME
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {esx1: vmnic0}}]
    ioc: {enabled: true, pools: {vm: {shares: high, limit: 500Mbit}}}
    portgroups: [{name: pg-vm, pool: vm, subnet: 10.0.0.0/24}]
vms:
  - name: vm1
    host: esx1
    nics: [{portgroup: pg-vm, ip: 10.0.0.1/24, mac: "02:00:00:00:01:01"}]
  - name: vm2
    host: esx1
    nics: [{portgroup: pg-vm, ip: 10.0.0.2/24, mac: "02:00:00:00:01:02"}]
`

// TestVMResourceMatchesWholePut makes the same one-VM changes to two
// infrastructures, one by a PUT of its whole spec, the other through
// /vms/{vm}, and finds the same plans (dry run and done), the same spec
// in force, the same history entries and the same kernel.
func TestVMResourceMatchesWholePut(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the network; runs without -short")
	}
	nstest.RequireRoot(t)
	whole := fmt.Sprintf("vmw%d", os.Getpid()%100000)
	one := fmt.Sprintf("vmo%d", os.Getpid()%100000)
	be := &service.Local{StateDir: t.TempDir()}
	c, _ := NewClient(serveOnTheKernel(t, be, Config{SampleInterval: time.Second}, whole, one), testToken)
	ctx := context.Background()
	named := func(src, infra string) []byte { return []byte(strings.Replace(src, "NAME", infra, 1)) }
	for _, infra := range []string{whole, one} {
		if _, err := c.Apply(ctx, infra, "", named(vmEditBase, infra), false); err != nil {
			t.Fatalf("apply %s: %v", infra, err)
		}
	}

	vm3 := `{name: vm3, host: esx1, nics: [{portgroup: pg-vm, ip: 10.0.0.3/24, mac: "02:00:00:00:01:03"}]}`
	added := vmEditBase + "  - " + vm3 + "\n"
	moved := strings.Replace(added, "10.0.0.1/24", "10.0.0.11/24", 1)
	dropped := strings.Replace(moved, "  - name: vm2\n    host: esx1\n    nics: [{portgroup: pg-vm, ip: 10.0.0.2/24, mac: \"02:00:00:00:01:02\"}]\n", "", 1)
	steps := []struct {
		name  string
		spec  string // the whole spec after the change
		vm    string
		entry string // the VM's entry; "" takes it out
	}{
		{"add a VM", added, "vm3", vm3 + "\n"},
		{"change an address", moved, "vm1", "host: esx1\nnics:\n  - portgroup: pg-vm\n    ip: 10.0.0.11/24\n    mac: \"02:00:00:00:01:01\"\n"},
		{"remove a VM", dropped, "vm2", ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			var byWhole, byOne [2]*ApplyResult
			var err error
			for i, dry := range []bool{true, false} {
				o := service.ApplyOptions{DryRun: dry}
				if byWhole[i], err = c.ApplyWith(ctx, whole, "", named(st.spec, whole), o); err != nil {
					t.Fatalf("whole PUT (dry run %v): %v", dry, err)
				}
				if st.entry == "" {
					byOne[i], err = c.DeleteVM(ctx, one, st.vm, o)
				} else {
					byOne[i], err = c.PutVM(ctx, one, st.vm, []byte(st.entry), o)
				}
				if err != nil {
					t.Fatalf("one VM (dry run %v): %v", dry, err)
				}
				if a, b := planText(byWhole[i], whole), planText(byOne[i], one); !slices.Equal(a, b) || len(a) == 0 {
					t.Errorf("plans (dry run %v) differ or are empty:\nwhole:  %q\none VM: %q", dry, a, b)
				}
			}
			a, err := be.Spec(ctx, whole)
			if err != nil {
				t.Fatal(err)
			}
			b, err := be.Spec(ctx, one)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a.Spec.VMs, b.Spec.VMs) || !reflect.DeepEqual(a.Spec.Switches, b.Spec.Switches) {
				t.Errorf("specs in force differ:\nwhole:  %+v\none VM: %+v", a.Spec.VMs, b.Spec.VMs)
			}
			if a, b := kernelOf(t, whole), kernelOf(t, one); !slices.Equal(a, b) {
				t.Errorf("kernels differ:\nwhole:  %q\none VM: %q", a, b)
			}
			ha, err := c.History(ctx, whole)
			if err != nil {
				t.Fatal(err)
			}
			hb, err := c.History(ctx, one)
			if err != nil {
				t.Fatal(err)
			}
			ea, eb := ha.Entries[len(ha.Entries)-1], hb.Entries[len(hb.Entries)-1]
			if ha.Current != hb.Current || ea.Verb != eb.Verb || ea.Who != eb.Who || ea.Via != eb.Via || ea.Generation != eb.Generation {
				t.Errorf("history differs: whole %d %+v, one VM %d %+v", ha.Current, ea, hb.Current, eb)
			}
		})
	}

	// A problem of the entry is the entry's, at the body's line, and
	// changes nothing.
	before := kernelOf(t, one)
	_, err := c.PutVM(ctx, one, "vm4", []byte("host: esx1\nnics:\n  - portgroup: pg-nope\n"), service.ApplyOptions{})
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Body.Field != "nics[0].portgroup" || ae.Body.Line != 3 {
		t.Errorf("bad entry: %v %+v", err, ae)
	}
	if after := kernelOf(t, one); !slices.Equal(before, after) {
		t.Errorf("a refused entry changed the kernel")
	}
	if _, err := c.DeleteVM(ctx, one, "vm9", service.ApplyOptions{}); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("delete an unknown VM: %v", err)
	}
}

var derivedMAC = regexp.MustCompile(`\b([0-9a-f]{2}:){5}[0-9a-f]{2}\b`)

// portName is the name of a port's end on its host, which vnet derives
// from the infrastructure's name too.
var portName = regexp.MustCompile(`\bvn[0-9a-f]{8}\b`)

// planText is a result's plan with the infrastructure's name made one.
func planText(res *ApplyResult, infra string) []string {
	var out []string
	for _, a := range res.Plan {
		out = append(out, portName.ReplaceAllString(strings.ReplaceAll(a.Text, infra, "INFRA"), "vnPORT"))
	}
	return out
}

// kernelOf is what the kernel holds of infra (nstest.Snapshot), its name
// made one, and the port names and MACs vnet derives from it too (all
// MACs but the vNICs' the spec writes out).
func kernelOf(t *testing.T, infra string) []string {
	var out []string
	for _, line := range nstest.Snapshot(t, infra) {
		line = derivedMAC.ReplaceAllStringFunc(line, func(mac string) string {
			if strings.HasPrefix(mac, "02:00:00:00:01:") {
				return mac
			}
			return "MAC"
		})
		out = append(out, portName.ReplaceAllString(strings.ReplaceAll(line, infra, "INFRA"), "vnPORT"))
	}
	slices.Sort(out)
	return out
}
