package reconcile

import (
	"fmt"
	"maps"
	"sort"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
)

// MarkReader is a dataplane that reads the marks of namespaces and
// cgroups by name (dataplane.Linux.Marks): by their keys, what each that
// exists carries.
type MarkReader interface {
	Marks(namespaces, cgroups []string) (map[string]string, error)
}

// NamespaceIdentifier is a dataplane that tells namespaces apart by the
// IDs the kernel never gives two namespaces of one boot
// (dataplane.Linux): the ownership check then need not enter a namespace
// whose ID the record holds.
type NamespaceIdentifier interface {
	// NamespaceBoot is the boot the IDs are of, "" when the kernel tells
	// none; missing, once a boot, says so for the user.
	NamespaceBoot() (boot, missing string)
	// NamespaceIDs is the current ID of each named namespace that exists.
	NamespaceIDs(names []string) map[string]uint64
	// MarkedNamespaceIDs is the ID of each named namespace the dataplane
	// last saw carrying mark.
	MarkedNamespaceIDs(names []string, mark string) map[string]uint64
}

// recordStands checks, before an apply that reads only what its change
// touches, that the namespaces and cgroups the record says it made are
// still on the host and still carry this store's mark as the apply would
// set it. One that is gone (removed behind vnet's back, or by another
// store's gc), made anew by someone else, or marked for another store or
// directory (a state directory that moved) makes the apply read
// everything instead: "no changes" then means the host holds what the
// record names. It returns why the apply cannot trust the record, "" when
// it can, and the namespaces ids vouched for, by name.
//
// A namespace whose ID is the one ids noted, in this boot and with this
// mark, is the namespace the record names, which carried this store's
// mark: its mark is not read, which would mean entering it. Those ids
// cannot vouch for (an older record, a kernel without IDs, another boot,
// a namespace made anew) have their marks read as before; the apply then
// records their IDs (see recordedNamespaces).
func (e *Engine) recordStands(infra string, recorded []plan.Resource, ids *plan.NamespaceIDs) (string, map[string]uint64) {
	mr, ok := e.DP.(MarkReader)
	if !ok {
		return "", nil
	}
	var namespaces, cgroups []string
	for _, r := range recorded {
		switch r.Kind {
		case plan.KindNetns:
			namespaces = append(namespaces, r.Name)
		case plan.KindCgroup:
			cgroups = append(cgroups, r.Name)
		}
	}
	if len(namespaces)+len(cgroups) == 0 {
		return "", nil
	}
	want := e.ownMark(infra)
	vouched, unknown := e.vouch(ids, want, namespaces)
	marks := map[string]string{}
	if len(unknown)+len(cgroups) > 0 {
		var err error
		if marks, err = mr.Marks(unknown, cgroups); err != nil {
			return "the marks of what the record names could not be read: " + err.Error(), vouched
		}
	}
	var gone, other []string
	for _, r := range recorded {
		if !plan.Markable(r.Kind) {
			continue
		}
		if _, ok := vouched[r.Name]; ok && r.Kind == plan.KindNetns {
			continue
		}
		mark, ok := marks[r.Key()]
		switch {
		case !ok:
			gone = append(gone, r.Key())
		case mark != want:
			other = append(other, r.Key())
		}
	}
	if len(gone)+len(other) == 0 {
		return "", vouched
	}
	sort.Strings(gone)
	sort.Strings(other)
	why := "the host no longer holds what the record names"
	if len(gone) > 0 {
		why += fmt.Sprintf(": %d gone (%s)", len(gone), firstFew(gone))
	}
	if len(other) > 0 {
		why += fmt.Sprintf(": %d not marked as this store's in %s (%s)", len(other), e.Store.Location(), firstFew(other))
	}
	return why, vouched
}

// recordStandsWithin is recordStands of what the record names in the
// namespaces of scope (a VM's cgroup goes with its namespace): those are
// all a scoped apply reads, changes or removes, and so all whose
// ownership it must be sure of; checking the rest would cost as much as
// the infrastructure is large, whatever the change. A change that
// touches no namespace (an apply of the same spec) checks all the record
// names: its "no changes" says the host holds them. The IDs the record
// noted of the namespaces left unchecked are vouched for as they were
// noted (when of this boot and mark), so that the apply records them
// again and the next apply that touches one of them needs not read its
// mark; one made anew meanwhile has another ID, and that apply reads it.
func (e *Engine) recordStandsWithin(infra string, scope plan.Scope, recorded []plan.Resource, ids *plan.NamespaceIDs) (string, vouchedIDs) {
	if len(scope) == 0 {
		why, checked := e.recordStands(infra, recorded, ids)
		return why, vouchedIDs{checked: checked}
	}
	var checked []plan.Resource
	for i := range recorded {
		// Markable first: of a model of thousands, few are, and a
		// cgroup's namespace is worked out of its name.
		if r := &recorded[i]; plan.Markable(r.Kind) {
			if _, ok := scope[r.Namespace()]; ok {
				checked = append(checked, *r)
			}
		}
	}
	why, vouched := e.recordStands(infra, checked, ids)
	v := vouchedIDs{checked: vouched}
	if why == "" && e.carries(infra, ids) {
		v.carried, v.scope = ids.IDs, scope
	}
	return why, v
}

// vouchedIDs are the IDs of the namespaces an apply's ownership check
// vouched for (see recordStandsWithin): those it checked, and those the
// record noted outside the scope it checked, looked up there rather than
// copied, as there are as many as the infrastructure has namespaces.
type vouchedIDs struct {
	checked map[string]uint64
	carried map[string]uint64 // the record's, read only; nil: none carried
	scope   plan.Scope        // where carried does not vouch
}

// id is the ID vouched for of the namespace name.
func (v vouchedIDs) id(name string) (uint64, bool) {
	if id, ok := v.checked[name]; ok {
		return id, true
	}
	if _, in := v.scope[name]; in {
		return 0, false
	}
	id, ok := v.carried[name]
	return id, ok && id != 0
}

// all is every ID vouched for, by name.
func (v vouchedIDs) all() map[string]uint64 {
	out := map[string]uint64{}
	for name := range v.carried {
		if id, ok := v.id(name); ok {
			out[name] = id
		}
	}
	maps.Copy(out, v.checked)
	return out
}

// carries reports whether the IDs the record noted (ids) vouch for the
// namespaces a check leaves out: they are of this boot and of the mark
// this store's apply sets.
func (e *Engine) carries(infra string, ids *plan.NamespaceIDs) bool {
	ni, ok := e.DP.(NamespaceIdentifier)
	if !ok || ids == nil {
		return false
	}
	boot, _ := ni.NamespaceBoot()
	return boot != "" && ids.Boot == boot && ids.Mark == e.ownMark(infra)
}

// ownMark is the mark this store's apply gives infra's namespaces.
func (e *Engine) ownMark(infra string) string {
	return plan.Mark{Infra: infra, Store: e.Store.ID(), Dir: e.Store.Location()}.String()
}

// vouch splits namespaces into those ids vouches for and those whose
// marks must be read (all of them when the dataplane tells no IDs).
func (e *Engine) vouch(ids *plan.NamespaceIDs, want string, namespaces []string) (map[string]uint64, []string) {
	ni, ok := e.DP.(NamespaceIdentifier)
	if !ok {
		return nil, namespaces
	}
	boot, missing := ni.NamespaceBoot()
	if missing != "" {
		e.logf("%s\n", missing)
	}
	return ids.Vouch(boot, want, namespaces, ni.NamespaceIDs)
}

// recordedIDs is what a record (nil: none) holds of its namespaces' IDs.
func recordedIDs(rec *store.Record) *plan.NamespaceIDs {
	if rec == nil {
		return nil
	}
	return rec.Namespaces
}

// recordedNamespaces is what an apply records of the identity of the
// namespaces of its model: the ID of each the dataplane saw carrying this
// store's mark (it made, marked or read it), else the one the record's
// identities vouched for; nil when the dataplane tells no IDs. A
// namespace of neither has no ID recorded, and the next apply reads its
// mark. It is made for every apply, of a model of as many namespaces as
// VMs, so the map is made at its size and each name is looked up once in
// what the dataplane saw (a few, for a scoped apply) and in what was
// vouched for.
func (e *Engine) recordedNamespaces(infra string, model []plan.Resource, vouched vouchedIDs) *plan.NamespaceIDs {
	ni, ok := e.DP.(NamespaceIdentifier)
	if !ok {
		return nil
	}
	boot, _ := ni.NamespaceBoot()
	if boot == "" {
		return nil
	}
	names := netnsNames(model)
	if len(names) == 0 {
		return nil
	}
	want := e.ownMark(infra)
	seen := ni.MarkedNamespaceIDs(names, want)
	ids := make(map[string]uint64, len(names))
	for _, name := range names {
		if id, ok := seen[name]; ok {
			ids[name] = id
		} else if id, ok := vouched.id(name); ok {
			ids[name] = id
		}
	}
	return &plan.NamespaceIDs{Boot: boot, Mark: want, IDs: ids}
}

// netnsNames are the names of the namespaces of a model, in its order.
func netnsNames(model []plan.Resource) []string {
	n := 0
	for i := range model {
		if model[i].Kind == plan.KindNetns {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	names := make([]string, 0, n)
	for i := range model {
		if model[i].Kind == plan.KindNetns {
			names = append(names, model[i].Name)
		}
	}
	return names
}

// firstFew names the first few of a list.
func firstFew(names []string) string {
	const few = 3
	if len(names) <= few {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:few], len(names)-few)
}
