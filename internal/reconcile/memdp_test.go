package reconcile

import (
	"maps"
	"slices"

	"github.com/vnet-project/vnet/internal/plan"
)

// memDP is a dataplane without a kernel: it holds what its steps made,
// reads back what a scope holds of it as the kernel's would (marks,
// namespace IDs and all), and enforces port policies with port programs,
// as the dataplane does on a kernel that has them. It lets the engine's
// own work be measured and compared, path by path, apart from the
// kernel's.
type memDP struct {
	byKey map[string]plan.Resource
	// byNS holds the keys of the resources somewhere in each namespace,
	// and byLink those on each link (by "ns/link"), so that a scoped read
	// reads what the scope holds, as the kernel's does.
	byNS   map[string]map[string]bool
	byLink map[string]map[string]bool
	ids    map[string]uint64 // of the namespaces there, by name
	lastID uint64
	// seen are the namespaces whose marks this operation set or read: a
	// dataplane tells the IDs of those alone (MarkedNamespaceIDs), and
	// is made anew for each operation (begin).
	seen  map[string]bool
	steps int
}

func newMemDP() *memDP {
	return &memDP{byKey: map[string]plan.Resource{}, byNS: map[string]map[string]bool{}, byLink: map[string]map[string]bool{},
		ids: map[string]uint64{}, seen: map[string]bool{}}
}

// begin starts an operation, as a new dataplane would: it has seen no
// namespace's mark.
func (d *memDP) begin() { clear(d.seen) }

// placesOf are the namespaces where a resource is, and its links there
// ("ns/link"), as plan.Scope places them.
func placesOf(r *plan.Resource) (namespaces, links []string) {
	switch r.Kind {
	case plan.KindVeth:
		namespaces, links = []string{r.A.NS}, []string{r.A.NS + "/" + r.A.Name}
		if r.B.NS != "" {
			namespaces, links = append(namespaces, r.B.NS), append(links, r.B.NS+"/"+r.B.Name)
		}
		return namespaces, links
	case plan.KindBridge, plan.KindVxlan, plan.KindDevice:
		return []string{r.NS}, []string{r.NS + "/" + r.Name}
	case plan.KindNetns, plan.KindFirewall, plan.KindCgroup:
		return []string{r.Namespace()}, nil
	}
	return []string{r.NS}, []string{r.NS + "/" + r.Link}
}

func index(m map[string]map[string]bool, at, key string) {
	if m[at] == nil {
		m[at] = map[string]bool{}
	}
	m[at][key] = true
}

func (d *memDP) put(r plan.Resource) {
	k := r.Key()
	d.byKey[k] = r
	namespaces, links := placesOf(&r)
	for _, ns := range namespaces {
		index(d.byNS, ns, k)
	}
	for _, l := range links {
		index(d.byLink, l, k)
	}
	if r.Kind == plan.KindNetns {
		d.seen[r.Name] = true
		if _, ok := d.ids[r.Name]; !ok {
			d.lastID++
			d.ids[r.Name] = d.lastID
		}
	}
}

func (d *memDP) remove(r plan.Resource) {
	k := r.Key()
	old, ok := d.byKey[k]
	if !ok {
		return
	}
	delete(d.byKey, k)
	namespaces, links := placesOf(&old)
	for _, ns := range namespaces {
		delete(d.byNS[ns], k)
	}
	for _, l := range links {
		delete(d.byLink[l], k)
	}
	if old.Kind == plan.KindNetns {
		delete(d.ids, old.Name)
	}
}

func (d *memDP) Observe(infra string, hints []plan.Resource) ([]plan.Resource, error) {
	return d.ObserveScope(infra, nil, hints)
}

func (d *memDP) ObserveScope(_ string, scope plan.Scope, _ []plan.Resource) ([]plan.Resource, error) {
	var keys []string
	if scope.Full() {
		keys = slices.Collect(maps.Keys(d.byKey))
	} else {
		seen := map[string]bool{}
		read := func(candidates map[string]bool) {
			for k := range candidates {
				if !seen[k] && scope.Holds(d.byKey[k]) {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
		for ns, links := range scope {
			if links == nil {
				read(d.byNS[ns])
				continue
			}
			for l := range links {
				read(d.byLink[ns+"/"+l])
			}
		}
	}
	slices.Sort(keys)
	out := make([]plan.Resource, len(keys))
	for i, k := range keys {
		out[i] = d.byKey[k]
		switch r := &out[i]; r.Kind {
		case plan.KindSteer, plan.KindPortSec, plan.KindPortBPF, plan.KindLB:
			// The kernel holds a digest of the program's text, which the
			// engine resolves with its models (plan.ResolveSteer).
			r.Match = plan.SteerDigest(r.Match)
		}
	}
	return out, nil
}

func (d *memDP) Execute(a plan.Action) error {
	d.steps++
	if a.Old != nil {
		d.remove(*a.Old)
	}
	if a.New != nil {
		d.put(*a.New)
	}
	return nil
}

func (d *memDP) Probe([]plan.Resource) error { return nil }

func (d *memDP) PortPrograms() (bool, string) { return true, "" }

func (d *memDP) Marks(namespaces, cgroups []string) (map[string]string, error) {
	marks := map[string]string{}
	for _, of := range []struct {
		kind  plan.Kind
		names []string
	}{{plan.KindNetns, namespaces}, {plan.KindCgroup, cgroups}} {
		for _, n := range of.names {
			k := plan.Resource{Kind: of.kind, Name: n}.Key()
			if r, ok := d.byKey[k]; ok {
				marks[k] = r.Mark
				if of.kind == plan.KindNetns {
					d.seen[n] = true
				}
			}
		}
	}
	return marks, nil
}

func (d *memDP) NamespaceBoot() (string, string) { return "boot", "" }

func (d *memDP) NamespaceIDs(names []string) map[string]uint64 {
	ids := map[string]uint64{}
	for _, n := range names {
		if id, ok := d.ids[n]; ok {
			ids[n] = id
		}
	}
	return ids
}

func (d *memDP) MarkedNamespaceIDs(names []string, mark string) map[string]uint64 {
	ids := map[string]uint64{}
	for _, n := range names {
		if !d.seen[n] {
			continue // as the kernel's dataplane, which looks up what it saw first
		}
		r, ok := d.byKey[plan.Resource{Kind: plan.KindNetns, Name: n}.Key()]
		if ok && r.Mark == mark {
			ids[n] = d.ids[n]
		}
	}
	return ids
}
