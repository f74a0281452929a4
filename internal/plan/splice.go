package plan

import (
	"maps"
	"reflect"
	"slices"

	"github.com/vnet-project/vnet/internal/spec"
)

// Splice is a model of a spec made from the model of the spec before it,
// for a change of VMs and virtual networks: only the VMs and networks the
// change touches are modelled again (see SpliceModel).
type Splice struct {
	Model []Resource // the whole model of the next spec
	Keys  []string   // the keys of Model's resources, in its order
	// Before and After are the resources the change can touch (those the
	// touched part of either spec makes), as the last model has them and
	// as Model has them: the resources the two models disagree on are all
	// among them, so ModelScope of the two is the scope of the change.
	Before, After []Resource
	// Room is where Model may grow in place for the next change (see
	// Room); nil: it may not.
	Room *Room
}

// SpliceModel makes the model of next from lastModel, the model of last
// made with the same options, when the two specs differ only in virtual
// networks and VMs: it models the part of each spec the change touches
// (the changed VMs, the changed networks, the networks of the changed VMs
// and of the routers of either, with all their VMs), drops from lastModel
// what the last part made and adds what the next part makes. A host of
// ten thousand VMs or networks models one or two of them instead of all.
//
// A VM on a port group makes its own namespace, vNICs, addresses, cgroup,
// offloads, shapers, port policy and tunnel entries, worked out from the
// VM and the port group alone; its host's firewall follows all the
// host's port policies and is worked out again from them (refirewall).
// What makes a VM's resources depend on the others is refused, and the
// caller models next whole: the specs differ beyond VMs and networks; an
// ACL names a port group or network as a peer (its members are any VMs);
// an ACL filters without port programs (the host's firewall then tracks
// connections, which its namespace's settings follow, for all its
// ports); a touched VM has a CPU limit (whose cpuset depends on the VMs
// before it, and moves those after it); load balancers, team steering or
// pools (whose classes and filters on an uplink are shared by all the
// ports of the switch) are modelled; a touched network leaves its VNI to
// allocation (which depends on every network) or carries its tunnels
// over a port group; networks are touched in a model of the lab (not of a
// host); or the part made of the last spec does not match lastModel (a
// resource the part makes depends on more than the part).
//
// lastKeys, when not nil, are the keys of lastModel's resources (a
// Splice's Keys): a splice then works out no key of the resources it keeps.
// lastRoom, when not nil, is the Room of lastModel (a Splice's Room): a
// change that only adds at its end then adds in place.
func SpliceModel(last, next *spec.Spec, lastModel []Resource, lastKeys []string, lastRoom *Room, opt Options) (Splice, bool) {
	nets, vms, ok := bound(last, next, opt)
	if !ok || sharedPerPort(lastModel) {
		return Splice{}, false
	}
	before := Model(part(last, nets, vms), opt)
	after := Model(part(next, nets, vms), opt)
	if sharedPerPort(after) {
		return Splice{}, false // the change brings what the last model had none of
	}
	if len(lastKeys) != len(lastModel) {
		lastKeys = make([]string, len(lastModel))
		for i := range lastModel {
			lastKeys[i] = lastModel[i].Key()
		}
	}
	if sp, ok := lastRoom.extend(lastModel, lastKeys, before, after); ok {
		return sp, true
	}
	sp, ok := splice(lastModel, lastKeys, before, after)
	switch {
	case !ok:
		return Splice{}, false
	case SameModel(sp.Model, lastModel):
		sp.Room = lastRoom // the model stays, and with it its room
		return sp, true
	}
	return withRoom(sp), true
}

// SameModel reports whether two models are one: the same resources in the
// same memory, which a caller keeping a model tells from an equal copy
// without comparing them.
func SameModel(a, b []Resource) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// bound returns the networks and VMs a change from last to next touches
// (see touched) when the specs alone let SpliceModel bound it that way.
func bound(last, next *spec.Spec, opt Options) (nets, vms map[string]bool, ok bool) {
	if last == nil || !sameButVMsAndNetworks(last, next) || last.HasBalancers() || next.HasBalancers() ||
		!aclsBounded(last, opt) || !aclsBounded(next, opt) {
		return nil, nil, false
	}
	nets, vms, ok = touched(last, next)
	if !ok || len(nets) > 0 && (opt.Host == "" || !allPinned(last) || !allPinned(next)) {
		return nil, nil, false
	}
	if opt.NumCPU > 0 && (limitsCPUs(last, vms) || limitsCPUs(next, vms)) {
		return nil, nil, false
	}
	return nets, vms, true
}

// MaySplice reports, from the specs alone, whether SpliceModel may splice
// a change from last to next made with opt: false when it will not, or
// when a switch attaches several uplinks or pools their traffic (whose
// models team or pool, which SpliceModel refuses); true when the models
// decide. A caller without the last model can tell by it, before
// modelling anything, whether to model the last spec whole or to splice
// its model from the next one's (SpliceModel(next, last, ...)).
func MaySplice(last, next *spec.Spec, opt Options) bool {
	if _, _, ok := bound(last, next, opt); !ok {
		return false
	}
	for i := range next.Switches { // the same in last (bound)
		if sw := &next.Switches[i]; sw.IOCEnabled() || len(sw.Uplinks) > 1 {
			return false
		}
	}
	return true
}

// sharedPerPort reports whether a model holds what a port's resources
// share with the other ports of its switch: team steering (the ports'
// assignments spread over the uplinks together), pools and their filters
// (each port's filter takes a priority the others' leave free), or load
// balancers.
func sharedPerPort(rs []Resource) bool {
	for i := range rs {
		switch rs[i].Kind {
		case KindSteer, KindPool, KindFilter, KindLB:
			return true
		}
	}
	return false
}

// aclsBounded reports whether the ACLs of s make each port's policy of
// its own VM and port group alone: no rule names a port group or network
// (whose members are any VMs of the spec), and, unless the ports run port
// programs, none filters at all (a host's firewall then tracks
// connections, and its namespace's settings with it, for all its ports).
func aclsBounded(s *spec.Spec, opt Options) bool {
	bounded := func(acl *spec.ACL) bool {
		if acl == nil {
			return true
		}
		if !opt.PortPrograms && acl.Filters() {
			return false
		}
		for _, r := range acl.Rules {
			for _, p := range []*spec.Peer{r.From, r.To} {
				if p != nil && (p.PortGroup != "" || p.Network != "") {
					return false
				}
			}
		}
		return true
	}
	for i := range s.Networks {
		if !bounded(s.Networks[i].ACL) {
			return false
		}
	}
	for i := range s.Switches {
		for j := range s.Switches[i].PortGroups {
			if !bounded(s.Switches[i].PortGroups[j].ACL) {
				return false
			}
		}
	}
	return true
}

// limitsCPUs reports whether a VM of s among vms has a CPU limit: the
// VMs' cpusets follow one another in spec order (modeler.cpuset), so such
// a VM added, removed or changed moves those of the VMs after it, and its
// own follows those before it. A VM without one takes no CPU of the
// sequence.
func limitsCPUs(s *spec.Spec, vms map[string]bool) bool {
	for i := range s.VMs {
		if s.VMs[i].CPUs > 0 && vms[s.VMs[i].Name] {
			return true
		}
	}
	return false
}

// allPinned reports whether every network of s gives its VNI.
func allPinned(s *spec.Spec) bool {
	for i := range s.Networks {
		if s.Networks[i].VNI == 0 {
			return false
		}
	}
	return true
}

// touched returns the networks and VMs a change from last to next touches,
// by name: networks added, removed or changed, those of VMs added, removed
// or changed, every network of the routers of those, and every VM added,
// removed or changed or with a vNIC on any of those networks. It is false
// when a touched network carries its tunnels over a port group.
func touched(last, next *spec.Spec) (nets, vms map[string]bool, ok bool) {
	nets, vms = map[string]bool{}, map[string]bool{}
	lastNets := pairByName(len(last.Networks), len(next.Networks),
		func(i int) string { return last.Networks[i].Name }, func(i int) string { return next.Networks[i].Name })
	for i, j := range lastNets.of {
		if n := &next.Networks[i]; j < 0 || !sameNetwork(&last.Networks[j], n) {
			nets[n.Name] = true
		}
	}
	for j := range last.Networks {
		if !lastNets.paired[j] {
			nets[last.Networks[j].Name] = true
		}
	}
	changedVM := func(vm *spec.VM) {
		for _, n := range vm.NICs {
			if n.Network != "" {
				nets[n.Network] = true
			}
		}
	}
	lastVMs := pairByName(len(last.VMs), len(next.VMs),
		func(i int) string { return last.VMs[i].Name }, func(i int) string { return next.VMs[i].Name })
	for i, j := range lastVMs.of {
		vm := &next.VMs[i]
		if j < 0 || !sameVM(&last.VMs[j], vm) {
			changedVM(vm)
			if j >= 0 {
				changedVM(&last.VMs[j])
			}
			vms[vm.Name] = true
		}
	}
	for j := range last.VMs {
		if vm := &last.VMs[j]; !lastVMs.paired[j] {
			changedVM(vm)
			vms[vm.Name] = true
		}
	}
	// A router's networks are modelled together: its namespace on a host,
	// and which hosts carry each of them, depend on all of them.
	routers := map[string]bool{}
	for _, s := range []*spec.Spec{last, next} {
		for i := range s.Networks {
			if n := &s.Networks[i]; nets[n.Name] && n.Router != "" {
				routers[n.Router] = true
			}
		}
	}
	for _, s := range []*spec.Spec{last, next} {
		for i := range s.Networks {
			n := &s.Networks[i]
			if routers[n.Router] && n.Router != "" {
				nets[n.Name] = true
			}
			if nets[n.Name] && n.PortGroup != "" {
				return nil, nil, false
			}
		}
	}
	if len(nets) == 0 {
		return nets, vms, true
	}
	for _, s := range []*spec.Spec{last, next} {
		for i := range s.VMs {
			vm := &s.VMs[i]
			for _, n := range vm.NICs {
				if nets[n.Network] {
					vms[vm.Name] = true
				}
			}
		}
	}
	return nets, vms, true
}

// pairing pairs the items of two lists by name: of[i] is the index in the
// first list of the item named as the second's i-th (-1: none), and
// paired[j] whether the first's j-th has a pair.
type pairing struct {
	of     []int
	paired []bool
}

// pairByName pairs the items of two lists of unique names (a spec's
// networks or VMs before and after a change) by name. Walking both in
// order, it finds each pair where the lists line up, or a few items off
// where one was added or removed, and hashes names only when both lists
// keep items it did not pair that way: a change to one of ten thousand
// networks compares names, not maps of them.
func pairByName(nFirst, nSecond int, first, second func(int) string) pairing {
	p := pairing{of: make([]int, nSecond), paired: make([]bool, nFirst)}
	const window = 4 // how far off a pair is looked for around the walk
	off, unpaired := 0, 0
	for i := range nSecond {
		p.of[i] = -1
		name := second(i)
		for d := 0; d <= window && p.of[i] < 0; d++ {
			for _, j := range [2]int{i + off + d, i + off - d} {
				if j >= 0 && j < nFirst && !p.paired[j] && first(j) == name {
					p.of[i], p.paired[j], off = j, true, j-i
					break
				}
			}
		}
		if p.of[i] < 0 {
			unpaired++
		}
	}
	if unpaired == 0 || unpaired == nSecond && nFirst == 0 {
		return p
	}
	rest := map[string]int{}
	for j := range nFirst {
		if !p.paired[j] {
			rest[first(j)] = j
		}
	}
	if len(rest) == 0 {
		return p // every item of the first is paired: the rest are new
	}
	for i := range nSecond {
		if p.of[i] < 0 {
			if j, ok := rest[second(i)]; ok {
				p.of[i], p.paired[j] = j, true
			}
		}
	}
	return p
}

// part is the spec with only the networks and VMs named.
func part(s *spec.Spec, nets, vms map[string]bool) *spec.Spec {
	p := *s
	p.Networks, p.VMs = nil, nil
	for _, n := range s.Networks {
		if nets[n.Name] {
			p.Networks = append(p.Networks, n)
		}
	}
	for _, vm := range s.VMs {
		if vms[vm.Name] {
			p.VMs = append(p.VMs, vm)
		}
	}
	return &p
}

// indexPart indexes a part's resources by key, but for its host
// firewalls, which it adds to firewalls instead.
func indexPart(part []Resource, firewalls map[string]Resource) map[string]int {
	at := make(map[string]int, len(part))
	for i := range part {
		if part[i].Kind == KindFirewall {
			firewalls[part[i].Key()] = part[i]
			continue
		}
		at[part[i].Key()] = i
	}
	return at
}

// splice drops from model (keys: its resources' keys) what before holds
// and adds what after holds, in place where a resource changes and at the
// end where it is new; of the resources either part makes, Before holds
// model's versions and After the new model's. It is false when a resource
// before holds is not as model has it: then model was made of more than
// before's spec, and before does not explain it. A host's firewall is all
// its ports': it is worked out again from the port policies of the new
// model (hostFirewall).
func splice(model []Resource, keys []string, before, after []Resource) (Splice, bool) {
	if slices.Equal(before, after) {
		// The change makes nothing different here (a host that carries
		// none of it): the model stays, not copied, once it is seen to
		// hold the part as the part makes it.
		return Splice{Model: model, Keys: keys, Before: before, After: after}, holds(model, keys, before)
	}
	var sp Splice
	firewalls := map[string]Resource{} // by key: the host firewalls either part makes
	inBefore, inAfter := indexPart(before, firewalls), indexPart(after, firewalls)
	n := len(model) + len(after) - len(before)
	n += roomAfter(n) // for the next change to add in place (Room)
	sp.Model, sp.Keys = make([]Resource, 0, n), make([]string, 0, n)
	keep := func(r *Resource, k string) {
		sp.Model = append(sp.Model, *r)
		sp.Keys = append(sp.Keys, k)
	}
	// The resources kept as they are go over in runs, copied together:
	// nearly all of a model of tens of thousands are.
	run := 0 // where the run of resources kept as they are starts
	flush := func(end int) {
		sp.Model = append(sp.Model, model[run:end]...)
		sp.Keys = append(sp.Keys, keys[run:end]...)
	}
	matched := 0
	for i := range model {
		r, k := &model[i], keys[i]
		if _, ok := firewalls[k]; ok {
			sp.Before = append(sp.Before, *r)
			continue // kept, in the run
		}
		j, ok := inBefore[k]
		if !ok {
			continue // kept, in the run
		}
		if *r != before[j] {
			return Splice{}, false
		}
		matched++
		sp.Before = append(sp.Before, *r)
		flush(i)
		run = i + 1
		if j, ok := inAfter[k]; ok {
			keep(&after[j], k)
		}
	}
	flush(len(model))
	if matched != len(inBefore) {
		return Splice{}, false // before makes what model lacks
	}
	for i := range after {
		if after[i].Kind == KindFirewall {
			continue
		}
		sp.After = append(sp.After, after[i])
		k := after[i].Key()
		if _, ok := inBefore[k]; !ok {
			keep(&after[i], k)
		}
	}
	for k, fw := range firewalls {
		if sp.addedFirewall(k, fw, before, after) {
			delete(firewalls, k)
		}
	}
	if len(firewalls) > 0 {
		sp.refirewall(firewalls)
	}
	return sp, true
}

// addedFirewall works out the host firewall of key k (fw, as a part makes
// it) without reading every port policy of the model, where the parts
// allow: when both make it alike, the ports they hold make the same of it
// and the model keeps it as it was; when only after makes it, the new
// policies add to the others, and it is stateful when either was.
func (sp *Splice) addedFirewall(k string, fw Resource, before, after []Resource) bool {
	b, inBefore := firewallIn(before, k)
	a, inAfter := firewallIn(after, k)
	switch {
	case inBefore && inAfter && b == a:
		sp.After = append(sp.After, sp.firewall(k, a))
		return true
	case inBefore || !inAfter:
		return false
	}
	for i := range sp.Model {
		if sp.Keys[i] == k {
			if a.Match != FirewallStateful {
				a.Match = sp.Model[i].Match
			}
			a.Owner = sp.Model[i].Owner
			sp.Model[i] = a
			sp.After = append(sp.After, a)
			return true
		}
	}
	sp.Model, sp.Keys = append(sp.Model, a), append(sp.Keys, k)
	sp.After = append(sp.After, a)
	return true
}

// firewall is the model's resource of key k, or def when it has none.
func (sp *Splice) firewall(k string, def Resource) Resource {
	for i := range sp.Model {
		if sp.Keys[i] == k {
			return sp.Model[i]
		}
	}
	return def
}

func firewallIn(rs []Resource, k string) (Resource, bool) {
	for _, r := range rs {
		if r.Kind == KindFirewall && r.Key() == k {
			return r, true
		}
	}
	return Resource{}, false
}

// holds reports whether model (keys: its resources' keys) holds each of
// part as it is.
func holds(model []Resource, keys []string, part []Resource) bool {
	if len(part) == 0 {
		return true
	}
	want := make(map[string]int, len(part))
	for i := range part {
		want[part[i].Key()] = i
	}
	found := 0
	for i, k := range keys {
		if j, ok := want[k]; ok {
			if model[i] != part[j] {
				return false
			}
			found++
		}
	}
	return found == len(want)
}

// refirewall makes each of the host firewalls (by key) what the port
// policies of the model make of it: gone without any, else in the model
// once, as hostFirewall makes it, and in After as it is now. A firewall
// stays where the model has it.
func (sp *Splice) refirewall(firewalls map[string]Resource) {
	type table struct{ ns, name string }
	policies := map[table][]Resource{}
	for _, fw := range firewalls {
		policies[table{fw.NS, fw.Name}] = nil
	}
	for i := range sp.Model {
		if r := &sp.Model[i]; r.Kind == KindPortSec {
			if ps, ok := policies[table{r.NS, r.Name}]; ok {
				policies[table{r.NS, r.Name}] = append(ps, *r)
			}
		}
	}
	model, keys := sp.Model[:0], sp.Keys[:0]
	placed := map[string]bool{}
	for i, r := range sp.Model {
		k := sp.Keys[i]
		if fw, ok := firewalls[k]; ok && r.Kind == KindFirewall {
			placed[k] = true
			ps := policies[table{fw.NS, fw.Name}]
			if len(ps) == 0 {
				continue
			}
			r = hostFirewall(fw, ps)
			sp.After = append(sp.After, r)
		}
		model, keys = append(model, r), append(keys, k)
	}
	for _, k := range slices.Sorted(maps.Keys(firewalls)) {
		fw := firewalls[k]
		if ps := policies[table{fw.NS, fw.Name}]; !placed[k] && len(ps) > 0 {
			fw = hostFirewall(fw, ps)
			model, keys = append(model, fw), append(keys, k)
			sp.After = append(sp.After, fw)
		}
	}
	sp.Model, sp.Keys = model, keys
}

// sameNetwork reports whether two networks are given alike.
func sameNetwork(a, b *spec.Network) bool {
	if a.Security != nil || b.Security != nil || a.ACL != nil || b.ACL != nil || a.LoadBalancers != nil || b.LoadBalancers != nil {
		return reflect.DeepEqual(a, b)
	}
	return a.Name == b.Name && a.VNI == b.VNI && a.Subnet == b.Subnet && a.Gateway == b.Gateway &&
		a.Subnet6 == b.Subnet6 && a.Gateway6 == b.Gateway6 && a.Router == b.Router && a.MTU == b.MTU &&
		a.PortGroup == b.PortGroup
}

// sameVM reports whether two VMs are given alike.
func sameVM(a, b *spec.VM) bool {
	if a.Name != b.Name || a.Host != b.Host || a.CPUs != b.CPUs || len(a.NICs) != len(b.NICs) {
		return false
	}
	for i := range a.NICs {
		x, y := a.NICs[i], b.NICs[i]
		if !samePointee(x.Offloads, y.Offloads) || !sameRef(x.Connected, y.Connected) || !sameRef(x.Attach, y.Attach) ||
			!samePointee(x.Shaping, y.Shaping) {
			return false
		}
		x.Offloads, y.Offloads, x.Connected, y.Connected, x.Attach, y.Attach = nil, nil, nil, nil, nil, nil
		x.Shaping, y.Shaping = nil, nil
		if x != y {
			return false
		}
	}
	return true
}

// samePointee reports whether two optional values are both unset or
// deeply equal: most vNICs set neither, which is told without reflection
// (a spec of thousands of VMs compares each).
func samePointee[T any](a, b *T) bool {
	return a == b || a != nil && b != nil && reflect.DeepEqual(a, b)
}

// sameRef reports whether two optional values are both unset or equal.
func sameRef[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
