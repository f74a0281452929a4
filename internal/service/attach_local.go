package service

import (
	"context"
	"fmt"

	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// Attach gives a container a vNIC on this machine: under the
// infrastructure's lock it reads the spec as applied, writes the
// container's VM into it and applies that change alone, which reads and
// changes only the new vNIC's part of the kernel.
func (l *Local) Attach(_ context.Context, r AttachRequest) (*AttachResult, error) {
	var out *AttachResult
	lap := reconcile.Stopwatch(l.tracef)
	err := l.changingWithin(r.Infra, "attach to ", r.Log, r.Wait, func(eng *reconcile.Engine, st *store.Bolt) error {
		lap("attach: open and lock")
		doc, err := l.docIn(st, r.Infra)
		if err != nil {
			return err
		}
		lap("attach: read the applied spec")
		x := l.attached.take(doc)
		next, res, err := x.attach(r)
		l.attached.keep(x)
		if err != nil {
			return err
		}
		lap("attach: write the VM into the spec")
		out = res
		if next == nil {
			return nil
		}
		eng.Applied = doc // read under the lock the apply holds
		err = l.applyChange(eng, next, &res.Executed)
		lap("attach: apply")
		return err
	})
	return out, err
}

// Detach takes a container's vNIC out on this machine, under the lock.
func (l *Local) Detach(_ context.Context, r DetachRequest) (*DetachResult, error) {
	if err := l.storeMade("detach from", r.Infra); err != nil {
		return nil, err
	}
	var out *DetachResult
	lap := reconcile.Stopwatch(l.tracef)
	err := l.changingWithin(r.Infra, "detach from ", r.Log, r.Wait, func(eng *reconcile.Engine, st *store.Bolt) error {
		lap("detach: open and lock")
		doc, err := l.docIn(st, r.Infra)
		if err != nil {
			return err
		}
		lap("detach: read the applied spec")
		x := l.attached.take(doc)
		next, res, err := x.detach(r)
		l.attached.keep(x)
		if err != nil {
			return err
		}
		lap("detach: take the vNIC out of the spec")
		out = res
		if next = unfinished(st, doc, next); next == nil {
			return nil
		}
		eng.Applied = doc // read under the lock the apply holds
		err = l.applyChange(eng, next, &res.Executed)
		lap("detach: apply")
		return err
	})
	return out, err
}

// CollectAttachments takes out, on this machine, the vNICs a CNI network
// attached that it no longer uses.
func (l *Local) CollectAttachments(_ context.Context, r CollectRequest) (*CollectResult, error) {
	if err := l.storeMade("collect attachments of", r.Infra); err != nil {
		return nil, err
	}
	var out *CollectResult
	err := l.changingWithin(r.Infra, "collect attachments of ", r.Log, r.Wait, func(eng *reconcile.Engine, st *store.Bolt) error {
		doc, err := l.docIn(st, r.Infra)
		if err != nil {
			return err
		}
		x := l.attached.take(doc)
		next, res, err := x.collect(r)
		l.attached.keep(x)
		if err != nil {
			return err
		}
		out = res
		if next = unfinished(st, doc, next); next == nil {
			return nil
		}
		var executed int
		return l.applyChange(eng, next, &executed)
	})
	return out, err
}

// Attachment is a container's vNIC as the applied spec has it, and whether
// the kernel holds it so: it reads only that VM's part of the kernel.
func (l *Local) Attachment(_ context.Context, r DetachRequest) (*AttachResult, error) {
	if err := l.storeMade("attachment in", r.Infra); err != nil {
		return nil, err
	}
	doc, err := l.doc(r.Infra)
	if err != nil {
		return nil, err
	}
	vm, i := findAttachment(doc.Spec, r.Container, r.Ifname)
	if vm == nil || i < 0 || r.CNI != "" && vm.NICs[i].Attach.CNI != r.CNI {
		return nil, fmt.Errorf("container %s has no vNIC %s in %s: %w", r.Container, r.Ifname, r.Infra, ErrNotFound)
	}
	res := resultOf(doc.Spec, vm, i)
	eng, _, done, err := l.engine(nil)
	if err != nil {
		return nil, err
	}
	defer done()
	drift, err := eng.VMDrift(doc, vm.Name)
	if err != nil {
		return nil, err
	}
	res.Up = drift.Empty()
	if !res.Up {
		res.Problem = "the kernel does not hold it as applied; an apply would:\n" + drift.String()
	}
	return res, nil
}

// unfinished is the spec a detach applies: next, the spec without the
// vNIC; or when there is no such vNIC (nil) but an apply was killed
// before it recorded (an ADD the runtime then DELs), the spec as applied,
// whose apply reads everything and takes out what the killed one left.
func unfinished(st store.Store, doc, next *spec.Document) *spec.Document {
	if next != nil {
		return next
	}
	if p, ok := st.(store.Pending); ok && p.IsPending(doc.Spec.Name) {
		return doc
	}
	return nil
}

// docIn reads an infrastructure's applied spec from an open store.
func (l *Local) docIn(st store.Store, name string) (*spec.Document, error) {
	rec, err := recordHead(st, name)
	if err != nil {
		return nil, err
	}
	return l.docOf(rec)
}

// applyChange applies a spec that changes the attachments, and keeps the
// teaming agent (if any) in step with the ports. The spec applied is kept
// as the record's document (keepApplied), so that the next change reads
// it without decoding the record again.
func (l *Local) applyChange(eng *reconcile.Engine, next *spec.Document, executed *int) error {
	res, err := eng.Apply(next)
	*executed = res.Executed
	if err != nil {
		return err
	}
	l.keepApplied(next)
	_, err = l.syncAgent(next.Spec)
	return err
}

// keepApplied keeps doc, which an apply just recorded, as the document of
// the record it wrote: the record holds doc's file and bytes
// (reconcile.Engine.record), by which docMemo finds it again. Decoding a
// spec of 1,000 VMs from its record costs more than a millisecond, for
// every container's ADD and DEL.
func (l *Local) keepApplied(doc *spec.Document) {
	l.keepDoc(&store.Record{Name: doc.Spec.Name, SpecFile: doc.File, Spec: doc.Source}, doc)
}

// storeMade is ErrNotFound when the state directory holds no store: a
// container cannot be attached there, and a DEL or GC that a runtime runs
// late (podman's cleanup process, after the state directory is removed)
// must not make an empty store where there was none.
func (l *Local) storeMade(what, infra string) error {
	if store.Exists(l.StateDir) {
		return nil
	}
	return fmt.Errorf("%s %s: no store in %s: %w", what, infra, l.StateDir, ErrNotFound)
}
