package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vnet-project/vnet/internal/spec"
)

// Paused is what of an infrastructure is paused: its traffic stopped at
// the switch while everything stays configured. Each element selects
// ports: PauseAll every vNIC and host port, "vm/NAME" a VM's vNICs,
// "network/NAME" the vNICs on a virtual network, "portgroup/NAME" the
// vNICs and host ports on a port group. It is kept sorted, without
// repeats, and is stored beside the spec (not in it): pausing changes
// no spec, and an apply of the same spec keeps what is paused.
//
// A paused port is its switch-side end set administratively down, still
// a port of its bridge: the VM sees no carrier, frames to it are dropped
// by the switch, its counters, addresses, policies and forwarding entries
// stay, and resuming is one link brought up again. A TAP a hypervisor
// opened, which vnet does not set down, is taken out of its bridge.
type Paused []string

// PauseAll selects every port of the infrastructure.
const PauseAll = "*"

// The kinds of a selector, before its slash.
const (
	pauseVM        = "vm"
	pauseNetwork   = "network"
	pausePortGroup = "portgroup"
)

// PauseVM, PauseNetwork and PausePortGroup are the selectors of a VM's,
// a network's and a port group's ports.
func PauseVM(name string) string        { return pauseVM + "/" + name }
func PauseNetwork(name string) string   { return pauseNetwork + "/" + name }
func PausePortGroup(name string) string { return pausePortGroup + "/" + name }

// ErrPauseSelector is wrapped by errors about a selector that names no
// object of the spec, or is not one.
var ErrPauseSelector = fmt.Errorf("%w: not something to pause", spec.ErrInvalid)

// Has reports whether p holds the selector itself (not whether it pauses
// what the selector names: see VNIC, HostPort).
func (p Paused) Has(sel string) bool {
	_, ok := slices.BinarySearch(p, sel)
	return ok
}

// With is p with sel added.
func (p Paused) With(sel string) Paused {
	i, ok := slices.BinarySearch(p, sel)
	if ok {
		return p
	}
	return slices.Insert(slices.Clone(p), i, sel)
}

// Without is p without sel.
func (p Paused) Without(sel string) Paused {
	i, ok := slices.BinarySearch(p, sel)
	if !ok {
		return p
	}
	out := slices.Delete(slices.Clone(p), i, i+1)
	if len(out) == 0 {
		return nil
	}
	return out
}

// Normal is p sorted, without repeats or empty elements; nil when empty,
// so that "nothing paused" has one form.
func (p Paused) Normal() Paused {
	out := make(Paused, 0, len(p))
	for _, s := range p {
		if s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

// Equal reports whether p and q select the same.
func (p Paused) Equal(q Paused) bool { return slices.Equal(p.Normal(), q.Normal()) }

// VNIC reports whether p pauses a VM's vNIC: the whole infrastructure, the
// VM, or the vNIC's port group or network is paused.
func (p Paused) VNIC(vm string, n *spec.VNIC) bool {
	if len(p) == 0 {
		return false
	}
	return p.Has(PauseAll) || p.Has(PauseVM(vm)) ||
		n.PortGroup != "" && p.Has(PausePortGroup(n.PortGroup)) ||
		n.Network != "" && p.Has(PauseNetwork(n.Network))
}

// HostPort reports whether p pauses a host port on portgroup.
func (p Paused) HostPort(portgroup string) bool {
	if len(p) == 0 {
		return false
	}
	return p.Has(PauseAll) || p.Has(PausePortGroup(portgroup))
}

// Check reports the first selector of p that names nothing in s.
func (p Paused) Check(s *spec.Spec) error {
	for _, sel := range p {
		if !names(s, sel) {
			return fmt.Errorf("%s: %w", Describe(sel), ErrPauseSelector)
		}
	}
	return nil
}

// Prune is p without the selectors that name nothing in s: an apply that
// removes a paused VM forgets its pause, so that a VM of that name added
// later starts as any other.
func (p Paused) Prune(s *spec.Spec) Paused {
	var out Paused
	for _, sel := range p {
		if names(s, sel) {
			out = append(out, sel)
		}
	}
	return out
}

// names reports whether sel names something of s.
func names(s *spec.Spec, sel string) bool {
	if sel == PauseAll {
		return true
	}
	kind, name, ok := strings.Cut(sel, "/")
	if !ok || name == "" {
		return false
	}
	switch kind {
	case pauseVM:
		_, ok = s.VM(name)
	case pauseNetwork:
		_, ok = s.Network(name)
	case pausePortGroup:
		_, _, ok = s.PortGroup(name)
	default:
		ok = false
	}
	return ok
}

// Describe says what a selector selects, as a person would: "VM web1",
// "network blue", "port group pg-web", "every port".
func Describe(sel string) string {
	if sel == PauseAll {
		return "every port"
	}
	kind, name, _ := strings.Cut(sel, "/")
	switch kind {
	case pauseVM:
		return "VM " + name
	case pauseNetwork:
		return "network " + name
	case pausePortGroup:
		return "port group " + name
	}
	return fmt.Sprintf("%q", sel)
}
