package service

import (
	"fmt"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// HostPlan is what applying a spec would change on one host, and what
// that was worked out against (Basis, in words): over etcd no host's
// kernel is read from here, so each host's plan models its part of the
// spec (plan.Options.Host) against its part of the spec its agent last
// reported realizing.
type HostPlan struct {
	// Host is "" for this machine as a whole.
	Host    string       `json:"host,omitempty"`
	Basis   string       `json:"basis"`
	Actions []PlanAction `json:"actions"`
}

// Flatten is every host's actions, host after host.
func Flatten(plans []HostPlan) []PlanAction {
	out := []PlanAction{}
	for _, p := range plans {
		out = append(out, p.Actions...)
	}
	return out
}

// hostDiff is what host's agent changes to go from current's part of the
// host to next's (either may be nil: none).
func hostDiff(next, current *spec.Spec, host string) plan.Plan {
	var desired, now []plan.Resource
	if next != nil && plan.PlacesOn(next, host) {
		desired = plan.Model(next, plan.Options{Host: host})
	}
	if current != nil && plan.PlacesOn(current, host) {
		now = plan.Model(current, plan.Options{Host: host})
	}
	return plan.Diff(desired, now)
}

// hostsOf lists the hosts of the specs (nil ones left out), each once.
func hostsOf(specs ...*spec.Spec) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range specs {
		if s == nil {
			continue
		}
		for _, h := range s.Hosts {
			if !seen[h.Name] {
				seen[h.Name] = true
				out = append(out, h.Name)
			}
		}
	}
	return out
}

// hostPlans is, host by host, what applying next would change: each
// host's plan is worked out against the spec of the generation its agent
// last reported realizing (from the history when it lags), or, for a host
// that failed the stored generation and so rolled back, the generation
// stored before it; a host without a live report against the stored one.
func (c *Cluster) hostPlans(st ClusterStore, last *store.Record, next *spec.Spec) []HostPlan {
	b := basisFinder{c: c, st: st, name: next.Name}
	if last != nil {
		b.gen, b.last = last.Generation, specOr(c, last)
		b.views, b.err = st.Reports(next.Name)
		b.heads, _ = st.HistoryHeads(next.Name)
	}
	var out []HostPlan
	for _, h := range hostsOf(next, b.last) {
		current, basis := b.basis(h)
		out = append(out, HostPlan{Host: h, Basis: basis, Actions: Actions(hostDiff(next, current, h))})
	}
	return out
}

// basisFinder finds what each host holds, by its report.
type basisFinder struct {
	c     *Cluster
	st    ClusterStore
	name  string
	gen   int
	last  *spec.Spec
	views []etcdstore.Report
	err   error
	heads []history.Entry
}

func (b *basisFinder) basis(host string) (*spec.Spec, string) {
	const notRead = "modelled for the host: its kernel is not read from here"
	if b.last == nil {
		return nil, "nothing stored yet: everything of the spec on the host is new (" + notRead + ")"
	}
	if b.err != nil {
		return b.last, fmt.Sprintf("its report could not be read (%v): against generation %d as stored, %s", b.err, b.gen, notRead)
	}
	var r *etcdstore.Report
	for i := range b.views {
		if b.views[i].Host == host {
			r = &b.views[i]
		}
	}
	switch {
	case r == nil:
		return b.last, fmt.Sprintf("no live report from its agent: against generation %d as stored, %s", b.gen, notRead)
	case r.Generation == b.gen && len(r.Errors) == 0:
		return b.last, fmt.Sprintf("reports generation %d current: against that generation's spec, %s", b.gen, notRead)
	case r.Generation == b.gen:
		if s, gen, ok := b.previous(); ok {
			return s, fmt.Sprintf("failed generation %d, which its agent rolled back: against generation %d's spec, the one stored before it, %s", b.gen, gen, notRead)
		}
		return nil, fmt.Sprintf("failed generation %d, which its agent rolled back, and the history holds no generation before it: against nothing, %s", b.gen, notRead)
	}
	if s, ok := b.generation(r.Generation); ok {
		return s, fmt.Sprintf("reports generation %d, lagging behind %d: against generation %d's spec from the history, %s", r.Generation, b.gen, r.Generation, notRead)
	}
	return b.last, fmt.Sprintf("reports generation %d, which the history no longer holds: against generation %d as stored, %s", r.Generation, b.gen, notRead)
}

// generation is the spec of a generation the history holds.
func (b *basisFinder) generation(gen int) (*spec.Spec, bool) {
	h, err := history.Find(b.heads, gen)
	if err != nil {
		return nil, false
	}
	return b.specOf(h)
}

// previous is the spec of the generation stored before the current one.
func (b *basisFinder) previous() (*spec.Spec, int, bool) {
	h, err := history.Previous(b.heads, b.gen)
	if err != nil {
		return nil, 0, false
	}
	s, ok := b.specOf(h)
	return s, h.Generation, ok
}

func (b *basisFinder) specOf(h history.Entry) (*spec.Spec, bool) {
	e, err := wholeEntry(clusterKept{b.st}, b.name, h)
	if err != nil {
		return nil, false
	}
	doc, err := b.c.Load(e.SpecFile, e.Spec)
	if err != nil {
		return nil, false
	}
	return doc.Spec, true
}
