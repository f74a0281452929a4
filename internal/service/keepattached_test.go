package service

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// shop is an infrastructure's spec: its port groups on dvs0 (on host
// switchHost), a VM of its own, and the extra VMs given (YAML items).
func shop(t *testing.T, switchHost string, portgroups []string, vms ...string) *spec.Document {
	t.Helper()
	var pgs []string
	for i, pg := range portgroups {
		pgs = append(pgs, fmt.Sprintf("      - {name: %s, subnet: 10.50.%d.0/24}", pg, i))
	}
	src := fmt.Sprintf(`name: shop
hosts:
  - {name: hv1, nics: [{name: vmnic0, speed: 1Gbit}]}
  - {name: hv2, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {%s: vmnic0}}]
    portgroups:
%s
vms:
  - {name: web1, host: %s, nics: [{portgroup: pg-web, ip: 10.50.0.10/24}]}
`, switchHost, strings.Join(pgs, "\n"), switchHost)
	for _, vm := range vms {
		src += "  - " + vm + "\n"
	}
	doc, err := spec.Load("shop.yaml", []byte(src))
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	return doc
}

// container is a VM as the CNI plugin writes it.
func container(name, host, pg, ip, id string) string {
	return fmt.Sprintf(`{name: %s, host: %s, nics: [{portgroup: %s, ip: %s, mac: "02:00:00:00:00:%s", attach: {netns: ns-%s, ifname: eth0, container: %s, cni: web}}]}`,
		name, host, pg, ip, ip[len(ip)-5:len(ip)-3], id, id)
}

// The spec a rollback (or a restore) applies: the earlier one the user
// declared, with the VMs runtimes attach now as they are in place of those
// it held; refused, or with drop leaving them out, when what they sit on
// is gone.
func TestKeepAttached(t *testing.T) {
	guest := `{name: g-vm7, host: hv1, nics: [{portgroup: pg-db, mac: "52:54:00:00:00:07", attach: {tap: tap-vm7, container: 7c9e-uuid}}]}`
	c1 := container("c-one", "hv1", "pg-web", "10.50.0.21/24", "one")
	c1old := container("c-one", "hv1", "pg-web", "10.50.0.99/24", "one")
	c2 := container("c-two", "hv1", "pg-db", "10.50.1.22/24", "two")
	gone := container("c-gone", "hv1", "pg-web", "10.50.0.23/24", "gone")
	both := []string{"pg-web", "pg-db"}
	now := shop(t, "hv1", both, c1, c2)
	tests := []struct {
		name     string
		target   *spec.Document
		now      *spec.Document
		drop     bool
		applying bool     // an apply of a file, not a rollback
		wantVMs  []string // the result's VMs, in order; nil: refused
		kept     []string
		inTheWay []string
		leftOut  []string
		missing  string // what the first VM in the way lacks
		refusal  string // a line of the refusal, when not of containers in namespaces
		ip       string // c-one's address in the result
	}{
		{name: "kept as they are", target: shop(t, "hv1", both), now: now,
			wantVMs: []string{"web1", "c-one", "c-two"}, kept: []string{"c-one", "c-two"}, ip: "10.50.0.21/24"},
		{name: "as they are now, not as the earlier spec had them", target: shop(t, "hv1", both, c1old, gone), now: now,
			wantVMs: []string{"web1", "c-one", "c-two"}, kept: []string{"c-one", "c-two"}, leftOut: []string{"c-gone"}, ip: "10.50.0.21/24"},
		{name: "port group gone: refused", target: shop(t, "hv1", []string{"pg-web"}), now: now,
			kept: []string{"c-one"}, inTheWay: []string{"c-two"}, missing: "no port group pg-db"},
		{name: "port group gone: dropped", target: shop(t, "hv1", []string{"pg-web"}), now: now, drop: true,
			wantVMs: []string{"web1", "c-one"}, kept: []string{"c-one"}, inTheWay: []string{"c-two"}, ip: "10.50.0.21/24"},
		{name: "switch moved off the host", target: shop(t, "hv2", both), now: now,
			inTheWay: []string{"c-one", "c-two"}, missing: "port group pg-web's switch dvs0 not on host hv1"},
		{name: "name taken by a VM of the spec's own", target: shop(t, "hv1", both, "{name: c-one, host: hv1, nics: [{portgroup: pg-web}]}"), now: now,
			kept: []string{"c-two"}, inTheWay: []string{"c-one"}, missing: "a VM of its own named c-one"},
		{name: "address taken by a VM of the spec's own", target: shop(t, "hv1", both, "{name: old1, host: hv1, nics: [{portgroup: pg-web, ip: 10.50.0.21/24}]}"), now: now,
			kept: []string{"c-two"}, inTheWay: []string{"c-one"}, missing: "its address 10.50.0.21, which VM old1 has"},
		{name: "a libvirt guest's TAP", target: shop(t, "hv1", []string{"pg-web"}), now: shop(t, "hv1", both, c1, guest),
			kept: []string{"c-one"}, inTheWay: []string{"g-vm7"}, missing: "no port group pg-db", refusal: "VM g-vm7 on hv1 (container 7c9e-uuid; TAP tap-vm7 on pg-db): no port group pg-db"},
		{name: "nothing applied (a restore): the runtimes' VMs left out", target: shop(t, "hv1", both, c1, c2),
			wantVMs: []string{"web1"}, leftOut: []string{"c-one", "c-two"}},
		{name: "apply: kept as they are", target: shop(t, "hv1", both), now: now, applying: true,
			wantVMs: []string{"web1", "c-one", "c-two"}, kept: []string{"c-one", "c-two"}, ip: "10.50.0.21/24"},
		{name: "apply of a file holding them (vnet get's): as attached now, the file's others as written", target: shop(t, "hv1", both, c1old, gone), now: now, applying: true,
			wantVMs: []string{"web1", "c-one", "c-gone", "c-two"}, kept: []string{"c-one", "c-two"}, ip: "10.50.0.21/24"},
		{name: "apply: port group gone: refused", target: shop(t, "hv1", []string{"pg-web"}), now: now, applying: true,
			kept: []string{"c-one"}, inTheWay: []string{"c-two"}, missing: "no port group pg-db", refusal: "VM c-two on hv1 (container two; eth0 in namespace ns-two on pg-db, CNI network web): no port group pg-db"},
		{name: "apply: port group gone: dropped", target: shop(t, "hv1", []string{"pg-web"}), now: now, applying: true, drop: true,
			wantVMs: []string{"web1", "c-one"}, kept: []string{"c-one"}, inTheWay: []string{"c-two"}, ip: "10.50.0.21/24"},
		{name: "apply with nothing applied: the file's as written", target: shop(t, "hv1", both, c1, c2), applying: true,
			wantVMs: []string{"web1", "c-one", "c-two"}},
		{name: "no runtime's VMs anywhere", target: shop(t, "hv1", both), now: shop(t, "hv1", both), wantVMs: []string{"web1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, att, err := keepAttached("shop", "generation 1", tt.target, tt.now, tt.drop, tt.applying)
			refused := "rollback shop to generation 1: generation 1 has no place"
			if tt.applying {
				refused = "apply shop: generation 1 has no place"
			}
			if err != nil && errors.Is(err, ErrAttached) && !strings.HasPrefix(err.Error(), refused) {
				t.Errorf("the refusal does not begin %q:\n%v", refused, err)
			}
			names := func(vms []AttachedVM) (out []string) {
				for _, vm := range vms {
					out = append(out, vm.VM)
				}
				return out
			}
			if !slices.Equal(names(att.Kept), tt.kept) || !slices.Equal(names(att.InTheWay), tt.inTheWay) || !slices.Equal(att.LeftOut, tt.leftOut) {
				t.Errorf("kept %v, in the way %v, left out %v; want %v, %v, %v", names(att.Kept), names(att.InTheWay), att.LeftOut, tt.kept, tt.inTheWay, tt.leftOut)
			}
			if tt.missing != "" && (len(att.InTheWay) == 0 || att.InTheWay[0].Missing != tt.missing) {
				t.Errorf("in the way %+v, want the first missing %q", att.InTheWay, tt.missing)
			}
			if tt.wantVMs == nil {
				var ae *AttachedError
				if !errors.Is(err, ErrAttached) || !errors.As(err, &ae) || got != nil {
					t.Fatalf("got %v, %v; want it refused with ErrAttached", got, err)
				}
				if tt.refusal != "" {
					if !strings.Contains(err.Error(), "\n  "+tt.refusal+"\n") {
						t.Errorf("the refusal does not say %q:\n%v", tt.refusal, err)
					}
					return
				}
				for _, vm := range tt.inTheWay {
					if !strings.Contains(err.Error(), "VM "+vm) || !strings.Contains(err.Error(), "in namespace ns-") || !strings.Contains(err.Error(), "CNI network web") {
						t.Errorf("the refusal does not name %s and its attachment:\n%v", vm, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var vms []string
			for _, vm := range got.Spec.VMs {
				vms = append(vms, vm.Name)
			}
			if !slices.Equal(vms, tt.wantVMs) {
				t.Errorf("VMs %v, want %v", vms, tt.wantVMs)
			}
			if att.Dropped != (tt.drop && len(tt.inTheWay) > 0) {
				t.Errorf("dropped %v", att.Dropped)
			}
			if tt.ip != "" {
				vm, _ := got.Spec.VM("c-one")
				if vm.NICs[0].IP != tt.ip || vm.NICs[0].Attach.Container != "one" || vm.NICs[0].NetnsName() != "ns-one" {
					t.Errorf("c-one is %+v, want it as attached now", vm.NICs[0])
				}
			}
			// What the user declared stays byte for byte.
			if !strings.HasPrefix(string(got.Source), string(tt.target.Source[:strings.Index(string(tt.target.Source), "vms:")])) {
				t.Errorf("the declared part changed:\n%s", got.Source)
			}
		})
	}
}

// An apply of the spec in force with one VM of the user's edited keeps
// the runtimes' VMs as the edit left them: nothing to write in, the
// edited spec applied as it is.
func TestKeepAttachedOfAnEdit(t *testing.T) {
	now := shop(t, "hv1", []string{"pg-web"},
		"{name: c-one, host: hv1, nics: [{portgroup: pg-web, ip: 10.50.0.21/24, attach: {netns: ns-one, ifname: eth0, container: one, cni: web}}]}")
	edited, err := spec.EditVMs(now, nil, []spec.VM{{Name: "web1", Host: "hv1", NICs: []spec.VNIC{{PortGroup: "pg-web", IP: "10.50.0.11/24"}}}})
	if err != nil {
		t.Fatal(err)
	}
	got, att, err := keepAttached("shop", "the spec", edited, now, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if got != edited || len(att.Kept) != 1 || att.Kept[0].VM != "c-one" {
		t.Errorf("got another spec than the edit's (%v), kept %+v", got != edited, att.Kept)
	}
}
