package plan

import (
	"reflect"

	"github.com/vnet-project/vnet/internal/spec"
)

// Splice is a model of a spec made from the model of the spec before it,
// for a change of virtual networks and their VMs: only the networks the
// change touches are modelled again (see SpliceModel).
type Splice struct {
	Model []Resource // the whole model of the next spec
	// Before and After are the resources the change can touch (those the
	// touched part of either spec makes), as the last model has them and
	// as Model has them: the resources the two models disagree on are all
	// among them, so ModelScope of the two is the scope of the change.
	Before, After []Resource
}

// SpliceModel makes the model of next from lastModel, the model of last
// made with the same options, when the two specs differ only in virtual
// networks and VMs on them: it models the part of each spec the change
// touches (the changed networks, the networks of the changed VMs and of
// the routers of either, with all their VMs), drops from lastModel what the
// last part made and adds what the next part makes. A host of ten
// thousand networks models one or two of them instead of all.
//
// It returns false when it cannot bound the change that way, and the
// caller models next whole: the specs differ elsewhere, a network leaves
// its VNI to allocation (which depends on every network), a touched VM is
// on a port group as well (whose policies, teams and pools span its
// switch), a touched network's tunnels use a port group, the model holds
// team steering or pools, or the part made of the last spec does not
// match lastModel (a resource the part makes depends on more than the
// part).
func SpliceModel(last, next *spec.Spec, lastModel []Resource, opt Options) (Splice, bool) {
	if opt.Host == "" || last == nil || !sameButVMsAndNetworks(last, next) || !allPinned(last) || !allPinned(next) {
		return Splice{}, false
	}
	for i := range lastModel {
		if k := lastModel[i].Kind; k == KindSteer || k == KindPool {
			return Splice{}, false
		}
	}
	nets, vms, ok := touched(last, next)
	if !ok {
		return Splice{}, false
	}
	before := Model(part(last, nets, vms), opt)
	after := Model(part(next, nets, vms), opt)
	model, was, now, ok := splice(lastModel, before, after)
	if !ok {
		return Splice{}, false
	}
	return Splice{Model: model, Before: was, After: now}, true
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
// or changed, every network of the routers of those, and every VM with a
// vNIC on any of them. It is false when a touched VM has a vNIC on a port
// group, or a touched network carries its tunnels over one.
func touched(last, next *spec.Spec) (nets, vms map[string]bool, ok bool) {
	nets, vms = map[string]bool{}, map[string]bool{}
	lastNets := make(map[string]*spec.Network, len(last.Networks))
	for i := range last.Networks {
		lastNets[last.Networks[i].Name] = &last.Networks[i]
	}
	for i := range next.Networks {
		n := &next.Networks[i]
		if old, ok := lastNets[n.Name]; !ok || !sameNetwork(old, n) {
			nets[n.Name] = true
		}
		delete(lastNets, n.Name)
	}
	for name := range lastNets {
		nets[name] = true
	}
	lastVMs := make(map[string]*spec.VM, len(last.VMs))
	for i := range last.VMs {
		lastVMs[last.VMs[i].Name] = &last.VMs[i]
	}
	changedVM := func(vm *spec.VM) {
		for _, n := range vm.NICs {
			if n.Network != "" {
				nets[n.Network] = true
			}
		}
	}
	for i := range next.VMs {
		vm := &next.VMs[i]
		if old, ok := lastVMs[vm.Name]; !ok || !sameVM(old, vm) {
			changedVM(vm)
			if ok {
				changedVM(old)
			}
			vms[vm.Name] = true
		}
		delete(lastVMs, vm.Name)
	}
	for name, vm := range lastVMs {
		changedVM(vm)
		vms[name] = true
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
	for _, s := range []*spec.Spec{last, next} {
		for i := range s.VMs {
			vm := &s.VMs[i]
			for _, n := range vm.NICs {
				if nets[n.Network] {
					vms[vm.Name] = true
				}
			}
			if !vms[vm.Name] {
				continue
			}
			for _, n := range vm.NICs {
				if n.Network == "" {
					return nil, nil, false
				}
			}
		}
	}
	return nets, vms, true
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

// splice drops from model what before holds and adds what after holds,
// in place where a resource changes and at the end where it is new. It
// returns the new model and, of the resources either part makes, model's
// versions and the new model's. It is false when a resource before holds
// is not as model has it: then model was made of more than before's spec,
// and before does not explain it. A host's firewall is all its ports': it
// is worked out again from the port policies of the new model
// (hostFirewall).
func splice(model, before, after []Resource) (out, was, now []Resource, ok bool) {
	firewalls := map[string]Resource{} // by key: the host firewalls either part makes
	inBefore := make(map[string]int, len(before))
	for i := range before {
		if before[i].Kind == KindFirewall {
			firewalls[before[i].Key()] = before[i]
			continue
		}
		inBefore[before[i].Key()] = i
	}
	inAfter := make(map[string]int, len(after))
	for i := range after {
		if after[i].Kind == KindFirewall {
			firewalls[after[i].Key()] = after[i]
			continue
		}
		inAfter[after[i].Key()] = i
	}
	out = make([]Resource, 0, len(model)+len(after)-len(before))
	for i := range model {
		r := &model[i]
		k := r.Key()
		if _, ok := firewalls[k]; ok {
			was = append(was, *r)
			out = append(out, *r)
			continue
		}
		j, ok := inBefore[k]
		if !ok {
			out = append(out, *r)
			continue
		}
		if *r != before[j] {
			return nil, nil, nil, false
		}
		was = append(was, *r)
		if k, ok := inAfter[k]; ok {
			out = append(out, after[k])
		}
	}
	if len(was) != len(inBefore)+countKind(was, KindFirewall) {
		return nil, nil, nil, false // before makes what model lacks
	}
	for i := range after {
		if after[i].Kind == KindFirewall {
			continue
		}
		now = append(now, after[i])
		if _, ok := inBefore[after[i].Key()]; !ok {
			out = append(out, after[i])
		}
	}
	if len(firewalls) > 0 {
		var fws []Resource
		out, fws = refirewall(out, firewalls)
		now = append(now, fws...)
	}
	return out, was, now, true
}

func countKind(rs []Resource, k Kind) int {
	n := 0
	for i := range rs {
		if rs[i].Kind == k {
			n++
		}
	}
	return n
}

// refirewall makes each of the host firewalls (by key) what the port
// policies of model make of it: gone without any, else in model once, as
// hostFirewall makes it; and returns them as they are now. A firewall
// stays where model has it.
func refirewall(model []Resource, firewalls map[string]Resource) (out, now []Resource) {
	policies := map[string][]Resource{} // by the firewall's key
	for _, r := range model {
		if r.Kind == KindPortSec {
			if k := (Resource{Kind: KindFirewall, NS: r.NS, Name: r.Name}).Key(); firewalls[k].Kind != "" {
				policies[k] = append(policies[k], r)
			}
		}
	}
	out = model[:0]
	placed := map[string]bool{}
	for _, r := range model {
		if r.Kind == KindFirewall {
			if fw, ok := firewalls[r.Key()]; ok {
				placed[r.Key()] = true
				if len(policies[r.Key()]) == 0 {
					continue
				}
				r = hostFirewall(fw, policies[r.Key()])
				now = append(now, r)
			}
		}
		out = append(out, r)
	}
	for k, fw := range firewalls {
		if !placed[k] && len(policies[k]) > 0 {
			fw = hostFirewall(fw, policies[k])
			out = append(out, fw)
			now = append(now, fw)
		}
	}
	return out, now
}

// sameNetwork reports whether two networks are given alike.
func sameNetwork(a, b *spec.Network) bool {
	if a.Security != nil || b.Security != nil || a.ACL != nil || b.ACL != nil {
		return reflect.DeepEqual(a, b)
	}
	x, y := *a, *b
	return x == y
}

// sameVM reports whether two VMs are given alike.
func sameVM(a, b *spec.VM) bool {
	if a.Name != b.Name || a.Host != b.Host || a.CPUs != b.CPUs || len(a.NICs) != len(b.NICs) {
		return false
	}
	for i := range a.NICs {
		x, y := a.NICs[i], b.NICs[i]
		if !reflect.DeepEqual(x.Offloads, y.Offloads) || !sameRef(x.Connected, y.Connected) || !sameRef(x.Attach, y.Attach) {
			return false
		}
		x.Offloads, y.Offloads, x.Connected, y.Connected, x.Attach, y.Attach = nil, nil, nil, nil, nil, nil
		if x != y {
			return false
		}
	}
	return true
}

// sameRef reports whether two optional values are both unset or equal.
func sameRef[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
