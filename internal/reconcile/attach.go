package reconcile

import (
	"fmt"
	"slices"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// checkAttached checks, on one machine, what the spec's VMs bring of the
// machine (attach: a container's namespace, a TAP) before anything is
// planned: each namespace exists, each TAP exists in this process's
// namespace (or, taken already, in its host's lab namespace) and is no
// other bridge's port. Only the VMs new or changed since last, the spec of
// the last apply, are checked, unless the apply is full: what became of the
// others is drift (a container gone without a word), which does not stop
// a change elsewhere.
func (e *Engine) checkAttached(doc *spec.Document, last *spec.Spec) error {
	s := doc.Spec
	hf, ok := e.DP.(HostFactReader)
	if !ok || !s.UsesRealHost() {
		return nil
	}
	checked := plan.AllVMs
	if !e.Full {
		checked = plan.CheckedVMs(last, s)
	}
	var errs spec.Errors
	for _, h := range s.Hosts {
		taps, namespaces := plan.HostNames(s, h.Name, checked)
		if len(taps) == 0 && len(namespaces) == 0 {
			continue
		}
		facts, err := hf.HostFacts(plan.CurrentNS, taps, namespaces, "")
		if err != nil {
			return fmt.Errorf("read this machine for %s: %w", s.Name, err)
		}
		if err := e.tapsTaken(hf, s.Name, h.Name, taps, facts); err != nil {
			return err
		}
		if _, err := plan.CheckHostFacts(doc, h.Name, facts, checked); err != nil {
			if es, ok := err.(spec.Errors); ok {
				errs = append(errs, es...)
				continue
			}
			return err
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// tapsTaken adds to facts the TAPs that an earlier apply moved into the
// host's lab namespace already: they are this infrastructure's, ports of
// its switch there.
func (e *Engine) tapsTaken(hf HostFactReader, infra, host string, taps []string, facts plan.HostFacts) error {
	var missing []string
	for _, t := range taps {
		if _, ok := facts.Links[t]; !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	labNS := plan.NSName(infra, host)
	taken, err := hf.HostFacts(labNS, missing, nil, "")
	if err != nil {
		return nil // no lab namespace yet: the TAPs are missing
	}
	for name, lf := range taken.Links {
		if plan.IsDeviceAlias(lf.Alias) && plan.OwnedBy(lf.Alias, infra) {
			lf.Master, lf.MasterAlias = "", ""
			facts.Links[name] = lf
		}
	}
	return nil
}

// VMDrift returns what an apply of doc would do to one VM's part of the
// kernel: nothing when the kernel holds the VM as the spec says. It reads
// only where the VM's resources are: where a model of the spec without
// the VM differs from one with it.
func (e *Engine) VMDrift(doc *spec.Document, vm string) (plan.Plan, error) {
	s := doc.Spec
	without := *s
	without.VMs = slices.DeleteFunc(slices.Clone(s.VMs), func(v spec.VM) bool { return v.Name == vm })
	opt := e.scoped(plan.Options{NumCPU: e.numCPU()})
	with := e.markOwn(s.Name, plan.Model(s, opt))
	scope := plan.ModelScope(plan.Model(&without, opt), with)
	desired := scope.Desired(with)
	observed, err := e.observeScope(s.Name, scope, desired)
	if err != nil {
		return plan.Plan{}, fmt.Errorf("observe %s: %w", s.Name, err)
	}
	observed = plan.ResolveSteer(scope.Observed(observed, desired, with), desired)
	return plan.Diff(desired, observed), nil
}
