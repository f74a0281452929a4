package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// conflictTries bounds how often a change of attachments is made again
// because another writer stored a generation between its read and its
// write.
const conflictTries = 50

// Attach stores the spec with the container's vNIC as the next generation
// and returns once the host's agent reports it realized, within r.Wait.
func (c *Cluster) Attach(ctx context.Context, r AttachRequest) (*AttachResult, error) {
	var res *AttachResult
	gen, rev, err := c.changeSpec(r.Infra, func(doc *spec.Document) (*spec.Document, error) {
		next, out, err := planAttach(doc, r)
		res = out
		return next, err
	})
	if err != nil {
		return nil, err
	}
	res.Generation = gen
	wait := r.Wait
	if wait <= 0 {
		wait = time.Minute
	}
	if err := c.waitHost(ctx, r.Infra, res.Host, gen, rev, wait); err != nil {
		// A spec whose attachment its host cannot realize (the namespace
		// is not there) would fail the host's every pass: take it out.
		if !res.Existed {
			_, _ = c.Detach(ctx, DetachRequest{Infra: r.Infra, Container: r.Container, Ifname: r.Ifname})
		}
		return nil, err
	}
	res.Up = true
	return res, nil
}

// Detach stores the spec without the container's vNIC; the host's agent
// takes it out. It does not wait: the runtime goes on to delete the
// namespace, which takes the vNIC's end with it, and a DEL must not fail
// for a host whose agent is down.
func (c *Cluster) Detach(_ context.Context, r DetachRequest) (*DetachResult, error) {
	var res *DetachResult
	_, _, err := c.changeSpec(r.Infra, func(doc *spec.Document) (*spec.Document, error) {
		next, out, err := planDetach(doc, r)
		res = out
		return next, err
	})
	return res, err
}

// CollectAttachments stores the spec without the vNICs the CNI network no
// longer uses.
func (c *Cluster) CollectAttachments(_ context.Context, r CollectRequest) (*CollectResult, error) {
	var res *CollectResult
	_, _, err := c.changeSpec(r.Infra, func(doc *spec.Document) (*spec.Document, error) {
		next, out, err := planCollect(doc, r)
		res = out
		return next, err
	})
	return res, err
}

// Attachment is a container's vNIC as etcd holds it, up when its host's
// agent reports the generation current.
func (c *Cluster) Attachment(_ context.Context, r DetachRequest) (*AttachResult, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	rec, _, err := st.GetRev(r.Infra)
	if err != nil {
		return nil, err
	}
	doc, err := c.docOf(rec)
	if err != nil {
		return nil, err
	}
	vm, i := findAttachment(doc.Spec, r.Container, r.Ifname)
	if vm == nil || i < 0 || r.CNI != "" && vm.NICs[i].Attach.CNI != r.CNI {
		return nil, fmt.Errorf("container %s has no vNIC %s in %s: %w", r.Container, r.Ifname, r.Infra, ErrNotFound)
	}
	res := resultOf(doc.Spec, vm, i)
	res.Generation = rec.Generation
	reports, err := st.Reports(r.Infra)
	if err != nil {
		return nil, err
	}
	for _, v := range etcdstore.Assess(rec.Generation, []string{vm.Host}, reports) {
		if v.Host == vm.Host {
			res.Up = v.State == HostCurrent
			if !res.Up {
				res.Problem = fmt.Sprintf("host %s's agent is %s, not current at generation %d", vm.Host, v.State, rec.Generation)
			}
		}
	}
	return res, nil
}

// changeSpec makes a change of the stored spec that change works out
// from the current one (nil: none), stored only if no other writer stored
// a generation meanwhile, else worked out again. It returns the
// generation that holds the change and its revision.
func (c *Cluster) changeSpec(name string, change func(*spec.Document) (*spec.Document, error)) (int, int64, error) {
	c.change.Lock()
	defer c.change.Unlock()
	for try := 0; ; try++ {
		last := c.readLast(name)
		if last.err != nil {
			return 0, 0, last.err
		}
		doc, err := c.docOf(last.rec)
		if err != nil {
			return 0, 0, err
		}
		next, err := change(doc)
		if err != nil || next == nil {
			return last.rec.Generation, last.rev, err
		}
		rec := &store.Record{Name: name, SpecFile: last.rec.SpecFile, Spec: next.Source, SpecEncoded: speccache.EncodeValidated(next),
			Generation: last.rec.Generation + 1, AppliedAt: time.Now().UTC()}
		rev, err := last.st.PutIf(rec, last.rev)
		if errors.Is(err, ErrConflict) && try < conflictTries {
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("store %s: %w", name, err)
		}
		c.Cache.AddEncoded(next, rec.SpecEncoded)
		return rec.Generation, rev, nil
	}
}

// waitHost waits, at most wait, for one host to report gen (stored at
// rev) or a later generation current.
func (c *Cluster) waitHost(ctx context.Context, infra, host string, gen int, rev int64, wait time.Duration) error {
	st, err := c.store()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err = st.WaitCurrent(ctx, infra, gen, rev, []string{host}, nil)
	switch {
	case err == nil, errors.Is(err, etcdstore.ErrSuperseded):
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return tagged{ErrTimedOut, fmt.Sprintf("host %s's agent did not realize generation %d of %s within %s: is vnet agent host running there? (%v)", host, gen, infra, wait, err)}
	}
	return fmt.Errorf("wait for host %s: %w", host, err)
}
