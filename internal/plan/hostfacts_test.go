package plan

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// A scoped check looks at the VMs new or changed since the spec last
// checked on the host, and at all of them when a host or switch changed.
func TestCheckedVMs(t *testing.T) {
	base := onTaps(networksBase(3))
	tests := []struct {
		name       string
		last, next string // last "": none
		want       []string
	}{
		{name: "no last spec", next: base, want: []string{"a1", "a2", "a4", "b1", "b2", "m0-0", "m0-1", "m1-0", "m1-1", "m2-0", "m2-1"}},
		{name: "no change", last: base, next: base},
		{name: "a VM added", last: base, next: onTaps(withNetwork(base, "new", "x1@hv1", "x2@hv2")), want: []string{"x1", "x2"}},
		{name: "a VM removed", last: onTaps(withNetwork(base, "new", "x1@hv1")), next: base},
		{name: "a VM on another TAP", last: base, next: strings.Replace(base, "tap: tm1-0}", "tap: tm1-0b}", 1), want: []string{"m1-0"}},
		{name: "a VM's MAC", last: base, next: strings.Replace(base, "02:00:00:00:00:12", "02:00:00:00:00:13", 1), want: []string{"a2"}},
		{name: "a VM on another host", last: base, next: strings.Replace(base, "{name: m2-1, host: hv2,", "{name: m2-1, host: hv3,", 1), want: []string{"m2-1"}},
		{name: "a host changed", last: base, next: strings.Replace(base, "underlay: 10.0.0.13", "underlay: 10.0.0.23", 1),
			want: []string{"a1", "a2", "a4", "b1", "b2", "m0-0", "m0-1", "m1-0", "m1-1", "m2-0", "m2-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := load(t, tt.next)
			checked := AllVMs
			if tt.last != "" {
				checked = CheckedVMs(load(t, tt.last), next)
			}
			var got []string
			for i := range next.VMs {
				if checked(&next.VMs[i]) {
					got = append(got, next.VMs[i].Name)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("checks %q, want %q", got, tt.want)
			}
		})
	}
}

// A spec edited from the last one shares its unchanged VMs' vNICs (as
// spec.EditVMs leaves them): those are not checked, the one whose vNICs
// were written anew is, also when it is the same slice grown.
func TestCheckedVMsSharedNICs(t *testing.T) {
	last := load(t, onTaps(networksBase(2)))
	nics := last.VMs[0].NICs
	last.VMs[0].NICs = append(make([]spec.VNIC, 0, len(nics)+1), nics...) // room to grow in place
	next := *last
	next.VMs = append([]spec.VM(nil), last.VMs...)
	added := nics[0]
	added.MAC = "02:00:00:00:00:99"
	next.VMs[0].NICs = append(next.VMs[0].NICs, added)
	checked := CheckedVMs(last, &next)
	var got []string
	for i := range next.VMs {
		if checked(&next.VMs[i]) {
			got = append(got, next.VMs[i].Name)
		}
	}
	if want := []string{next.VMs[0].Name}; !reflect.DeepEqual(got, want) {
		t.Errorf("checks %q, want %q", got, want)
	}
}

// HostNames and CheckHostFacts look at the VMs checked only: a TAP of a VM
// not checked need not be among the facts.
func TestCheckHostFactsOfSomeVMs(t *testing.T) {
	doc, err := spec.Load("test.yaml", []byte(onTaps(networksBase(2))))
	if err != nil {
		t.Fatal(err)
	}
	only := func(name string) func(vm *spec.VM) bool { return func(vm *spec.VM) bool { return vm.Name == name } }
	links, _ := HostNames(doc.Spec, "hv1", only("m1-0"))
	if !reflect.DeepEqual(links, []string{"tm1-0"}) {
		t.Errorf("names %q, want only tm1-0", links)
	}
	facts := HostFacts{Links: map[string]LinkFacts{"tm1-0": {Type: "tun", Tap: true}}}
	if _, err := CheckHostFacts(doc, "hv1", facts, only("m1-0")); err != nil {
		t.Errorf("check of m1-0 alone: %v", err)
	}
	if _, err := CheckHostFacts(doc, "hv1", facts, AllVMs); err == nil || !strings.Contains(err.Error(), `TAP device "tm0-0" does not exist`) {
		t.Errorf("check of all VMs: %v, want tm0-0 missing", err)
	}
}
