package plan

import (
	"reflect"
	"sort"

	"github.com/vnet-project/vnet/internal/spec"
)

// Scope is the set of namespaces an apply reads and plans. A nil Scope is
// every namespace of the infrastructure: a full apply.
type Scope map[string]bool

// Full reports whether the scope is every namespace.
func (s Scope) Full() bool { return s == nil }

// Names returns the namespaces of a scope, sorted.
func (s Scope) Names() []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Holds reports whether every namespace the resource touches is in the
// scope: only then does a scoped observation see all of it. A veth pair
// read without its second end (B.NS empty) touches only its first end's.
func (s Scope) Holds(r Resource) bool {
	if s == nil {
		return true
	}
	for _, ns := range r.namespaces() {
		if !s[ns] {
			return false
		}
	}
	return true
}

// namespaces are those a resource lives in: both ends' for a veth pair,
// its VM's for a cgroup.
func (r Resource) namespaces() []string {
	if r.Kind == KindVeth {
		if r.B.NS == "" {
			return []string{r.A.NS}
		}
		return []string{r.A.NS, r.B.NS}
	}
	if ns := r.Namespace(); ns != "" {
		return []string{ns}
	}
	return nil
}

// Desired keeps the resources the scope holds.
func (s Scope) Desired(rs []Resource) []Resource {
	if s == nil {
		return rs
	}
	var out []Resource
	for _, r := range rs {
		if s.Holds(r) {
			out = append(out, r)
		}
	}
	return out
}

// Observed keeps what a scoped observation read that the plan may compare:
// a resource whose key planned names (a scoped desired state), or, for a
// key that known (the whole model) does not name, one the scope holds.
// A resource the model has outside the scope is dropped even when read: a
// pair read from a switch port's side only, without the VM's end, is not
// the pair as it stands.
func (s Scope) Observed(observed, planned, known []Resource) []Resource {
	if s == nil {
		return observed
	}
	in := keySet(planned)
	out := keySet(known)
	var kept []Resource
	for _, r := range observed {
		k := r.Key()
		switch {
		case in[k]:
		case out[k]:
			continue
		case !s.Holds(r):
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

func keySet(rs []Resource) map[string]bool {
	set := make(map[string]bool, len(rs))
	for _, r := range rs {
		set[r.Key()] = true
	}
	return set
}

// ChangeScope returns the namespaces a change from the spec last applied
// to next can touch: those of every resource the two models disagree on,
// created, deleted or changed. It returns a nil Scope (full), and why,
// when it cannot bound the change: there is no last spec, or something
// other than the VMs changed (hosts, NICs, switches, port groups, uplinks,
// host ports), whose effects reach every port. Both models are made with
// the same options, so what they depend on beyond the specs (team
// assignments, the time) cancels out.
func ChangeScope(last, next *spec.Spec, opt Options) (Scope, string) {
	if last == nil {
		return nil, "no record of a previous apply"
	}
	if !sameButVMs(last, next) {
		return nil, "a host, switch, port group or host port changed"
	}
	return ModelScope(Model(last, opt), Model(next, opt)), ""
}

// ModelScope returns the namespaces of the resources two models disagree
// on (both versions of a changed one).
func ModelScope(last, next []Resource) Scope {
	scope := Scope{}
	add := func(r Resource) {
		for _, ns := range r.namespaces() {
			scope[ns] = true
		}
	}
	was := indexByKey(last)
	for _, r := range next {
		o, ok := was[r.Key()]
		if !ok || !Same(o, r) {
			add(r)
			if ok {
				add(o)
			}
		}
	}
	is := keySet(next)
	for _, r := range last {
		if !is[r.Key()] {
			add(r)
		}
	}
	return scope
}

// sameButVMs reports whether two specs differ at most in their VMs.
func sameButVMs(a, b *spec.Spec) bool {
	x, y := *a, *b
	x.VMs, y.VMs = nil, nil
	return reflect.DeepEqual(x, y)
}
