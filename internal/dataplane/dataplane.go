package dataplane

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/killpoint"
	"github.com/vnet-project/vnet/internal/plan"
)

// Linux realizes plan actions on this machine's kernel.
type Linux struct {
	handles map[string]*netlink.Handle
	cgroups *Cgroups
	// HostNS, when set, is the namespace that holds a host model's
	// host-level objects (plan.CurrentNS for the one vnet runs in):
	// Observe reads there the links whose alias names the infrastructure
	// (plan.OwnedBy).
	HostNS string
	// OnlyStore, when set, makes Observe see only namespaces marked by that
	// store, with their cgroups: several agents on one machine (a test
	// cluster) share /run/netns and must not see each other's VMs.
	OnlyStore string
}

// New returns a dataplane for this machine. It fails with ErrNotRoot when
// the process cannot change the network.
func New() (*Linux, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if err := captureHostNS(); err != nil {
		return nil, err
	}
	return &Linux{handles: map[string]*netlink.Handle{}, cgroups: DetectCgroups()}, nil
}

// Close releases the netlink handles.
func (l *Linux) Close() {
	for name, h := range l.handles {
		h.Close()
		delete(l.handles, name)
	}
}

func (l *Linux) handle(ns string) (*netlink.Handle, error) {
	if h, ok := l.handles[ns]; ok {
		return h, nil
	}
	h, err := handleFor(ns)
	if err != nil {
		return nil, err
	}
	l.handles[ns] = h
	return h, nil
}

func (l *Linux) forget(ns string) {
	if h, ok := l.handles[ns]; ok {
		h.Close()
		delete(l.handles, ns)
	}
}

// Execute carries out one action.
func (l *Linux) Execute(a plan.Action) error {
	var err error
	switch a.Op {
	case plan.OpCreate:
		err = l.ensure(*a.New)
	case plan.OpModify:
		// Every ensure converges an existing object to the resource, and
		// plan only changes in place the kinds whose ensure can.
		err = l.ensure(*a.New)
	case plan.OpReplace:
		if err = l.remove(*a.Old); err == nil {
			err = l.ensure(*a.New)
		}
	case plan.OpDelete:
		err = l.remove(*a.Old)
	default:
		err = fmt.Errorf("unknown operation %q", a.Op)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", a.Op, a.Subject(), err)
	}
	if killpoint.Enabled {
		killpoint.At(fmt.Sprintf("done: %s %s", a.Op, a.Subject()))
	}
	return nil
}

func (l *Linux) ensure(r plan.Resource) error {
	switch r.Kind {
	case plan.KindNetns:
		return l.ensureNetns(r)
	case plan.KindBridge:
		return l.ensureBridge(r)
	case plan.KindVeth:
		return l.ensureVeth(r)
	case plan.KindAddr:
		return l.ensureAddr(r)
	case plan.KindLineRate:
		return l.ensureLineRate(r)
	case plan.KindPool:
		return l.ensurePool(r)
	case plan.KindFilter:
		return l.ensureFilter(r)
	case plan.KindShaper:
		return l.ensureShaper(r)
	case plan.KindSteer:
		return l.ensureSteer(r)
	case plan.KindFirewall:
		return l.ensureFirewall(r)
	case plan.KindPortSec:
		return l.ensurePortSec(r)
	case plan.KindOffloads:
		return setOffloads(r)
	case plan.KindCgroup:
		return l.cgroups.Ensure(r)
	case plan.KindVxlan:
		return l.ensureVxlan(r)
	case plan.KindFDB:
		return l.ensureFDB(r)
	}
	return fmt.Errorf("unknown kind %q", r.Kind)
}

func (l *Linux) remove(r plan.Resource) error {
	switch r.Kind {
	case plan.KindNetns:
		l.forget(r.Name)
		return deleteNetns(r.Name)
	case plan.KindBridge:
		return l.removeLink(r.NS, r.Name)
	case plan.KindVeth:
		return l.removeLink(r.A.NS, r.A.Name)
	case plan.KindAddr:
		return l.removeAddr(r)
	case plan.KindLineRate:
		return l.removeLineRate(r)
	case plan.KindPool:
		return l.removePool(r)
	case plan.KindFilter:
		return l.removeFilter(r)
	case plan.KindShaper:
		return l.removeShaper(r)
	case plan.KindSteer:
		return l.removeSteer(r)
	case plan.KindFirewall:
		return l.removeFirewall(r)
	case plan.KindPortSec:
		return l.removePortSec(r)
	case plan.KindOffloads:
		return nil // offloads go with their link; a dropped setting is reset as a change (plan.ResetDroppedOffloads)
	case plan.KindCgroup:
		return l.cgroups.Remove(r.Name)
	case plan.KindVxlan:
		return l.removeLink(r.NS, r.Name)
	case plan.KindFDB:
		return l.removeFDB(r)
	}
	return fmt.Errorf("unknown kind %q", r.Kind)
}

// isGone reports whether err means the object no longer exists.
func isGone(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, os.ErrNotExist)
}
