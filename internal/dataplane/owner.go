package dataplane

import (
	"fmt"
	"sort"

	"github.com/vnet-project/vnet/internal/plan"
)

// ensureNetns makes a namespace (createNetns) and marks it as the
// resource's Mark says: the alias of its lo, which lives and dies with the
// namespace, so that whoever meets the namespace can tell who made it.
// Equivalent to: ip netns add NAME; ip -n NAME link set lo alias MARK
func (l *Linux) ensureNetns(r plan.Resource) error {
	if err := createNetns(r.Name, r.Sysctls, r.Mark); err != nil {
		return err
	}
	return l.SetMark(r.Name, r.Mark)
}

// SetMark sets (or, with an empty mark, clears) a namespace's mark.
// Equivalent to: ip -n NS link set lo alias MARK
func (l *Linux) SetMark(ns, mark string) error {
	h, err := l.handle(ns)
	if err != nil {
		return err
	}
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("netns %s: find lo: %w", ns, err)
	}
	if lo.Attrs().Alias == mark {
		return nil
	}
	if err := h.LinkSetAlias(lo, mark); err != nil {
		return fmt.Errorf("netns %s: mark lo: %w", ns, err)
	}
	return nil
}

// NamedNS is a namespace whose name looks like vnet's, with its mark ("" when
// it has none).
type NamedNS struct {
	Name string
	Mark string
}

// VnetNamespaces lists every namespace whose name starts with vnet's
// prefix, with its mark, by name: what `vnet recover` reports.
// Equivalent to: ip netns list; ip -n NS link show lo
func (l *Linux) VnetNamespaces() ([]NamedNS, error) {
	names, err := listNetns(plan.NSPrefix)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]NamedNS, 0, len(names))
	for _, ns := range names {
		h, err := l.handle(ns)
		if err != nil {
			return nil, err
		}
		lo, err := h.LinkByName("lo")
		if err != nil {
			return nil, fmt.Errorf("netns %s: find lo: %w", ns, err)
		}
		out = append(out, NamedNS{Name: ns, Mark: lo.Attrs().Alias})
	}
	return out, nil
}
