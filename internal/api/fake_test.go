package api

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/ioc"
	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/netperf"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
)

// fakeBackend keeps records in memory and plans one action per apply, so
// the handlers are tested without root.
type fakeBackend struct {
	memoryEvents
	noOperations
	mu      sync.Mutex
	records map[string]*service.Infra
	reads   int
	sent    uint64
	// gate, when set, holds each netperf run until it is closed.
	gate    chan struct{}
	sampler *metrics.Sampler
	paused  map[string]plan.Paused
	// linked is every link and unlink asked for.
	linked []service.LinkRequest
}

var _ service.Backend = (*fakeBackend)(nil)

func newFake() *fakeBackend { return &fakeBackend{records: map[string]*service.Infra{}} }

func (f *fakeBackend) LoadFile(path string) (*spec.Document, error) { return spec.LoadFile(path) }
func (f *fakeBackend) Load(file string, src []byte) (*spec.Document, error) {
	return spec.Load(file, src)
}
func (f *fakeBackend) Close() error                       { return nil }
func (f *fakeBackend) ReadsKernel() bool                  { return true }
func (f *fakeBackend) Agents() ([]service.AgentUp, error) { return nil, nil }

func (f *fakeBackend) List(context.Context) ([]service.Infra, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []service.Infra
	for _, r := range f.records {
		in := *r
		in.Paused = f.paused[r.Name].Normal()
		out = append(out, in)
	}
	return out, nil
}

func (f *fakeBackend) Get(_ context.Context, name string) (*service.Infra, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.records[name]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("%q: %w", name, service.ErrNotFound)
}

func (f *fakeBackend) Spec(ctx context.Context, name string) (*spec.Document, error) {
	in, err := f.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return spec.Decode(in.SpecFile, in.Spec)
}

func (f *fakeBackend) Specs() []*spec.Spec {
	list, _ := f.List(context.Background())
	var out []*spec.Spec
	for _, in := range list {
		if doc, err := spec.Decode(in.SpecFile, in.Spec); err == nil {
			out = append(out, doc.Spec)
		}
	}
	return out
}

func onePlan(op plan.Op, name string) []service.PlanAction {
	r := plan.Resource{Kind: plan.KindNetns, NS: plan.NSName(name, "h1")}
	a := plan.Action{Op: op, New: &r}
	if op == plan.OpDelete {
		a = plan.Action{Op: op, Old: &r}
	}
	return service.Actions(plan.Plan{Actions: []plan.Action{a}})
}

func (f *fakeBackend) Apply(_ context.Context, src service.Source, o service.ApplyOptions) (*service.ApplyResult, error) {
	doc := src.Doc
	res := &service.ApplyResult{Infra: doc.Spec.Name, DryRun: o.DryRun, Plan: onePlan(plan.OpCreate, doc.Spec.Name)}
	if o.DryRun {
		return res, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records[doc.Spec.Name] = &service.Infra{Name: doc.Spec.Name, SpecFile: doc.File, Spec: doc.Source, Generation: 1, AppliedAt: time.Now()}
	res.Executed = len(res.Plan)
	f.note(o.By, events.Apply, doc.Spec.Name, res.Executed)
	return res, nil
}

// note keeps an event of a change, as the service's back ends do.
func (f *fakeBackend) note(by service.Actor, action, infra string, changes int) {
	f.memoryEvents.Record(service.Event{Time: time.Now().UTC(), Action: action, Infra: infra, Who: by.Who, Via: string(by.Via),
		Remote: by.Remote, OK: true, Changes: changes})
}

// Link keeps the request and answers for the infrastructure it names, or
// "demo" when it names none.
func (f *fakeBackend) Link(_ context.Context, r service.LinkRequest) (*service.LinkResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.linked = append(f.linked, r)
	if r.Infra == "" {
		r.Infra = "demo"
	}
	return &service.LinkResult{Infra: r.Infra, Executed: 2, SpecFile: "demo.yaml"}, nil
}

func (f *fakeBackend) Pause(ctx context.Context, r service.PauseRequest) (*service.PauseResult, error) {
	return f.pausing(ctx, r, true)
}

func (f *fakeBackend) Resume(ctx context.Context, r service.PauseRequest) (*service.PauseResult, error) {
	return f.pausing(ctx, r, false)
}

// pausing keeps what is paused by infrastructure; Status shows it.
func (f *fakeBackend) pausing(ctx context.Context, r service.PauseRequest, pause bool) (*service.PauseResult, error) {
	if _, err := f.Get(ctx, r.Infra); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paused == nil {
		f.paused = map[string]plan.Paused{}
	}
	sel, action := plan.PauseAll, events.Resume
	switch {
	case r.VM != "":
		sel = plan.PauseVM(r.VM)
	case r.PortGroup != "":
		sel = plan.PausePortGroup(r.PortGroup)
	case r.Network != "":
		sel = plan.PauseNetwork(r.Network)
	}
	before := f.paused[r.Infra]
	if pause {
		f.paused[r.Infra], action = before.With(sel), events.Pause
	} else if sel == plan.PauseAll {
		f.paused[r.Infra] = nil // a resume of no target resumes everything, as the service's
	} else {
		f.paused[r.Infra] = before.Without(sel)
	}
	f.note(r.By, action, r.Infra, 0)
	return &service.PauseResult{Infra: r.Infra, What: plan.Describe(sel), Changed: !before.Equal(f.paused[r.Infra]),
		Paused: append([]string{}, f.paused[r.Infra]...)}, nil
}

func (f *fakeBackend) Destroy(_ context.Context, name string, o service.DestroyOptions) (*service.DestroyResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.records[name]; !ok {
		return nil, fmt.Errorf("destroy %s: %w", name, service.ErrNotFound)
	}
	delete(f.records, name)
	f.note(o.By, events.Destroy, name, 1)
	return &service.DestroyResult{Infra: name, Removed: len(onePlan(plan.OpDelete, name))}, nil
}

// Status describes the stored spec as if all of it were up.
func (f *fakeBackend) Status(ctx context.Context, names []string) ([]*service.InfraStatus, error) {
	var out []*service.InfraStatus
	for _, name := range names {
		st, err := f.status(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (f *fakeBackend) status(ctx context.Context, name string) (*service.InfraStatus, error) {
	rec, err := f.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	doc, err := spec.Decode(rec.SpecFile, rec.Spec)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	paused := f.paused[name]
	f.mu.Unlock()
	st := &service.Status{Name: name, Generation: rec.Generation, SpecFile: rec.SpecFile, Paused: paused}
	for _, h := range doc.Spec.Hosts {
		hs := service.HostStatus{Name: h.Name, Native: h.Native}
		for _, n := range h.NICs {
			hs.NICs = append(hs.NICs, service.NICStatus{Name: n.Name, Speed: n.Speed, State: "up"})
		}
		st.Hosts = append(st.Hosts, hs)
	}
	for _, sw := range doc.Spec.Switches {
		ss := service.SwitchStatus{Name: sw.Name, Type: "standard", Hosts: sw.SwitchHosts()}
		for _, u := range sw.Uplinks {
			ss.Uplinks = append(ss.Uplinks, u.Name)
		}
		for _, pg := range sw.PortGroups {
			ss.PortGroups = append(ss.PortGroups, pg.Name)
		}
		st.Switches = append(st.Switches, ss)
	}
	for _, vm := range doc.Spec.VMs {
		vs := service.VMStatus{Name: vm.Name, Host: vm.Host}
		for i, n := range vm.NICs {
			state := "up"
			if paused.VNIC(vm.Name, &n) {
				state = "paused"
			}
			vs.NICs = append(vs.NICs, service.PortStatus{Name: fmt.Sprintf("eth%d", i), PortGroup: n.PortGroup, IP: n.IP, MAC: "02:00:00:00:00:01", State: state})
		}
		st.VMs = append(st.VMs, vs)
	}
	st.Balancers = reconcile.BalancerStatus(doc.Spec, nil, nil)
	return &service.InfraStatus{Infra: st}, nil
}

func (f *fakeBackend) IOCStats(ctx context.Context, name string, _ time.Duration) (*service.IOCStats, error) {
	if _, err := f.Get(ctx, name); err != nil {
		return nil, err
	}
	return &service.IOCStats{Infra: name}, nil
}

func (f *fakeBackend) Sample(interval, keep time.Duration) *metrics.Sampler {
	f.sampler = &metrics.Sampler{Infras: f.Specs, Open: f.Counting, Interval: interval, Keep: keep}
	return f.sampler
}

// Stats averages the sampler's samples, as a server's back end does.
func (f *fakeBackend) Stats(ctx context.Context, name string, o service.StatsOptions) (*service.Averages, error) {
	if _, err := f.Get(ctx, name); err != nil {
		return nil, err
	}
	snaps, err := service.Samples(f.sampler, name, o.Window)
	if err != nil {
		return nil, err
	}
	return metrics.Average(snaps), nil
}

// memoryEvents keeps events in memory.
type memoryEvents struct {
	mu   sync.Mutex
	list []service.Event
}

func (e *memoryEvents) Record(ev service.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
	return nil
}

func (e *memoryEvents) Events(_ context.Context, infra string, limit int) ([]service.Event, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return events.Filter(e.list, infra, limit), nil
}

// Counting reads counters that grow by one megabyte more at each read than
// at the one before, so the rates drawn from them keep changing; a vNIC
// drops a packet sending for each megabyte it sent, half that receiving.
func (f *fakeBackend) Counting() (metrics.Counting, func(), error) {
	f.mu.Lock()
	f.reads++
	f.sent += uint64(f.reads) << 20
	n := f.sent
	f.mu.Unlock()
	return fakeCounting(n), func() {}, nil
}

type fakeCounting uint64

func (c fakeCounting) LinkStates(string) (map[string]status.Link, error) {
	st := status.Link{Up: true, TxBytes: uint64(c), RxBytes: uint64(c) / 2, TxDropped: uint64(c) >> 20, RxDropped: uint64(c) >> 21}
	return map[string]status.Link{"eth0": st, "eth1": st, "vmnic0": st, "vmnic1": st, "vmk0": st}, nil
}

func (c fakeCounting) TCCounters(string, string) (map[uint32]plan.Counters, plan.Counters, error) {
	out := map[uint32]plan.Counters{}
	count := func(minor uint32) { out[minor] = plan.Counters{Bytes: uint64(c), Packets: uint64(c) / 1500} }
	for minor := uint32(0); minor < 0x40; minor++ {
		count(minor) // the system pools and the unclassified class
	}
	for i := range 0x20 {
		count(ioc.Minor(i)) // user pools
	}
	return out, plan.Counters{}, nil
}

const smallSpec = `name: t1
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {esx1: vmnic0}}]
    ioc: {enabled: true, pools: {vm: {shares: high, limit: 500Mbit}}}
    portgroups: [{name: pg-vm, pool: vm}]
vms:
  - name: vm1
    host: esx1
    nics: [{portgroup: pg-vm, ip: 10.0.0.1/24}]
  - name: vm2
    host: esx1
    nics: [{portgroup: pg-vm, ip: 10.0.0.2/24}]
`

// Netperf answers a made-up rate once the gate (if any) opens.
func (f *fakeBackend) Netperf(ctx context.Context, _, _, _, addr string, args []string) (*netperf.Report, error) {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &netperf.Report{Results: []*netperf.Result{{Test: args[3], Target: addr, Throughput: 1e9}}}, nil
}

// EditVM edits the kept spec and applies it as Apply does.
func (f *fakeBackend) EditVM(ctx context.Context, e service.VMEdit, o service.ApplyOptions) (*service.ApplyResult, error) {
	now, err := f.Spec(ctx, e.Infra)
	if err != nil {
		return nil, err
	}
	vm, err := e.Written()
	if err != nil {
		return nil, err
	}
	drop, put := []string{e.VM}, []spec.VM(nil)
	if vm != nil {
		drop, put = nil, []spec.VM{*vm}
	} else if _, ok := now.Spec.VM(e.VM); !ok {
		return nil, service.ErrNoVM
	}
	next, err := spec.EditVMs(now, drop, put)
	if err != nil {
		return nil, err
	}
	return f.Apply(ctx, service.Source{Doc: next}, o)
}
