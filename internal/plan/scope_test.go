package plan

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// scopeBase has a teamed distributed switch, a private one and two VMs.
const scopeBase = `
name: t
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}, {name: vmnic1, speed: 1Gbit}]
  - name: esx2
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: dvs0
    uplinks:
      - {name: u1, nics: {esx1: vmnic0, esx2: vmnic0}}
      - {name: u2, nics: {esx1: vmnic1}}
    teaming: {active: [u1, u2]}
    portgroups: [{name: pg-a}, {name: pg-b}]
  - name: priv
    hosts: [esx1]
    portgroups: [{name: pg-p}]
vms:
  - name: vm1
    host: esx1
    cpus: 1
    nics: [{portgroup: pg-a, ip: 10.0.0.1/24}]
  - name: vm2
    host: esx2
    nics: [{portgroup: pg-a, ip: 10.0.0.2/24}]
`

func TestChangeScope(t *testing.T) {
	// ns: whole namespaces of nodes; port: one vNIC's switch port.
	ns := func(nodes ...string) Scope {
		s := Scope{}
		for _, n := range nodes {
			s.addWhole(NSName("t", n))
		}
		return s
	}
	port := func(s Scope, host, vm string) Scope {
		s.addLink(NSName("t", host), VNICPortName("t", vm, 0))
		return s
	}
	eth0 := func(s Scope, vm string) Scope {
		s.addLink(NSName("t", vm), "eth0")
		return s
	}
	plain := strings.Replace(scopeBase, "    teaming: {active: [u1, u2]}\n", "", 1)
	plain = strings.Replace(plain, "      - {name: u2, nics: {esx1: vmnic1}}\n", "", 1)
	vm3 := "\n  - name: vm3\n    host: esx2\n    nics: [{portgroup: pg-a, ip: 10.0.0.3/24}]\n"
	tests := []struct {
		name     string
		last     string // "" for no previous apply
		next     string
		want     Scope
		fullWhy  string // the reason given for a full scope
		wantNone bool   // an empty, not full, scope
	}{
		{name: "first apply", next: scopeBase, fullWhy: "no record"},
		{name: "no change", last: scopeBase, next: scopeBase, wantNone: true},
		{name: "add a VM to a host with one uplink", last: scopeBase, next: scopeBase + vm3, want: port(ns("vm3"), "esx2", "vm3")},
		{name: "remove a VM from a host with one uplink", last: scopeBase + vm3, next: scopeBase, want: port(ns("vm3"), "esx2", "vm3")},
		{name: "add a VM", last: plain, next: plain + vm3, want: port(ns("vm3"), "esx2", "vm3")},
		{name: "remove a VM", last: plain + vm3, next: plain, want: port(ns("vm3"), "esx2", "vm3")},
		{name: "change a VM's address", last: scopeBase,
			next: strings.Replace(scopeBase, "10.0.0.2/24", "10.0.0.9/24", 1), want: eth0(Scope{}, "vm2")},
		{name: "change a VM's CPU limit", last: scopeBase,
			next: strings.Replace(scopeBase, "cpus: 1", "cpus: 0.5", 1), want: ns("vm1")},
		{name: "move a vNIC to another switch", last: scopeBase,
			next: strings.Replace(scopeBase, "nics: [{portgroup: pg-a, ip: 10.0.0.1/24}]", "nics: [{portgroup: pg-p, ip: 10.0.0.1/24}]", 1),
			want: eth0(ns("esx1"), "vm1")},
		{name: "move a vNIC to another switch, without teams", last: plain,
			next: strings.Replace(plain, "nics: [{portgroup: pg-a, ip: 10.0.0.1/24}]", "nics: [{portgroup: pg-p, ip: 10.0.0.1/24}]", 1),
			want: port(eth0(Scope{}, "vm1"), "esx1", "vm1")},
		{name: "move a vNIC to a port group of the same policy", last: scopeBase,
			next:     strings.Replace(scopeBase, "nics: [{portgroup: pg-a, ip: 10.0.0.2/24}]", "nics: [{portgroup: pg-b, ip: 10.0.0.2/24}]", 1),
			wantNone: true},
		{name: "move a VM to another host", last: scopeBase,
			next: strings.Replace(scopeBase, "host: esx2\n    nics: [{portgroup: pg-a, ip: 10.0.0.2/24}]", "host: esx1\n    nics: [{portgroup: pg-a, ip: 10.0.0.2/24}]", 1),
			want: eth0(ns("esx1", "esx2"), "vm2")},
		{name: "add a port group", last: scopeBase,
			next: strings.Replace(scopeBase, "{name: pg-b}", "{name: pg-b}, {name: pg-c}", 1), fullWhy: "switch"},
		{name: "change teaming", last: scopeBase,
			next: strings.Replace(scopeBase, "active: [u1, u2]", "active: [u1]", 1), fullWhy: "switch"},
		{name: "change a NIC's speed", last: scopeBase,
			next: strings.Replace(scopeBase, "{name: vmnic1, speed: 1Gbit}", "{name: vmnic1, speed: 10Gbit}", 1), fullWhy: "host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := load(t, tt.next)
			var got Scope
			var why string
			opt := Options{NumCPU: 2}
			if tt.last == "" {
				got, why = ChangeScope(nil, next, nil, Model(next, opt))
			} else {
				last := load(t, tt.last)
				got, why = ChangeScope(last, next, Model(last, opt), Model(next, opt))
			}
			switch {
			case tt.fullWhy != "":
				if !got.Full() || !strings.Contains(why, tt.fullWhy) {
					t.Errorf("got scope %v (%q), want full because of %q", got.Names(), why, tt.fullWhy)
				}
			case tt.wantNone:
				if got.Full() || len(got) != 0 {
					t.Errorf("got scope %v (%q), want an empty one", got.Names(), why)
				}
			case !reflect.DeepEqual(got, tt.want):
				t.Errorf("got scope %v (%q), want %v", got, why, tt.want)
			}
		})
	}
}

// A scoped apply of a change plans, on what the scope holds, exactly what
// a full apply of it plans.
func TestScopedDiffIsTheFullDiffOfTheChange(t *testing.T) {
	vm3 := "\n  - name: vm3\n    host: esx2\n    nics: [{portgroup: pg-a, ip: 10.0.0.3/24}]\n"
	plain := strings.Replace(scopeBase, "    teaming: {active: [u1, u2]}\n", "", 1)
	changes := map[string][2]string{
		"add, no teams":    {plain, plain + vm3},
		"remove, no teams": {plain + vm3, plain},
		"add":              {scopeBase, scopeBase + vm3},
		"remove":           {scopeBase + vm3, scopeBase},
		"address":          {scopeBase, strings.Replace(scopeBase, "10.0.0.2/24", "10.0.0.9/24", 1)},
		"move":             {scopeBase, strings.Replace(scopeBase, "host: esx2\n    nics: [{portgroup: pg-a, ip: 10.0.0.2/24}]", "host: esx1\n    nics: [{portgroup: pg-a, ip: 10.0.0.2/24}]", 1)},
	}
	for name, c := range changes {
		t.Run(name, func(t *testing.T) {
			opt := Options{NumCPU: 2}
			last, next := load(t, c[0]), load(t, c[1])
			scope, why := ChangeScope(last, next, Model(last, opt), Model(next, opt))
			if scope.Full() {
				t.Fatalf("full scope: %s", why)
			}
			host, want := Model(last, opt), Model(next, opt)
			full := Diff(want, host).String()
			// A scoped observation reads, of a veth pair with an end outside
			// the scope, the end inside only.
			var read []Resource
			for _, r := range host {
				if r.Kind == KindVeth && scope.Holds(Resource{Kind: KindVeth, A: r.A}) && !scope.Holds(Resource{Kind: KindVeth, A: r.B}) {
					r.B = End{}
				}
				if _, ok := scope[r.Namespace()]; ok && scope.Holds(r) {
					read = append(read, r)
				}
			}
			desired := scope.Desired(want)
			scoped := Diff(desired, scope.Observed(read, desired, want)).String()
			if scoped != full {
				t.Errorf("scoped plan:\n%s\nfull plan:\n%s", scoped, full)
			}
		})
	}
}

func TestScopeHolds(t *testing.T) {
	s := Scope{"a": nil, "b": nil, "h": {"p1": true}}
	tests := []struct {
		r    Resource
		want bool
	}{
		{Resource{Kind: KindNetns, Name: "a"}, true},
		{Resource{Kind: KindNetns, Name: "c"}, false},
		{Resource{Kind: KindVeth, A: End{NS: "a"}, B: End{NS: "b"}}, true},
		{Resource{Kind: KindVeth, A: End{NS: "a"}, B: End{NS: "c"}}, false},
		{Resource{Kind: KindVeth, A: End{NS: "a"}}, true},
		{Resource{Kind: KindAddr, NS: "c", Link: "eth0"}, false},
		{Resource{Kind: KindVeth, A: End{NS: "a", Name: "eth0"}, B: End{NS: "h", Name: "p1"}}, true},
		{Resource{Kind: KindVeth, A: End{NS: "a", Name: "eth0"}, B: End{NS: "h", Name: "p2"}}, false},
		{Resource{Kind: KindPortSec, NS: "h", Link: "p1"}, true},
		{Resource{Kind: KindPortSec, NS: "h", Link: "p2"}, false},
		{Resource{Kind: KindNetns, Name: "h"}, false},
		{Resource{Kind: KindFirewall, NS: "h"}, false},
		{Resource{Kind: KindBridge, NS: "h", Name: "br"}, false},
	}
	for _, tt := range tests {
		if got := s.Holds(tt.r); got != tt.want {
			t.Errorf("Holds(%s) = %v, want %v", tt.r, got, tt.want)
		}
		if !Scope(nil).Holds(tt.r) {
			t.Errorf("the full scope does not hold %s", tt.r)
		}
	}
}

// observedWholeKnown is Observed as it was before it keyed only the
// resources of known near the scope (keysNear): with every key of known.
func observedWholeKnown(s Scope, observed, planned, known []Resource) []Resource {
	if s == nil {
		return observed
	}
	in, out := keySet(planned), keySet(known)
	var kept []Resource
	for _, r := range observed {
		k := r.Key()
		if !in[k] && (out[k] || !s.Holds(r)) {
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

// Observed keeps what it kept when it keyed every resource of the model,
// for scopes of whole namespaces and of links, and observations that read
// the model's resources as they are, moved (a pair whose second end is
// elsewhere or gone) and resources the model lacks.
func TestObservedKeysOnlyWhatIsNearTheScope(t *testing.T) {
	var models [][]Resource
	for _, src := range []string{scopeBase, base} {
		s := load(t, src)
		models = append(models, Model(s, Options{NumCPU: 2}), Model(s, Options{NumCPU: 2, PortPrograms: true}))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	compared := 0
	for _, model := range models {
		var namespaces []string
		for _, r := range model {
			if r.Kind == KindNetns {
				namespaces = append(namespaces, r.Name)
			}
		}
		for range 300 {
			scope := Scope{}
			for _, ns := range namespaces {
				switch rng.IntN(3) {
				case 0:
				case 1:
					scope.addWhole(ns)
				default:
					for _, r := range model {
						if ps := r.places(nil); len(ps) > 0 && ps[0].ns == ns && ps[0].link != "" && rng.IntN(2) == 0 {
							scope.addLink(ns, ps[0].link)
						}
					}
				}
			}
			var observed []Resource
			for _, r := range model {
				switch rng.IntN(5) {
				case 0: // not read
				case 1: // read elsewhere: a pair's second end moved or gone, or another link
					if r.Kind == KindVeth {
						r.B = End{NS: namespaces[rng.IntN(len(namespaces))], Name: "moved"}
						if rng.IntN(2) == 0 {
							r.B = End{}
						}
					} else {
						r.Link = "other"
					}
					observed = append(observed, r)
				default:
					observed = append(observed, r)
				}
			}
			observed = append(observed, Resource{Kind: KindAddr, NS: namespaces[0], Link: "eth9", CIDR: "192.0.2.1/24"},
				Resource{Kind: KindNetns, Name: "stranger"})
			planned := scope.Desired(model)
			got := scope.Observed(observed, planned, model)
			want := observedWholeKnown(scope, observed, planned, model)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("scope %v: kept\n%v\nwant\n%v", scope, got, want)
			}
			compared++
		}
	}
	t.Logf("%d observations compared", compared)
}
