package api

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/ioc"
	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/netperf"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store"
)

// fakeBackend keeps records in memory and plans one action per apply, so
// the handlers are tested without root.
type fakeBackend struct {
	memoryEvents
	mu      sync.Mutex
	records map[string]*store.Record
	reads   int
	sent    uint64
	// gate, when set, holds each netperf run until it is closed.
	gate chan struct{}
}

func newFake() *fakeBackend { return &fakeBackend{records: map[string]*store.Record{}} }

func (f *fakeBackend) List() ([]*store.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*store.Record
	for _, r := range f.records {
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeBackend) Get(name string) (*store.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.records[name]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("%q: %w", name, store.ErrNotFound)
}

func (f *fakeBackend) Plan(doc *spec.Document) (plan.Plan, error) {
	r := plan.Resource{Kind: plan.KindNetns, NS: plan.NSName(doc.Spec.Name, "h1")}
	return plan.Plan{Actions: []plan.Action{{Op: plan.OpCreate, New: &r}}}, nil
}

func (f *fakeBackend) Apply(doc *spec.Document) (reconcile.Result, error) {
	p, _ := f.Plan(doc)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records[doc.Spec.Name] = &store.Record{Name: doc.Spec.Name, SpecFile: doc.File, Spec: doc.Source, Generation: 1, AppliedAt: time.Now()}
	return reconcile.Result{Plan: p, Executed: len(p.Actions)}, nil
}

func (f *fakeBackend) Destroy(name string) (plan.Plan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.records[name]; !ok {
		return plan.Plan{}, fmt.Errorf("destroy %s: %w", name, store.ErrNotFound)
	}
	delete(f.records, name)
	r := plan.Resource{Kind: plan.KindNetns, NS: plan.NSName(name, "h1")}
	return plan.Plan{Actions: []plan.Action{{Op: plan.OpDelete, Old: &r}}}, nil
}

// Status describes the stored spec as if all of it were up.
func (f *fakeBackend) Status(name string) (*InfraStatus, error) {
	rec, err := f.Get(name)
	if err != nil {
		return nil, err
	}
	doc, err := spec.Decode(rec.SpecFile, rec.Spec)
	if err != nil {
		return nil, err
	}
	st := &status.Infra{Name: name, Generation: rec.Generation, SpecFile: rec.SpecFile}
	for _, h := range doc.Spec.Hosts {
		hs := status.Host{Name: h.Name, Native: h.Native}
		for _, n := range h.NICs {
			hs.NICs = append(hs.NICs, status.NIC{Name: n.Name, Speed: n.Speed, State: "up"})
		}
		st.Hosts = append(st.Hosts, hs)
	}
	for _, sw := range doc.Spec.Switches {
		ss := status.Switch{Name: sw.Name, Type: "standard", Hosts: sw.SwitchHosts()}
		for _, u := range sw.Uplinks {
			ss.Uplinks = append(ss.Uplinks, u.Name)
		}
		for _, pg := range sw.PortGroups {
			ss.PortGroups = append(ss.PortGroups, pg.Name)
		}
		st.Switches = append(st.Switches, ss)
	}
	for _, vm := range doc.Spec.VMs {
		vs := status.VM{Name: vm.Name, Host: vm.Host}
		for i, n := range vm.NICs {
			vs.NICs = append(vs.NICs, status.Port{Name: fmt.Sprintf("eth%d", i), PortGroup: n.PortGroup, IP: n.IP, MAC: "02:00:00:00:00:01", State: "up"})
		}
		st.VMs = append(st.VMs, vs)
	}
	return &InfraStatus{Infra: st}, nil
}

func (f *fakeBackend) IOCStats(name string, _ time.Duration) (*reconcile.IOCStats, error) {
	return &reconcile.IOCStats{Infra: name}, nil
}

// Counting reads counters that grow by one megabyte more at each read than
// at the one before, so the rates drawn from them keep changing.
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
	st := status.Link{Up: true, TxBytes: uint64(c), RxBytes: uint64(c) / 2}
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
