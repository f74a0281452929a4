package plan

import (
	"reflect"
	"sort"

	"github.com/vnet-project/vnet/internal/spec"
)

// Scope is what an apply reads and plans: namespaces, each whole (a nil
// link set) or only some of its links. A nil Scope is every namespace of
// the infrastructure: a full apply.
type Scope map[string]map[string]bool

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

// Links returns the links of ns the scope holds, nil for all of them;
// ok is false when ns is not in the scope.
func (s Scope) Links(ns string) (links map[string]bool, ok bool) {
	if s == nil {
		return nil, true
	}
	links, ok = s[ns]
	return links, ok
}

// addWhole puts all of ns in the scope.
func (s Scope) addWhole(ns string) { s[ns] = nil }

// addLink puts one link of ns in the scope, unless all of ns is.
func (s Scope) addLink(ns, link string) {
	links, ok := s[ns]
	switch {
	case ok && links == nil:
	case ok:
		links[link] = true
	default:
		s[ns] = map[string]bool{link: true}
	}
}

func (s Scope) add(r Resource) {
	var buf [2]place
	for _, p := range r.places(buf[:0]) {
		if p.link == "" {
			s.addWhole(p.ns)
		} else {
			s.addLink(p.ns, p.link)
		}
	}
}

// Holds reports whether the scope holds every place the resource is: only
// then does a scoped observation see all of it. A veth pair read without
// its second end (B.NS empty) is only where its first end is.
func (s Scope) Holds(r Resource) bool { return s.holds(&r) }

// holds is Holds of a resource read in place.
func (s Scope) holds(r *Resource) bool {
	if s == nil {
		return true
	}
	var buf [2]place
	for _, p := range r.places(buf[:0]) {
		if !s.holdsPlace(p) {
			return false
		}
	}
	return true
}

// holdsPlace reports whether the scope holds a place: its namespace
// whole, or the link.
func (s Scope) holdsPlace(p place) bool {
	links, ok := s[p.ns]
	return ok && (links == nil || p.link != "" && links[p.link])
}

// place is a link of a namespace, or (link empty) the namespace itself.
type place struct{ ns, link string }

// places appends to buf where a resource is: the links it is or sits on,
// or its namespace for what belongs to a namespace as a whole (the
// namespace itself, its firewall, a VM's cgroup). Two places at most: a
// scope asks for those of every resource of a model, and buf spares it
// an allocation for each.
func (r *Resource) places(buf []place) []place {
	switch r.Kind {
	case KindVeth:
		if r.B.NS == "" {
			return append(buf, place{r.A.NS, r.A.Name})
		}
		return append(buf, place{r.A.NS, r.A.Name}, place{r.B.NS, r.B.Name})
	case KindBridge, KindVxlan, KindDevice:
		// A device's Link is its bridge: the device is where its name is.
		return append(buf, place{r.NS, r.Name})
	case KindNetns, KindFirewall, KindCgroup:
		if ns := r.Namespace(); ns != "" {
			return append(buf, place{ns, ""})
		}
		return buf
	}
	return append(buf, place{r.NS, r.Link})
}

// WithKind returns the scope with the places of every resource of kind k
// in rs added: what a pass reads whatever the change. A full scope stays
// full.
func (s Scope) WithKind(rs []Resource, k Kind) Scope {
	if s == nil {
		return nil
	}
	for i := range rs {
		if rs[i].Kind == k {
			s.add(rs[i])
		}
	}
	return s
}

// Desired keeps the resources the scope holds.
func (s Scope) Desired(rs []Resource) []Resource {
	if s == nil {
		return rs
	}
	var out []Resource
	for i := range rs {
		if s.holds(&rs[i]) {
			out = append(out, rs[i])
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
	var out map[string]bool // made only when needed, of known's resources near the scope (keysNear)
	var kept []Resource
	for i := range observed {
		r := &observed[i]
		k := r.Key()
		if !in[k] {
			if !s.holds(r) {
				continue
			}
			if out == nil {
				out = s.keysNear(known)
			}
			if out[k] {
				continue
			}
		}
		kept = append(kept, *r)
	}
	return kept
}

// keysNear returns the keys of the resources of rs that can have the key
// of one the scope holds: those whose first place the scope holds, and
// those that are nowhere (a namespace without a name). A key names where
// its resource is first (Key, places), and the scope holds every place of
// a resource it holds. known may be a whole host's model: of it, only the
// few resources near the scope are keyed.
func (s Scope) keysNear(rs []Resource) map[string]bool {
	set := map[string]bool{}
	var buf [2]place
	for i := range rs {
		if ps := rs[i].places(buf[:0]); len(ps) > 0 && !s.holdsPlace(ps[0]) {
			continue
		}
		set[rs[i].Key()] = true
	}
	return set
}

func keySet(rs []Resource) map[string]bool {
	set := make(map[string]bool, len(rs))
	for i := range rs {
		set[rs[i].Key()] = true
	}
	return set
}

// ChangeScope returns what a change from the spec last applied to next
// can touch: where every resource the two models disagree on is, created,
// deleted or changed (see ModelScope). It returns a nil Scope (full), and why,
// when it cannot bound the change: there is no last spec, or something
// other than the VMs and the virtual networks changed (hosts, NICs,
// switches, port groups, uplinks, host ports), whose effects reach every
// port. A virtual network's objects (its bridge, tunnel, forwarding and
// neighbour entries, router legs) are links and entries of their own,
// each named by its network, and a change to one network changes only
// its own objects and those of its router's legs in the models, so the
// models' difference bounds it as it does a VM's. Both models are made with
// the same options, so what they depend on beyond the specs (team
// assignments, the time) cancels out: lastModel and nextModel are their
// models, made with the same Options.
func ChangeScope(last, next *spec.Spec, lastModel, nextModel []Resource) (Scope, string) {
	if last == nil {
		return nil, "no record of a previous apply"
	}
	if !sameButVMsAndNetworks(last, next) {
		return nil, "a host, switch, port group or host port changed"
	}
	if last.NamesDevices() || next.NamesDevices() {
		// A real NIC carries every port of its switch (teams, Network I/O
		// Control): it is not bounded by the changed resources' places.
		// A TAP is: it is a switch port under its own name. So is a
		// container's vNIC: its pair is named by its switch port, and
		// observation reads the container's namespace for the pairs the
		// scope holds.
		return nil, "the spec names real devices"
	}
	return ModelScope(lastModel, nextModel), ""
}

// ModelScope returns where the resources two models disagree on are (both
// versions of a changed one). A namespace that holds team steering or
// IOC pools is whole in it wherever it is in it at all: what a change
// there makes depends on what the other ports and uplinks hold (their
// team assignments, how a team-wide limit is split).
func ModelScope(last, next []Resource) Scope {
	scope := Scope{}
	// Indexes, not resources, by key: a model of tens of thousands of
	// resources is copied into no map.
	lastKeys := make([]string, len(last))
	was := make(map[string]int, len(last))
	for i := range last {
		lastKeys[i] = last[i].Key()
		was[lastKeys[i]] = i
	}
	kept := make([]bool, len(last)) // by index in last: next has its key
	for i := range next {
		r := &next[i]
		j, ok := was[r.Key()]
		if ok {
			kept[j] = true
		}
		if !ok || !Same(last[j], *r) {
			scope.add(*r)
			if ok {
				scope.add(last[j])
			}
		}
	}
	for i := range last {
		if !kept[was[lastKeys[i]]] {
			scope.add(last[i])
		}
	}
	for _, m := range [][]Resource{last, next} {
		for i := range m {
			if r := &m[i]; r.Kind == KindSteer || r.Kind == KindPool {
				if _, ok := scope[r.NS]; ok {
					scope.addWhole(r.NS)
				}
			}
		}
	}
	return scope
}

// sameButVMsAndNetworks reports whether two specs differ at most in their
// VMs and virtual networks.
func sameButVMsAndNetworks(a, b *spec.Spec) bool {
	x, y := *a, *b
	x.VMs, y.VMs = nil, nil
	x.Networks, y.Networks = nil, nil
	return reflect.DeepEqual(x, y)
}
