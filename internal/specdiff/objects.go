package specdiff

import (
	"maps"
	"reflect"
	"slices"
	"strconv"

	"github.com/vnet-project/vnet/internal/spec"
)

// Kind is what sort of object a change is about.
type Kind string

// The kinds of objects, in the order a diff lists them.
const (
	KindInfrastructure Kind = "infrastructure" // the spec itself: only its name
	KindHost           Kind = "host"
	KindNIC            Kind = "nic"
	KindHostPort       Kind = "hostport"
	KindSwitch         Kind = "switch"
	KindUplink         Kind = "uplink"
	KindPool           Kind = "pool"
	KindPortGroup      Kind = "portgroup"
	KindClassifyRule   Kind = "classify-rule"
	KindACLRule        Kind = "acl-rule"
	KindNetwork        Kind = "network"
	KindRouter         Kind = "router" // the networks that name it as their router
	KindVM             Kind = "vm"
	KindVNIC           Kind = "vnic"
)

// Kinds lists every kind in the order a diff lists them.
var Kinds = []Kind{KindInfrastructure, KindHost, KindNIC, KindHostPort, KindSwitch, KindUplink, KindPool,
	KindPortGroup, KindClassifyRule, KindACLRule, KindNetwork, KindRouter, KindVM, KindVNIC}

// Ref names an object: a kind, a name, and for an object named within
// another (a NIC within its host, a rule within its port group) that one.
type Ref struct {
	Kind Kind   `json:"kind" yaml:"kind"`
	Name string `json:"name" yaml:"name"`
	Of   *Ref   `json:"of,omitempty" yaml:"of,omitempty"`
}

// String is the reference as a diff prints it: "vnic eth0 of vm web1".
func (r Ref) String() string {
	s := string(r.Kind) + " " + r.Name
	if r.Of != nil {
		s += " of " + r.Of.String()
	}
	return s
}

// object is one object of a spec, with what identifies and orders it.
type object struct {
	ref Ref
	// id identifies the object within a spec; the same object in two
	// specs has the same id.
	id string
	// parent is the id of the object it comes and goes with, if any.
	parent string
	// order places it in a diff: the orders of its ancestors, then its own.
	order []orderPart
	// val is the struct its fields are read from; extra are fields that
	// its place in the spec gives it (a port group's switch).
	val   reflect.Value
	extra []Field
	// rules are the lists of rules it owns.
	rules []ruleList
}

type orderPart struct {
	rank int
	name string
}

type ruleList struct {
	kind  Kind
	rank  int
	items reflect.Value // a slice, or invalid
}

// routerView is a router as a spec implies it: the networks on it.
type routerView struct {
	Networks []string `yaml:"networks"`
}

// objects lists the objects of a spec by id; the first of a repeated name
// stands for it, as with the spec's own lookups. A nil spec has none. The
// VMs named in skip are left out, with their vNICs (see sameVMs).
func objects(s *spec.Spec, skip vmSkip) map[string]*object {
	out := map[string]*object{}
	if s == nil {
		return out
	}
	add := func(o *object) *object {
		if _, dup := out[o.id]; !dup {
			out[o.id] = o
		}
		return o
	}
	add(&object{ref: Ref{Kind: KindInfrastructure, Name: s.Name}, id: "infra", order: []orderPart{{0, ""}}, val: topOf(s)})
	addHosts(s, add)
	addSwitches(s, add)
	addNetworks(s, add)
	for i := range s.VMs {
		vm := &s.VMs[i]
		if skip.skips(vm.Name) {
			continue
		}
		o := add(&object{ref: Ref{Kind: KindVM, Name: vm.Name}, id: "vm/" + vm.Name, order: []orderPart{{6, vm.Name}}, val: reflect.ValueOf(vm)})
		for j := range vm.NICs {
			eth := "eth" + strconv.Itoa(j)
			add(&object{ref: Ref{Kind: KindVNIC, Name: eth, Of: &o.ref}, id: o.id + "/" + eth, parent: o.id,
				order: child(o, 0, eth), val: reflect.ValueOf(&vm.NICs[j])})
		}
	}
	return out
}

// topOf is a copy of the spec without the lists of objects of their own
// (structural): the infrastructure's own fields, which a diff then
// compares without comparing every object of the spec once more.
func topOf(s *spec.Spec) reflect.Value {
	t := reflect.TypeFor[spec.Spec]()
	top := reflect.New(t)
	top.Elem().Set(reflect.ValueOf(s).Elem())
	for name := range structural[t] {
		f := top.Elem().FieldByName(name)
		f.Set(reflect.Zero(f.Type()))
	}
	return top
}

// sameVMs names the VMs both specs hold alike: of a name each spec gives
// one VM alone, deeply equal in both. They and their vNICs hold no change,
// and a diff leaves them out before making objects of them: a change of a
// few VMs of a large spec then makes objects of those few, not of every
// VM twice over.
func sameVMs(old, new *spec.Spec) vmSkip {
	if old == nil || new == nil {
		return vmSkip{}
	}
	type named struct {
		old, new   *spec.VM
		nOld, nNew int
	}
	byName := make(map[string]*named, len(old.VMs))
	all := make([]named, len(old.VMs)) // one allocation for the entries
	for i := range old.VMs {
		vm := &old.VMs[i]
		if n, ok := byName[vm.Name]; ok {
			n.nOld++
			continue
		}
		all[i] = named{old: vm, nOld: 1}
		byName[vm.Name] = &all[i]
	}
	// The VMs that differ are few where the specs are alike: they are
	// named, rather than the many that do not.
	differ := map[string]bool{}
	for i := range new.VMs {
		vm := &new.VMs[i]
		if n, ok := byName[vm.Name]; ok {
			n.nNew++
			n.new = vm
		} else {
			differ[vm.Name] = true
		}
	}
	for i := range all {
		if n := &all[i]; n.old != nil && !(n.nOld == 1 && n.nNew == 1 && sameVM(n.old, n.new)) {
			differ[n.old.Name] = true
		}
	}
	return vmSkip{differ: differ}
}

// vmSkip says which VMs a diff leaves out (sameVMs): with differ nil,
// none; otherwise every VM it does not name.
type vmSkip struct{ differ map[string]bool }

func (s vmSkip) skips(name string) bool { return s.differ != nil && !s.differ[name] }

// sameVM is reflect.DeepEqual(a, b), made quick for the usual pair: a
// VM an edit of the spec kept, whose vNICs are the very ones it had (the
// same elements of one array, so equal without a look at them).
func sameVM(a, b *spec.VM) bool {
	if a.Name != b.Name || a.Host != b.Host || a.CPUs != b.CPUs || len(a.NICs) != len(b.NICs) {
		return false
	}
	if len(a.NICs) > 0 && &a.NICs[0] == &b.NICs[0] {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func addHosts(s *spec.Spec, add func(*object) *object) {
	hosts := map[string]*object{}
	for i := range s.Hosts {
		h := &s.Hosts[i]
		o := add(&object{ref: Ref{Kind: KindHost, Name: h.Name}, id: "host/" + h.Name, order: []orderPart{{1, h.Name}}, val: reflect.ValueOf(h)})
		hosts[h.Name] = o
		for j := range h.NICs {
			n := &h.NICs[j]
			add(&object{ref: Ref{Kind: KindNIC, Name: n.Name, Of: &o.ref}, id: o.id + "/nic/" + n.Name, parent: o.id,
				order: child(o, 0, n.Name), val: reflect.ValueOf(n)})
		}
	}
	next := map[string]int{} // vmkN counted per host, as Spec.HostPortName does
	for i := range s.HostPorts {
		hp := &s.HostPorts[i]
		name := hp.Name
		if name == "" {
			name = "vmk" + strconv.Itoa(next[hp.Host])
			next[hp.Host]++
		}
		host := hosts[hp.Host]
		if host == nil { // a host port on no host: no valid spec has one
			host = &object{ref: Ref{Kind: KindHost, Name: hp.Host}, id: "host/" + hp.Host, order: []orderPart{{1, hp.Host}}}
		}
		add(&object{ref: Ref{Kind: KindHostPort, Name: name, Of: &host.ref}, id: host.id + "/port/" + name, parent: host.id,
			order: child(host, 1, name), val: reflect.ValueOf(hp)})
	}
}

func addSwitches(s *spec.Spec, add func(*object) *object) {
	for i := range s.Switches {
		sw := &s.Switches[i]
		o := add(&object{ref: Ref{Kind: KindSwitch, Name: sw.Name}, id: "switch/" + sw.Name, order: []orderPart{{2, sw.Name}}, val: reflect.ValueOf(sw)})
		for j := range sw.Uplinks {
			u := &sw.Uplinks[j]
			add(&object{ref: Ref{Kind: KindUplink, Name: u.Name, Of: &o.ref}, id: o.id + "/uplink/" + u.Name, parent: o.id,
				order: child(o, 0, u.Name), val: reflect.ValueOf(u)})
		}
		if sw.IOC != nil {
			for _, name := range slices.Sorted(maps.Keys(sw.IOC.Pools)) {
				p := sw.IOC.Pools[name]
				add(&object{ref: Ref{Kind: KindPool, Name: name, Of: &o.ref}, id: o.id + "/pool/" + name, parent: o.id,
					order: child(o, 1, name), val: reflect.ValueOf(&p)})
			}
		}
		for j := range sw.PortGroups {
			pg := &sw.PortGroups[j]
			var acl reflect.Value
			if pg.ACL != nil {
				acl = reflect.ValueOf(pg.ACL.Rules)
			}
			// A port group's name is unique in the spec: it is named alone,
			// and placed under its switch.
			add(&object{ref: Ref{Kind: KindPortGroup, Name: pg.Name}, id: "portgroup/" + pg.Name, parent: o.id,
				order: child(o, 2, pg.Name), val: reflect.ValueOf(pg), extra: []Field{{Path: "switch", To: sw.Name}},
				rules: []ruleList{{KindClassifyRule, 0, reflect.ValueOf(pg.Classify)}, {KindACLRule, 1, acl}}})
		}
	}
}

func addNetworks(s *spec.Spec, add func(*object) *object) {
	routers := map[string][]string{}
	var names []string
	for i := range s.Networks {
		n := &s.Networks[i]
		var acl reflect.Value
		if n.ACL != nil {
			acl = reflect.ValueOf(n.ACL.Rules)
		}
		add(&object{ref: Ref{Kind: KindNetwork, Name: n.Name}, id: "network/" + n.Name, order: []orderPart{{4, n.Name}},
			val: reflect.ValueOf(n), rules: []ruleList{{KindACLRule, 1, acl}}})
		if n.Router != "" {
			if routers[n.Router] == nil {
				names = append(names, n.Router)
			}
			routers[n.Router] = append(routers[n.Router], n.Name)
		}
	}
	for _, r := range names {
		add(&object{ref: Ref{Kind: KindRouter, Name: r}, id: "router/" + r, order: []orderPart{{5, r}},
			val: reflect.ValueOf(&routerView{Networks: routers[r]})})
	}
}

// child is the order of an object of the given rank and name within o.
func child(o *object, rank int, name string) []orderPart {
	return append(append([]orderPart(nil), o.order...), orderPart{rank, name})
}
