package service

import (
	"context"
	"fmt"
	"io"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// LinkRequest moves or cuts one vNIC of a running VM.
type LinkRequest struct {
	// Infra is the infrastructure; "" finds the one applied
	// infrastructure with the VM.
	Infra string
	VM    string
	NIC   string // eth0, eth1, ...
	// PortGroup is where the vNIC goes ("" keeps its port group), and
	// Connected whether it is connected there.
	PortGroup string
	Connected bool
	// Log receives the plan and the progress as the apply goes.
	Log io.Writer
	// By is who asks, for the event list.
	By Actor
}

// LinkResult is what a link or unlink changed.
type LinkResult struct {
	Infra    string
	Executed int
	// SpecFile is the file the applied spec came from, which no longer
	// matches what is applied.
	SpecFile     string
	AgentStarted string
}

// Link moves or cuts one vNIC in the applied spec and applies it: the VM
// and its namespace stay, its switch port changes under running traffic.
// The infrastructure is locked before its spec is read, so that two link
// commands do not each change the spec as it was.
func (l *Local) Link(_ context.Context, r LinkRequest) (*LinkResult, error) {
	name := r.Infra
	if name == "" {
		var err error
		if name, err = l.vmInfra(r.VM); err != nil {
			return nil, err
		}
	}
	var out *LinkResult
	err := l.changing(name, "", r.Log, func(eng *reconcile.Engine, st *store.Bolt) error {
		before := beforeChange(st, name)
		doc, err := l.doc(name)
		if err != nil {
			return err
		}
		changed, err := spec.SetVNIC(doc, r.VM, r.NIC, r.PortGroup, r.Connected)
		if err != nil {
			return tagged{ErrInvalid, err.Error()}
		}
		res, err := eng.Apply(changed)
		if err != nil {
			return err
		}
		verb := history.Link
		if !r.Connected {
			verb = history.Unlink
		}
		l.keepLocal(r.By, st, change{verb: verb}, name, before, r.Log)
		out = &LinkResult{Infra: name, Executed: res.Executed, SpecFile: doc.File}
		out.AgentStarted, err = l.syncAgent(changed.Spec)
		return err
	})
	return out, err
}

// vmInfra finds the one applied infrastructure with that VM.
func (l *Local) vmInfra(vm string) (string, error) {
	recs, err := l.records(nil, nil)
	if err != nil {
		return "", err
	}
	var found []string
	for _, r := range recs {
		if doc, err := l.docOf(r); err == nil {
			if _, ok := doc.Spec.VM(vm); ok {
				found = append(found, r.Name)
			}
		}
	}
	switch len(found) {
	case 0:
		return "", tagged{ErrInvalid, fmt.Sprintf("no applied infrastructure has a VM %q", vm)}
	case 1:
		return found[0], nil
	}
	return "", tagged{ErrInvalid, fmt.Sprintf("VM %q is in %v: say which with --infra", vm, found)}
}
