package api

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
)

// Remote is the service of a vnet server, through its API: the third back
// end beside this machine's and etcd's, so that a face calls the same
// methods wherever the infrastructures are.
type Remote struct {
	C *Client
}

var _ service.Service = (*Remote)(nil)

// LoadFile reads and checks a spec file here, before it is sent.
func (r *Remote) LoadFile(path string) (*spec.Document, error) { return spec.LoadFile(path) }

// Load reads and checks a spec here.
func (r *Remote) Load(file string, src []byte) (*spec.Document, error) { return spec.Load(file, src) }

// Close releases nothing.
func (r *Remote) Close() error { return nil }

// List returns every infrastructure the server serves.
func (r *Remote) List(ctx context.Context) ([]service.Infra, error) {
	list, err := r.C.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]service.Infra, 0, len(list))
	for _, s := range list {
		out = append(out, infraOf(s, ""))
	}
	return out, nil
}

func infraOf(s InfraSummary, yaml string) service.Infra {
	return service.Infra{Name: s.Name, Generation: s.Generation, AppliedAt: s.AppliedAt, SpecFile: s.SpecFile, Paused: s.Paused, Spec: []byte(yaml)}
}

// Get returns one infrastructure with its spec.
func (r *Remote) Get(ctx context.Context, name string) (*service.Infra, error) {
	in, err := r.C.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	out := infraOf(in.InfraSummary, in.Spec)
	return &out, nil
}

// errWaitNeedsEtcd refuses a wait through a server, whose status is the
// way to follow the hosts there.
var errWaitNeedsEtcd = service.Invalid("--wait needs --etcd (through --server, follow the hosts with vnet status)")

// Apply sends the spec's YAML, naming the file it came from; the server
// plans or applies it. The plan goes to Log as a local apply's would.
func (r *Remote) Apply(ctx context.Context, src service.Source, o service.ApplyOptions) (*service.ApplyResult, error) {
	if o.Full {
		return nil, errors.New("--full: only an apply on this host reads it; the server's applies read what they change")
	}
	if o.Wait > 0 {
		return nil, errWaitNeedsEtcd
	}
	doc, err := r.load(src)
	if err != nil {
		return nil, err
	}
	file := ""
	if src.File != "" {
		file, _ = filepath.Abs(src.File)
	}
	res, err := r.C.ApplyWith(ctx, doc.Spec.Name, file, doc.Source, o)
	if err != nil {
		return nil, err
	}
	out := &service.ApplyResult{Infra: res.Infra, DryRun: res.DryRun, Plan: res.Plan, Hosts: res.Hosts, Executed: res.Executed, AgentStarted: res.AgentStarted, Warnings: res.Warnings,
		Attached: res.Attached}
	logPlan(o, out)
	return out, nil
}

// load is the spec of src, read and checked here before it is sent.
func (r *Remote) load(src service.Source) (*spec.Document, error) {
	if src.Doc != nil {
		return src.Doc, nil
	}
	return r.LoadFile(src.File)
}

// Destroy asks the server to destroy an infrastructure.
func (r *Remote) Destroy(ctx context.Context, name string, o service.DestroyOptions) (*service.DestroyResult, error) {
	if o.Wait > 0 {
		return nil, errWaitNeedsEtcd
	}
	res, err := r.C.Destroy(ctx, name)
	if errors.Is(err, service.ErrNotFound) {
		return nil, fmt.Errorf("destroy %s: %w", name, service.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return &service.DestroyResult{Infra: res.Infra, Removed: res.Removed}, nil
}

// Status reads the named infrastructures' status, or every one's.
func (r *Remote) Status(ctx context.Context, names []string) ([]*service.InfraStatus, error) {
	if len(names) == 0 {
		list, err := r.C.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, in := range list {
			names = append(names, in.Name)
		}
	}
	out := []*service.InfraStatus{}
	for _, name := range names {
		st, err := r.C.Status(ctx, name)
		if errors.Is(err, service.ErrNotFound) {
			return nil, fmt.Errorf("%q: %w", name, service.ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// IOCStats samples Network I/O Control's counters on the server.
func (r *Remote) IOCStats(ctx context.Context, name string, interval time.Duration) (*service.IOCStats, error) {
	return r.C.IOC(ctx, name, interval)
}

// Stats are the server's samples averaged over the window.
func (r *Remote) Stats(ctx context.Context, name string, o service.StatsOptions) (*service.Averages, error) {
	res, err := r.C.Stats(ctx, name, o.Window)
	if err != nil {
		return nil, err
	}
	return res.Averages, nil
}

// Events returns the server's events.
func (r *Remote) Events(ctx context.Context, infra string, limit int) ([]service.Event, error) {
	return r.C.Events(ctx, infra, limit)
}
