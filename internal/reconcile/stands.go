package reconcile

import (
	"fmt"
	"sort"

	"github.com/vnet-project/vnet/internal/plan"
)

// MarkReader is a dataplane that reads the marks of namespaces and
// cgroups by name (dataplane.Linux.Marks): by their keys, what each that
// exists carries.
type MarkReader interface {
	Marks(namespaces, cgroups []string) (map[string]string, error)
}

// recordStands checks, before an apply that reads only what its change
// touches, that the namespaces and cgroups the record says it made are
// still on the host and still carry this store's mark as the apply would
// set it. One that is gone (removed behind vnet's back, or by another
// store's gc), made anew by someone else, or marked for another store or
// directory (a state directory that moved) makes the apply read
// everything instead: "no changes" then means the host holds what the
// record names. It returns why the apply cannot trust the record, "" when
// it can.
func (e *Engine) recordStands(infra string, recorded []plan.Resource) string {
	mr, ok := e.DP.(MarkReader)
	if !ok {
		return ""
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
		return ""
	}
	marks, err := mr.Marks(namespaces, cgroups)
	if err != nil {
		return "the marks of what the record names could not be read: " + err.Error()
	}
	want := plan.Mark{Infra: infra, Store: e.Store.ID(), Dir: e.Store.Location()}.String()
	var gone, other []string
	for _, r := range recorded {
		if !plan.Markable(r.Kind) {
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
		return ""
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
	return why
}

// firstFew names the first few of a list.
func firstFew(names []string) string {
	const few = 3
	if len(names) <= few {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:few], len(names)-few)
}
