package dataplane

import (
	"errors"
	"fmt"
	"os"

	"github.com/vnet-project/vnet/internal/killpoint"
	"github.com/vnet-project/vnet/internal/plan"
)

// ProbeNSPrefix starts the name of the probe's scratch namespace; its
// process's pid ends it. Earlier versions mounted it in NetnsDir, where a
// killed probe left it: vnet gc removes those.
const ProbeNSPrefix = "vnetprobe."

// probeSet is what a probe makes in its scratch namespace, one bit a
// feature.
type probeSet uint8

const (
	probeLinks    probeSet = 1 << iota // bridge, veth pair, line rate (HTB)
	probePools                         // HTB classes and filters
	probeShaper                        // a port's shaper
	probeSteer                         // teaming's steering programs
	probeFirewall                      // nftables, port security
	probeStateful                      // and ACLs tracking connections (br_netfilter)
	probeLB                            // load balancers' programs
)

// probeNeeds is what of the kernel the resources need that a probe checks.
func probeNeeds(needs []plan.Resource) probeSet {
	var s probeSet
	for _, r := range needs {
		switch r.Kind {
		case plan.KindBridge, plan.KindVeth, plan.KindLineRate:
			s |= probeLinks
		case plan.KindShaper:
			s |= probeLinks | probeShaper
		case plan.KindSteer, plan.KindPortBPF:
			s |= probeLinks | probeSteer
		case plan.KindLB:
			s |= probeLinks | probeLB
		case plan.KindPool, plan.KindFilter:
			s |= probePools
		case plan.KindFirewall:
			s |= probeFirewall
			if r.Match == plan.FirewallStateful {
				s |= probeStateful
			}
		}
	}
	if s&probeLinks == 0 {
		return 0 // the probe makes pools and firewalls on its links only
	}
	return s
}

// covers reports whether a probe that found known need not run again for
// want. Without br_netfilter (simulated) it never covers ACLs that track
// connections, whatever a probe found before.
func (known probeSet) covers(want probeSet, withoutBrNetfilter bool) bool {
	if withoutBrNetfilter {
		known &^= probeStateful
	}
	return want&^known == 0
}

// Probe checks that the kernel has what the given resources need, by making
// each kind once in a scratch namespace. A missing feature is a
// FeatureError wrapping ErrNotSupported, found before anything is changed.
// What a probe found there is kept for the life of l: a later probe that
// needs no more makes nothing, and a failed step (Execute) forgets it all,
// so that the next apply probes again and says what is missing.
func (l *Linux) Probe(needs []plan.Resource) error {
	for _, r := range needs {
		if r.Kind == plan.KindCgroup {
			if err := l.cgroups().Available(); err != nil {
				return err
			}
			break
		}
	}
	want := probeNeeds(needs)
	l.mu.Lock()
	known := l.probed
	l.mu.Unlock()
	if known.covers(want, l.WithoutBrNetfilter) {
		return nil
	}
	if err := l.probe(needs, want); err != nil {
		return err
	}
	l.mu.Lock()
	l.probed |= want
	l.mu.Unlock()
	return nil
}

// Features is what the probes of a dataplane found the kernel has, for
// another dataplane of the same process to start from (AssumeFeatures): a
// server opens one for each operation, and would otherwise make the probe's
// scratch namespace for every change that adds a link.
type Features struct{ found probeSet }

// Features returns what l's probes found and no failed step has put in
// doubt since (see Probe).
func (l *Linux) Features() Features {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Features{l.probed}
}

// AssumeFeatures has l take what another dataplane's probes found as found
// by its own: a failed step forgets it as it forgets its own.
func (l *Linux) AssumeFeatures(f Features) {
	l.mu.Lock()
	l.probed |= f.found
	l.mu.Unlock()
}

// forgetProbes makes the next Probe make everything again.
func (l *Linux) forgetProbes() {
	l.mu.Lock()
	l.probed = 0
	l.mu.Unlock()
}

// probe makes what want names in a scratch namespace.
func (l *Linux) probe(needs []plan.Resource, want probeSet) error {
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
	if want&probePools != 0 {
		steps = append(steps,
			plan.Resource{Kind: plan.KindPool, NS: ns, Link: "pb", Class: 0x101, Rate: 5e8, Ceil: 1e9, Quantum: 100000},
			plan.Resource{Kind: plan.KindFilter, NS: ns, Link: "pb", Prio: 100, Match: "-8/ffffffff/02000000", Class: 0x101})
	}
	if want&probeShaper != 0 {
		steps = append(steps, plan.Resource{Kind: plan.KindShaper, NS: ns, Link: "pa", Rate: 1e8, Ceil: 2e8, Burst: 100000})
	}
	if want&probeSteer != 0 {
		probe.A.Isolated = true // teamed uplinks are isolated bridge ports
		steps = append(steps, probe,
			plan.Resource{Kind: plan.KindSteer, NS: ns, Link: "pb", Name: "probe", Match: plan.Steer{Out: true, To: []string{"pa"}, Local: []string{"02:00:00:00:00:03"}}.String()},
			plan.Resource{Kind: plan.KindSteer, NS: ns, Link: "pa", Match: plan.Steer{Bcast: true, Local: []string{"02:00:00:00:00:03"}}.String()})
	}
	if want&probeLB != 0 {
		steps = append(steps, plan.Resource{Kind: plan.KindLB, NS: ns, Link: "pb", Match: probeBalancers})
	}
	for _, r := range steps {
		if err := l.ensure(r); err != nil {
			return err
		}
		killpoint.At("probe made " + string(r.Kind))
	}
	return l.fw.Probe(ns, needs, l.brNetfilter)
}

// brNetfilter checks that br_netfilter is there to pass bridged IP traffic
// through the namespace's IP hooks: its settings exist in every namespace
// once the module is loaded, and in none before.
func (l *Linux) brNetfilter(ns string) error {
	if l.WithoutBrNetfilter {
		return fmt.Errorf("stat /proc/sys/%s: %w (simulated)", plan.ConntrackSysctlV4, os.ErrNotExist)
	}
	err := inNS(ns, func() error {
		_, err := os.Stat("/proc/sys/" + plan.ConntrackSysctlV4)
		return err
	})
	if errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// probeBalancers is a load balancer of both families, the programs any
// port's load balancers load.
var probeBalancers = "lb probe vip 192.0.2.100,2001:db8::100 mac 02:00:00:00:00:04 listen tcp:80:80,udp:53:53 select source 60s backends 192.0.2.11/2001:db8::11@02:00:00:00:00:05"
