package spec

import (
	"reflect"
	"strings"
	"testing"
)

const editBase = `name: ed
hosts:
  - {name: hv1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: vmnic0}}]
    portgroups: [{name: pg, subnet: 10.9.0.0/24}]
`

func TestEditVMs(t *testing.T) {
	box := VM{Name: "c1", Host: "hv1", NICs: []VNIC{{PortGroup: "pg", IP: "10.9.0.5/24", MAC: "02:00:00:00:00:05",
		Attach: &Attach{Netns: "cni-1", Ifname: "eth0", Container: "true", CNI: "null"}}}}
	web2 := VM{Name: "web1", Host: "hv1", NICs: []VNIC{{PortGroup: "pg", IP: "10.9.0.9/24"}}}
	tests := []struct {
		name, src  string
		drop       []string
		put        []VM
		want       []string // the VMs after, in order
		keep, gone []string // text the result must hold, and must not
	}{
		{name: "add to a block list", src: editBase + "vms:\n  # the web tier\n  - {name: web1, host: hv1, nics: [{portgroup: pg, ip: 10.9.0.1/24}]}\n  - name: web2\n    host: hv1\n    nics: [{portgroup: pg}]\n# after\n",
			put: []VM{box}, want: []string{"web1", "web2", "c1"}, keep: []string{"# the web tier", "# after", "  - name: web2\n    host: hv1\n"}},
		{name: "drop from the middle", src: editBase + "vms:\n  - {name: web1, host: hv1, nics: [{portgroup: pg}]}\n  - {name: c1, host: hv1, nics: [{portgroup: pg}]}\n  - {name: web3, host: hv1, nics: [{portgroup: pg}]}\n",
			drop: []string{"c1"}, want: []string{"web1", "web3"}, gone: []string{"c1"}},
		{name: "replace in place", src: editBase + "vms:\n- {name: web1, host: hv1, nics: [{portgroup: pg, ip: 10.9.0.1/24}]}\n- {name: web3, host: hv1, nics: [{portgroup: pg}]}\nhostports: []\n",
			put: []VM{web2}, want: []string{"web1", "web3"}, keep: []string{"10.9.0.9/24", "hostports: []"}, gone: []string{"10.9.0.1/24"}},
		{name: "no vms", src: editBase, put: []VM{box}, want: []string{"c1"}},
		{name: "no vms, no final line break", src: strings.TrimSuffix(editBase, "\n"), put: []VM{box}, want: []string{"c1"}},
		{name: "empty flow list", src: editBase + "vms: []\nhostports: []\n", put: []VM{box}, want: []string{"c1"}, keep: []string{"hostports: []"}},
		{name: "null", src: editBase + "vms:\nhostports: []\n", put: []VM{box}, want: []string{"c1"}},
		{name: "the last one goes", src: editBase + "vms:\n  - {name: c1, host: hv1, nics: [{portgroup: pg}]}\n", drop: []string{"c1"}, want: nil},
		{name: "a flow list, as a tree", src: editBase + "vms: [{name: web1, host: hv1, nics: [{portgroup: pg}]}]\n",
			put: []VM{box}, want: []string{"web1", "c1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := loadAndEdit(t, tt.src, tt.drop, tt.put)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, vm := range got.Spec.VMs {
				names = append(names, vm.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Errorf("VMs %v, want %v\n%s", names, tt.want, got.Source)
			}
			for _, k := range tt.keep {
				if !strings.Contains(string(got.Source), k) {
					t.Errorf("lost %q:\n%s", k, got.Source)
				}
			}
			for _, g := range tt.gone {
				if strings.Contains(string(got.Source), g) {
					t.Errorf("still holds %q:\n%s", g, got.Source)
				}
			}
			if vm, ok := got.Spec.VM("c1"); ok && len(tt.put) > 0 && tt.put[0].Name == "c1" {
				if a := vm.NICs[0].Attach; a == nil || a.Container != "true" || a.CNI != "null" || a.Ifname != "eth0" {
					t.Errorf("attach read back as %+v", vm.NICs[0].Attach)
				}
			}
		})
	}
}

// loadAndEdit loads src and edits its VMs.
func loadAndEdit(t *testing.T, src string, drop []string, put []VM) (doc, edited *Document, err error) {
	t.Helper()
	doc, err = Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	edited, err = EditVMs(doc, drop, put)
	return doc, edited, err
}

// A VM written by FlowVM reads back as the same VM.
func TestFlowVMRoundTrip(t *testing.T) {
	no := false
	vm := VM{Name: "c2", Host: "hv1", NICs: []VNIC{{PortGroup: "pg", IP: "10.9.0.7/24", MTU: 1400, Connected: &no,
		Offloads: &Offloads{GRO: &no},
		Shaping:  &Shaping{Egress: &Shaper{Average: 100e6, Peak: 200e6, Burst: 100 << 10}},
		Attach:   &Attach{Netns: "x", Container: "abc"}}}}
	doc, err := Load("t.yaml", []byte(editBase+"vms:\n  - "+FlowVM(vm)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := FlowVM(doc.Spec.VMs[0]); got != FlowVM(vm) {
		t.Errorf("read back as\n%s\nwant\n%s", got, FlowVM(vm))
	}
}

// TestEditVMsSplice checks that an edit made in the text without decoding
// the VMs it keeps gives what loading its source gives: the same spec,
// validated, and the same anchors for pinning VNIs; and that an edit that
// does not validate fails as loading its source fails.
func TestEditVMsSplice(t *testing.T) {
	vmsFirst := func(src string) string { // the networks after the VMs, whose lines the edit moves
		head, rest, _ := strings.Cut(src, "networks:\n")
		nets, vms, _ := strings.Cut(rest, "vms:\n")
		return head + "vms:\n" + vms + "networks:\n" + nets
	}
	c1 := VM{Name: "c1", Host: "hv1", NICs: []VNIC{{Network: "a-web", IP: "10.1.0.12/24", MAC: "02:00:00:00:00:12",
		Attach: &Attach{Netns: "cni-1", Ifname: "eth0", Container: "c1", CNI: "web"}}}}
	b1 := VM{Name: "b1", Host: "hv2", NICs: []VNIC{{Network: "b-web", IP: "10.1.0.13/24"}}}
	bad := VM{Name: "c2", Host: "hv1", NICs: []VNIC{{Network: "a-web", IP: "10.9.0.12/24"}}}
	tests := []struct {
		name, src string
		drop      []string
		put       []VM
		fails     bool
	}{
		{name: "add, networks before", src: blockNetSpec, put: []VM{c1}},
		{name: "add, networks after", src: vmsFirst(blockNetSpec), put: []VM{c1}},
		{name: "replace and drop, networks after", src: vmsFirst(blockNetSpec), drop: []string{"a1"}, put: []VM{b1}},
		{name: "the last ones go, networks after", src: vmsFirst(blockNetSpec), drop: []string{"a1", "b1"}},
		{name: "an address outside the subnet", src: vmsFirst(blockNetSpec), put: []VM{bad}, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, got, err := loadAndEdit(t, tt.src, tt.drop, tt.put)
			if tt.fails {
				out, _, ok := editVMsInText(doc, map[string]bool{}, map[string]int{}, tt.put)
				if !ok {
					t.Fatal("the edit was not made in the text")
				}
				_, want := Load("t.yaml", out)
				if err == nil || want == nil || err.Error() != want.Error() {
					t.Fatalf("error %v, want loading's: %v", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.located == nil {
				t.Fatal("the edit decoded the whole source")
			}
			fresh, err := Load("t.yaml", got.Source)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Validated() || !reflect.DeepEqual(got.Spec, fresh.Spec) {
				t.Errorf("spec\n%+v\nloading its source gives\n%+v", got.Spec, fresh.Spec)
			}
			if a, want := knownAnchors(got), anchorsIn(fresh.positions, len(fresh.Spec.Networks)); !reflect.DeepEqual(a, want) {
				t.Errorf("anchors %+v, loading gives %+v\n%s", a, want, got.Source)
			}
		})
	}
}

// FuzzEditVMsSplice adds a VM to arbitrary valid specs, and takes their
// first VM out: whatever the edit gives must be what loading its source
// gives, and an edit that fails must fail as loading its source fails.
func FuzzEditVMsSplice(f *testing.F) {
	for _, src := range []string{blockNetSpec, editBase + "vms:\n  - {name: web1, host: hv1, nics: [{portgroup: pg, ip: 10.9.0.1/24}]}\n# after\n"} {
		f.Add(src, "10.1.0.12/24")
	}
	f.Fuzz(func(t *testing.T, src, ip string) {
		doc, err := Load("t.yaml", []byte(src))
		if err != nil || len(doc.Spec.Hosts) == 0 {
			return
		}
		n := VNIC{IP: ip, MAC: "02:00:00:00:00:99", Attach: &Attach{Netns: "cni-9", Ifname: "eth0", Container: "c9", CNI: "web"}}
		switch {
		case len(doc.Spec.Networks) > 0:
			n.Network = doc.Spec.Networks[0].Name
		case len(doc.Spec.Switches) > 0 && len(doc.Spec.Switches[0].PortGroups) > 0:
			n.PortGroup = doc.Spec.Switches[0].PortGroups[0].Name
		default:
			return
		}
		var drop []string
		if len(doc.Spec.VMs) > 0 {
			drop = []string{doc.Spec.VMs[0].Name}
		}
		for _, edit := range []struct {
			drop []string
			put  []VM
		}{{nil, []VM{{Name: "c9", Host: doc.Spec.Hosts[0].Name, NICs: []VNIC{n}}}}, {drop, nil}} {
			out, _, inText := editVMsInText(doc, setOf(edit.drop), map[string]int{}, edit.put)
			got, err := EditVMs(doc, edit.drop, edit.put)
			if !inText {
				continue
			}
			loaded, lerr := Load("t.yaml", out)
			switch {
			case (err == nil) != (lerr == nil) || err != nil && err.Error() != lerr.Error():
				t.Fatalf("edit: %v; loading its source: %v\n%s", err, lerr, out)
			case err != nil:
				continue
			}
			if string(got.Source) != string(out) || !reflect.DeepEqual(got.Spec, loaded.Spec) || !got.Validated() ||
				!reflect.DeepEqual(knownAnchors(got), knownAnchors(loaded)) {
				t.Fatalf("the edit differs from its source's document:\n%s", out)
			}
		}
	})
}

func setOf(names []string) map[string]bool {
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}
