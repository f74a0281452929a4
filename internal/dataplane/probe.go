package dataplane

import (
	"fmt"
	"os"

	"github.com/vnet-project/vnet/internal/killpoint"
	"github.com/vnet-project/vnet/internal/plan"
)

// ProbeNSPrefix starts the name of the probe's scratch namespace; its
// process's pid ends it. Earlier versions mounted it in NetnsDir, where a
// killed probe left it: vnet gc removes those.
const ProbeNSPrefix = "vnetprobe."

// Probe checks that the kernel has what the given resources need, by making
// each kind once in a scratch namespace. A missing feature is a
// FeatureError wrapping ErrNotSupported, found before anything is changed.
func (l *Linux) Probe(needs []plan.Resource) error {
	kinds := map[plan.Kind]bool{}
	for _, r := range needs {
		kinds[r.Kind] = true
	}
	if kinds[plan.KindCgroup] {
		if err := l.cgroups.Available(); err != nil {
			return err
		}
	}
	if !kinds[plan.KindBridge] && !kinds[plan.KindVeth] && !kinds[plan.KindLineRate] && !kinds[plan.KindShaper] && !kinds[plan.KindSteer] {
		return nil
	}
	// The scratch namespace has no entry in NetnsDir: only this process
	// holds it, so it goes when the probe ends or the process dies.
	ns := fmt.Sprintf("%s%d", ProbeNSPrefix, os.Getpid())
	if err := newAnonNetns(ns); err != nil {
		return &FeatureError{Feature: "network namespaces", Hint: "CONFIG_NET_NS", Err: err}
	}
	defer func() {
		l.forget(ns)
		closeAnonNetns(ns)
	}()
	if err := inNS(ns, func() error { return setUpCurrentNetns(ns, plan.WantedSysctls(plan.NamespaceSysctls), false) }); err != nil {
		return &FeatureError{Feature: "network namespaces", Hint: "CONFIG_NET_NS", Err: err}
	}
	killpoint.At("probe namespace made")
	probe := plan.Resource{Kind: plan.KindVeth, Owner: "probe",
		A: plan.End{NS: ns, Name: "pa", MAC: "02:00:00:00:00:01", MTU: 1500, Master: "pbr"},
		B: plan.End{NS: ns, Name: "pb", MAC: "02:00:00:00:00:02", MTU: 1500}}
	steps := []plan.Resource{
		{Kind: plan.KindBridge, NS: ns, Name: "pbr", MTU: 1500, Owner: "probe"},
		probe,
		{Kind: plan.KindLineRate, NS: ns, Link: "pb", Rate: 1e9},
	}
	if kinds[plan.KindPool] || kinds[plan.KindFilter] {
		steps = append(steps,
			plan.Resource{Kind: plan.KindPool, NS: ns, Link: "pb", Class: 0x101, Rate: 5e8, Ceil: 1e9, Quantum: 100000},
			plan.Resource{Kind: plan.KindFilter, NS: ns, Link: "pb", Prio: 100, Match: "-8/ffffffff/02000000", Class: 0x101})
	}
	if kinds[plan.KindShaper] {
		steps = append(steps, plan.Resource{Kind: plan.KindShaper, NS: ns, Link: "pa", Rate: 1e8, Ceil: 2e8, Burst: 100000})
	}
	if kinds[plan.KindSteer] {
		probe.A.Isolated = true // teamed uplinks are isolated bridge ports
		steps = append(steps, probe,
			plan.Resource{Kind: plan.KindSteer, NS: ns, Link: "pb", Name: "probe", Match: plan.Steer{Out: true, To: []string{"pa"}, Local: []string{"02:00:00:00:00:03"}}.String()},
			plan.Resource{Kind: plan.KindSteer, NS: ns, Link: "pa", Match: plan.Steer{Bcast: true, Local: []string{"02:00:00:00:00:03"}}.String()})
	}
	for _, r := range steps {
		if err := l.ensure(r); err != nil {
			return err
		}
		killpoint.At("probe made " + string(r.Kind))
	}
	return l.probeFirewall(ns, needs)
}
