package plan

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// A model spliced from the last one holds what a model of the next spec
// made whole holds, on every host, and the resources the two whole models
// disagree on are among the parts it modelled.
func TestSpliceModelIsTheWholeModel(t *testing.T) {
	base := networksBase(6)
	routed := strings.Replace(base, "  - {name: lonely", "  - {name: a-app, vni: 103, subnet: 10.3.0.0/24, gateway: 10.3.0.1, router: ta}\n  - {name: lonely", 1) +
		"  - {name: a5, host: hv1, nics: [{network: a-app, ip: 10.3.0.15/24}]}\n"
	secured := strings.Replace(base, "{name: m2, vni: 1002, subnet: 10.200.2.0/24}", "{name: m2, vni: 1002, subnet: 10.200.2.0/24, security: {macChanges: true}}", 1)
	changes := map[string][2]string{
		"add a network":                 {base, withNetwork(base, "new", "x1@hv1", "x2@hv2")},
		"add a network on one host":     {base, withNetwork(base, "new", "x1@hv3", "x2@hv3")},
		"remove a network":              {withNetwork(base, "new", "x1@hv1", "x2@hv2"), base},
		"span another host":             {withNetwork(base, "new", "x1@hv1"), withNetwork(base, "new", "x1@hv1", "x2@hv3")},
		"add a network to a router":     {base, routed},
		"remove a network of a router":  {routed, base},
		"change a network's MTU":        {base, strings.Replace(base, "{name: m3, vni: 1003,", "{name: m3, vni: 1003, mtu: 1400,", 1)},
		"change a network's VNI":        {base, strings.Replace(base, "{name: m3, vni: 1003,", "{name: m3, vni: 1333,", 1)},
		"move a VM to another host":     {base, strings.Replace(base, "{name: m4-1, host: hv2,", "{name: m4-1, host: hv3,", 1)},
		"change a VM's address":         {base, strings.Replace(base, "ip: 10.200.4.10/24", "ip: 10.200.4.30/24", 1)},
		"change a VM's MAC":             {base, strings.Replace(base, "02:00:00:00:00:12", "02:00:00:00:00:13", 1)},
		"add a VM to a routed network":  {base, strings.Replace(base, "vms:\n", "vms:\n  - {name: a9, host: hv3, nics: [{network: a-web, ip: 10.1.0.19/24}]}\n", 1)},
		"change a VM of a secured one":  {secured, strings.Replace(secured, "ip: 10.200.2.10/24", "ip: 10.200.2.30/24", 1)},
		"add a network beside security": {secured, withNetwork(secured, "new", "x1@hv1", "x2@hv2")},
		"disconnect a vNIC":             {base, strings.Replace(base, "ip: 10.200.4.10/24}", "ip: 10.200.4.10/24, connected: false}", 1)},
	}
	addTapVariants(changes)
	for name, c := range changes {
		for _, host := range []string{"hv1", "hv2", "hv3"} {
			t.Run(name+" on "+host, func(t *testing.T) {
				opt := Options{Host: host, NumCPU: 2}
				last, next := load(t, c[0]), load(t, c[1])
				if !checkSplice(t, t.Name(), last, next, opt) {
					t.Fatal("not spliced")
				}
				// Spliced again, from a splice, with its keys.
				before := Model(last, opt)
				sp, _ := SpliceModel(last, next, before, nil, nil, opt)
				if again, ok := SpliceModel(next, last, sp.Model, sp.Keys, sp.Room, opt); !ok || !slices.Equal(sortedKeys(again.Model), sortedKeys(before)) {
					t.Errorf("spliced back (%v): %d resources, want %d", ok, len(again.Model), len(before))
				}
			})
		}
	}
}

// What a splice cannot bound is modelled whole.
func TestSpliceModelRefuses(t *testing.T) {
	base := networksBase(3)
	acl := strings.Replace(base, "{name: m2, vni: 1002, subnet: 10.200.2.0/24}",
		"{name: m2, vni: 1002, subnet: 10.200.2.0/24, acl: {default: deny, rules: [{action: allow, direction: ingress, from: {network: m1}}]}}", 1)
	pgACL := func(rule string) string {
		return strings.Replace(scopeBase, "portgroups: [{name: pg-p}]", "portgroups: [{name: pg-p, acl: {default: deny, rules: ["+rule+"]}}]", 1)
	}
	onPrivate := "  - {name: vm3, host: esx1, nics: [{portgroup: pg-p, ip: 10.0.1.3/24}]}\n"
	pooled := strings.Replace(scopeBase, "    teaming: {active: [u1, u2]}\n", "    ioc: {enabled: true, pools: {vm: {shares: high}}}\n", 1)
	pooled = strings.Replace(pooled, "{name: pg-a}", "{name: pg-a, pool: vm}", 1)
	tests := []struct {
		name       string
		last, next string
		opt        Options
	}{
		{"a host changes", base, strings.Replace(base, "underlay: 10.0.0.13", "underlay: 10.0.0.23", 1), Options{Host: "hv1"}},
		{"a network without a VNI", base, strings.Replace(withNetwork(base, "new", "x1@hv1"), "{name: new, vni: 9999,", "{name: new,", 1), Options{Host: "hv1"}},
		{"a network in the lab", base, withNetwork(base, "new", "x1@hv1"), Options{}},
		{"a VM with a CPU limit", base, strings.Replace(withNetwork(base, "new", "x1@hv1"), "{name: x1, host: hv1,", "{name: x1, host: hv1, cpus: 1,", 1), Options{Host: "hv1", NumCPU: 2}},
		{"a VM on a port group with a CPU limit", scopeBase, scopeBase + "  - {name: vm3, host: esx2, cpus: 1, nics: [{portgroup: pg-b, ip: 10.0.0.3/24}]}\n", Options{Host: "esx2", NumCPU: 2}},
		{"an ACL naming a network", acl, strings.Replace(acl, "ip: 10.200.1.10/24", "ip: 10.200.1.30/24", 1), Options{Host: "hv1"}},
		{"an ACL naming a port group", pgACL("{action: allow, direction: ingress, from: {portgroup: pg-a}}"), pgACL("{action: allow, direction: ingress, from: {portgroup: pg-a}}") + onPrivate, Options{Host: "esx1", PortPrograms: true}},
		{"an ACL in nftables", pgACL("{action: allow, direction: ingress, from: 10.9.0.0/16}"), pgACL("{action: allow, direction: ingress, from: 10.9.0.0/16}") + onPrivate, Options{Host: "esx1"}},
		{"a VM on a teamed switch in the lab", scopeBase, scopeBase + "  - {name: vm3, host: esx2, nics: [{portgroup: pg-a, ip: 10.0.0.3/24}]}\n", Options{}},
		{"a VM in a pool in the lab", pooled, pooled + "  - {name: vm3, host: esx2, nics: [{portgroup: pg-a, ip: 10.0.0.3/24}]}\n", Options{}},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			last, next := load(t, c.last), load(t, c.next)
			if _, ok := SpliceModel(last, next, Model(last, c.opt), nil, nil, c.opt); ok {
				t.Error("spliced")
			}
		})
	}
}

func keysOf(rs []Resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Key()
	}
	return out
}

func sortedKeys(rs []Resource) []string {
	out := keysOf(rs)
	slices.Sort(out)
	return out
}

func scopesEqual(a, b Scope) bool {
	if len(a) != len(b) {
		return false
	}
	for ns, links := range a {
		other, ok := b[ns]
		if !ok || (links == nil) != (other == nil) || !maps.Equal(links, other) {
			return false
		}
	}
	return true
}

// minus is what of a is not in b.
func minus(a, b []string) []string {
	var out []string
	for _, k := range a {
		if !slices.Contains(b, k) {
			out = append(out, k)
		}
	}
	return out
}

// TestPairByNameIsPairingByMap: pairing two lists of unique names by
// walking them is pairing them by a map of names, whatever was added,
// removed or moved between them.
func TestPairByNameIsPairingByMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 2000 {
		var first []string
		for i := range rng.IntN(40) {
			first = append(first, fmt.Sprint("n", i))
		}
		second := slices.Clone(first)
		fresh := 0
		for range rng.IntN(6) {
			switch k := rng.IntN(4); {
			case k == 0 && len(second) > 0: // remove one
				i := rng.IntN(len(second))
				second = slices.Delete(second, i, i+1)
			case k == 1: // add one anywhere
				fresh++
				second = slices.Insert(second, rng.IntN(len(second)+1), fmt.Sprint("new", fresh))
			case k == 2 && len(second) > 1: // move one
				i := rng.IntN(len(second))
				name := second[i]
				second = slices.Delete(second, i, i+1)
				second = slices.Insert(second, rng.IntN(len(second)+1), name)
			case k == 3: // shuffle
				rng.Shuffle(len(second), func(i, j int) { second[i], second[j] = second[j], second[i] })
			}
		}
		p := pairByName(len(first), len(second), func(i int) string { return first[i] }, func(i int) string { return second[i] })
		at := map[string]int{}
		for j, name := range first {
			at[name] = j
		}
		paired := make([]bool, len(first))
		for i, name := range second {
			want, ok := at[name]
			if !ok {
				want = -1
			} else {
				paired[want] = true
			}
			if p.of[i] != want {
				t.Fatalf("round %d: %q paired with %d, want %d\nfirst  %v\nsecond %v", round, name, p.of[i], want, first, second)
			}
		}
		if !slices.Equal(p.paired, paired) {
			t.Fatalf("round %d: paired %v, want %v\nfirst  %v\nsecond %v", round, p.paired, paired, first, second)
		}
	}
}

// sameNetwork compares a network's fields one by one: a field added to
// spec.Network must be added there too.
func TestSameNetworkKnowsEveryField(t *testing.T) {
	if n := reflect.TypeFor[spec.Network]().NumField(); n != 12 {
		t.Errorf("spec.Network has %d fields: compare the new ones in sameNetwork, then update this count", n)
	}
}

// sameVM compares a VM's and a vNIC's fields one by one: a field added to
// spec.VM or spec.VNIC must be added there too.
func TestSameVMKnowsEveryField(t *testing.T) {
	if n := reflect.TypeFor[spec.VM]().NumField(); n != 4 {
		t.Errorf("spec.VM has %d fields: compare the new ones in sameVM, then update this count", n)
	}
	if n := reflect.TypeFor[spec.VNIC]().NumField(); n != 10 {
		t.Errorf("spec.VNIC has %d fields: compare the new ones in sameVM, then update this count", n)
	}
}
