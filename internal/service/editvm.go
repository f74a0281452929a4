package service

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vnet-project/vnet/internal/spec"
)

// VMEdit is a change of one VM of an infrastructure's spec in force: the
// entry written in (in place of the VM of its name, or added at the end
// of vms), or with no entry the VM taken out. It is applied as an apply
// of the whole spec with that edit made would be: a new generation, the
// same plan, history entry, kernel and VMs runtimes attached kept.
type VMEdit struct {
	Infra string
	VM    string // the VM's name
	// Entry is the VM's entry as the user wrote it (spec.DecodeVM); nil
	// takes the VM out. A name it gives must be VM; one left out is VM.
	Entry *spec.VMEntry
	// File names where the change came from, as Source.File names a
	// spec's file ("api:NAME").
	File string
}

// ErrNoVM: the infrastructure has no VM of that name. It is an
// ErrNotFound too.
var ErrNoVM = noVM("no such VM")

type noVM string

func (e noVM) Error() string        { return string(e) }
func (e noVM) Is(target error) bool { return target == ErrNotFound }

// EditVM applies a change of one VM to the spec in force on this machine.
func (l *Local) EditVM(ctx context.Context, e VMEdit, o ApplyOptions) (*ApplyResult, error) {
	return editVM(ctx, l, e, o)
}

// EditVM stores the spec in force with a change of one VM as the next
// generation in etcd, which the hosts' agents realize.
func (c *Cluster) EditVM(ctx context.Context, e VMEdit, o ApplyOptions) (*ApplyResult, error) {
	return editVM(ctx, c, e, o)
}

// applier is a back end's apply of a spec: Local's and Cluster's read
// the change in ctx.
type applier interface {
	Apply(ctx context.Context, src Source, o ApplyOptions) (*ApplyResult, error)
}

// editVM makes the edit where the apply reads the spec in force (under
// the infrastructure's lock, or on top of the generation it is stored
// after), and keeps the VMs runtimes attached as an apply of the user's
// spec keeps them (keepAttached).
func editVM(ctx context.Context, b applier, e VMEdit, o ApplyOptions) (*ApplyResult, error) {
	vm, err := e.Written()
	if err != nil {
		return nil, err
	}
	var att *Attached
	ctx = withRework(ctx, func(_, now *spec.Document) (*spec.Document, error) {
		next, err := e.applyTo(now, vm)
		if err != nil {
			return nil, err
		}
		next, att, err = keepAttached(e.Infra, specWhat(next), next, now, o.DropAttached, true)
		return next, err
	}, false)
	// The apply reads only the name of the spec it is given: the spec it
	// applies is the one the rework makes.
	given := &spec.Document{Spec: &spec.Spec{Name: e.Infra}, File: e.File}
	var res *ApplyResult
	for try := 0; ; try++ {
		res, err = b.Apply(ctx, Source{Doc: given}, o)
		// Over etcd, a change stored since the edit read the spec in
		// force: the edit is made again on top of it.
		if !errors.Is(err, ErrConflict) || try >= conflictTries {
			break
		}
	}
	if res != nil && !att.Empty() {
		res.Attached = att
	}
	return res, err
}

// Written is the VM the edit writes in, named as the edit is (a name the
// entry leaves out is the edit's); nil for a VM taken out.
func (e VMEdit) Written() (*spec.VM, error) {
	if e.Entry == nil {
		return nil, nil
	}
	vm := e.Entry.VM
	switch {
	case !e.Entry.Given("name"):
		vm.Name = e.VM
	case vm.Name != e.VM:
		return nil, spec.Errors{e.Entry.Errorf("name", "the entry names VM %q but the address %q", vm.Name, e.VM)}
	}
	return &vm, nil
}

// applyTo is now, the spec in force, with the edit made: vm written in,
// or with vm nil the edit's VM taken out. Problems of the VM written in
// are located in its entry (spec.VMEntry.Relocate).
func (e VMEdit) applyTo(now *spec.Document, vm *spec.VM) (*spec.Document, error) {
	if now == nil {
		return nil, fmt.Errorf("%q: %w", e.Infra, ErrNotFound)
	}
	i := slices.IndexFunc(now.Spec.VMs, func(v spec.VM) bool { return v.Name == e.VM })
	var next *spec.Document
	var err error
	if vm == nil {
		if i < 0 {
			return nil, fmt.Errorf("%s has no VM %q: %w", e.Infra, e.VM, ErrNoVM)
		}
		next, err = spec.EditVMs(now, []string{e.VM}, nil)
	} else {
		if i < 0 {
			i = len(now.Spec.VMs) // an added VM goes at the end
		}
		next, err = spec.EditVMs(now, nil, []spec.VM{*vm})
		var errs spec.Errors
		if errors.As(err, &errs) {
			return nil, e.Entry.Relocate(errs, i)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: VM %s: %w", e.Infra, e.VM, err)
	}
	if e.File != "" {
		next.File = e.File
	}
	return next, nil
}
