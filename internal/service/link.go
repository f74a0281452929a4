package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vnet-project/vnet/internal/events"
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
	// Wait, over etcd, waits that long at most for every host to report
	// the new generation current, telling Progress of each, as an apply's
	// wait does.
	Wait     time.Duration
	Progress func(WaitEvent)
	// Stored, over etcd, is told of the generation once it is stored,
	// before any wait.
	Stored func(Stored)
	// Log receives the plan and the progress as the apply goes.
	Log io.Writer
	// By is who asks, for the event list.
	By Actor
}

// LinkResult is what a link or unlink changed.
type LinkResult struct {
	Infra string `json:"infra"`
	// Plan is the kernel's actions done on this machine; over etcd none
	// (the hosts' agents work out theirs).
	Plan []PlanAction `json:"plan"`
	// Executed counts the kernel changes made on this machine; over etcd
	// none (the hosts' agents make them).
	Executed int `json:"executed"`
	// SpecFile is the file the applied spec came from, which no longer
	// matches what is applied.
	SpecFile string `json:"spec_file"`
	// Stored is, over etcd, the generation that holds the change, with
	// the hosts that realize it; nil on this machine.
	Stored       *Stored `json:"stored,omitempty"`
	AgentStarted string  `json:"agent_started,omitempty"`
}

// Link moves or cuts one vNIC in the applied spec and applies it: the VM
// and its namespace stay, its switch port changes under running traffic.
// The infrastructure is locked before its spec is read, so that two link
// commands do not each change the spec as it was.
func (l *Local) Link(_ context.Context, r LinkRequest) (_ *LinkResult, err error) {
	if r.Wait > 0 {
		return nil, Invalid("--wait needs --etcd: on this machine a link is done when it returns")
	}
	name := r.Infra
	if name == "" {
		if name, err = l.vmInfra(r.VM); err != nil {
			return nil, err
		}
	}
	var out *LinkResult
	start := time.Now()
	defer func() {
		action, executed := events.Link, 0
		if !r.Connected {
			action = events.Unlink
		}
		if out != nil {
			executed = out.Executed
		}
		note(l, r.By.event(action, name, start, executed, err), r.Log)
	}()
	err = l.changing(name, "", r.Log, func(eng *reconcile.Engine, st *store.Bolt) error {
		before := beforeChange(st, name)
		doc, err := l.doc(name)
		if err != nil {
			return err
		}
		changed, err := spec.SetVNIC(doc, r.VM, r.NIC, r.PortGroup, r.Connected)
		if err != nil {
			return tagged{ErrInvalid, err.Error()}
		}
		verb := history.Link
		if !r.Connected {
			verb = history.Unlink
		}
		kept := l.keepInRecord(eng, r.By, change{verb: verb}, name, before, priorDoc(l, before))
		res, err := eng.Apply(changed)
		if err != nil {
			return err
		}
		if !kept() {
			l.keepLocal(r.By, st, change{verb: verb}, name, before, r.Log)
		}
		out = &LinkResult{Infra: name, Plan: Actions(res.Plan), Executed: res.Executed, SpecFile: doc.File}
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
	return infraWithVM(vm, recs, l.docOf)
}

// infraWithVM is the one infrastructure of recs whose spec has that VM.
func infraWithVM(vm string, recs []*store.Record, docOf func(*store.Record) (*spec.Document, error)) (string, error) {
	var found []string
	for _, r := range recs {
		if doc, err := docOf(r); err == nil {
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

// Link stores the applied spec with the vNIC moved or cut as the
// infrastructure's next generation, with its history entry, as an apply
// of that spec would; each host's agent realizes it. The change is worked
// out from the generation read, and stored only if it is still the last
// one: when another writer got there first, it is worked out again from
// theirs. With Wait it then waits for every host to report it current.
func (c *Cluster) Link(ctx context.Context, r LinkRequest) (_ *LinkResult, err error) {
	name := r.Infra
	if name == "" {
		_, recs, err := c.records()
		if err != nil {
			return nil, err
		}
		if name, err = infraWithVM(r.VM, recs, c.docOf); err != nil {
			return nil, err
		}
	}
	verb := history.Link
	if !r.Connected {
		verb = history.Unlink
	}
	for try := 0; ; try++ {
		rec, err := c.record(name)
		if err != nil {
			return nil, err
		}
		doc, err := c.docOf(rec)
		if err != nil {
			return nil, err
		}
		changed, err := spec.SetVNIC(doc, r.VM, r.NIC, r.PortGroup, r.Connected)
		if err != nil {
			return nil, tagged{ErrInvalid, err.Error()}
		}
		ctx := context.WithValue(ctx, changeKey{}, change{verb: verb, basis: rec.Generation})
		res, err := c.Apply(ctx, Source{Doc: changed}, ApplyOptions{Wait: r.Wait, Progress: r.Progress, Stored: r.Stored, Log: r.Log, By: r.By})
		if errors.Is(err, ErrConflict) && try < conflictTries {
			continue
		}
		if res == nil {
			return nil, err
		}
		return &LinkResult{Infra: name, Plan: res.Plan, SpecFile: changed.File, Stored: res.Stored}, err
	}
}
