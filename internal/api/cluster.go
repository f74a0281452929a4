package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/netperf"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// InfraStatus is what /status answers: what exists, and over etcd how far
// each host's agent has got.
type InfraStatus struct {
	*status.Infra
	Cluster *ClusterStatus `json:"cluster,omitempty"`
}

// ClusterStatus is each host's standing from its agent's report: current,
// lagging (an older generation), failed, gone (no live report: the agent
// is dead or was never started) or unexpected.
type ClusterStatus struct {
	Converged bool                 `json:"converged"`
	Hosts     []etcdstore.HostView `json:"hosts"`
	Lagging   []string             `json:"lagging,omitempty"`
	Dead      []string             `json:"dead_agents,omitempty"`
	// Damaged says why the record in etcd does not read as its spec:
	// the hosts that still report the infrastructure are listed.
	Damaged string `json:"damaged,omitempty"`
}

// ErrNotHere is wrapped by what a backend cannot do from where it runs:
// over etcd the server reads no host's kernel.
var ErrNotHere = errors.New("not served by this backend")

// ClusterStore is what the etcd backend needs of the shared store.
type ClusterStore interface {
	List() ([]*store.Record, error)
	GetRev(name string) (*store.Record, int64, error)
	PutIf(r *store.Record, expectRev int64) (int64, error)
	DeleteIf(name string, expectRev int64) error
	Reports(infra string) ([]etcdstore.Report, error)
	AppendEvent(ev events.Event) error
	Events() ([]events.Event, error)
}

// Cluster is the backend of a cluster whose state is in etcd: an apply
// stores the spec as the next generation and each host's agent realizes
// its part; status says, per host, what the agents reported. The server
// reads no kernel, so Network I/O Control samples, counters and netperf
// runs are each host's (its agent's /metrics).
type Cluster struct {
	Store ClusterStore

	change sync.Mutex // one apply or destroy at a time from this server
}

// List returns every infrastructure stored in etcd, by name.
func (c *Cluster) List() ([]*store.Record, error) {
	recs, err := c.Store.List()
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	return recs, err
}

// Get returns one infrastructure's record.
func (c *Cluster) Get(name string) (*store.Record, error) {
	rec, _, err := c.Store.GetRev(name)
	return rec, err
}

// Plan is what the hosts' agents would change, host by host: the kernel
// objects of the new spec's part on each host against the stored one's,
// the new spec's networks with the VNIs an apply would store.
func (c *Cluster) Plan(doc *spec.Document) (plan.Plan, error) {
	var old *spec.Spec
	rec, _, err := c.Store.GetRev(doc.Spec.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		rec = nil
	case err != nil:
		return plan.Plan{}, err
	default:
		od, err := storedDoc(rec)
		switch {
		case errors.Is(err, store.ErrDamagedRecord): // what it placed is not known: the new spec replaces it
		case err != nil:
			return plan.Plan{}, err
		default:
			old = od.Spec
		}
	}
	if doc, err = store.PinVNIs(doc, rec, storedSpecs); err != nil {
		return plan.Plan{}, err
	}
	return hostsPlan(old, doc.Spec), nil
}

func hostsPlan(old, next *spec.Spec) plan.Plan {
	hosts := map[string]bool{}
	var names []string
	for _, s := range []*spec.Spec{next, old} {
		if s == nil {
			continue
		}
		for _, h := range s.Hosts {
			if !hosts[h.Name] {
				hosts[h.Name] = true
				names = append(names, h.Name)
			}
		}
	}
	var out plan.Plan
	for _, h := range names {
		var desired, current []plan.Resource
		if plan.PlacesOn(next, h) {
			desired = plan.Model(next, plan.Options{Host: h})
		}
		if old != nil && plan.PlacesOn(old, h) {
			current = plan.Model(old, plan.Options{Host: h})
		}
		out.Actions = append(out.Actions, plan.Diff(desired, current).Actions...)
	}
	return out
}

// Apply stores the spec as the next generation, unless it is unchanged or
// another apply stored one since it was read. Executed counts nothing: the
// agents carry the plan out, and status says when they have.
func (c *Cluster) Apply(doc *spec.Document) (reconcile.Result, error) {
	c.change.Lock()
	defer c.change.Unlock()
	name := doc.Spec.Name
	old, rev, err := c.Store.GetRev(name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return reconcile.Result{}, err
	}
	// Networks' VNIs are stored with the spec, as vnet apply --etcd
	// stores them: one left out keeps the VNI it got.
	if doc, err = store.PinVNIs(doc, old, storedSpecs); err != nil {
		return reconcile.Result{}, err
	}
	gen := 1
	switch {
	case old == nil:
	case bytes.Equal(old.Spec, doc.Source):
		return reconcile.Result{}, nil
	default:
		gen = old.Generation + 1
	}
	p, err := c.Plan(doc)
	if err != nil {
		return reconcile.Result{}, err
	}
	// The agents make the spec of its encoding, not of its YAML.
	rec := &store.Record{Name: name, SpecFile: doc.File, Spec: doc.Source, SpecEncoded: speccache.EncodeValidated(doc),
		Generation: gen, AppliedAt: time.Now().UTC()}
	if _, err := c.Store.PutIf(rec, rev); err != nil {
		return reconcile.Result{}, fmt.Errorf("apply %s: %w", name, err)
	}
	storedSpecs.Add(doc)
	return reconcile.Result{Plan: p}, nil
}

// Destroy removes the infrastructure from etcd; each host's agent then
// removes its part.
func (c *Cluster) Destroy(name string) (plan.Plan, error) {
	c.change.Lock()
	defer c.change.Unlock()
	rec, rev, err := c.Store.GetRev(name)
	if err != nil {
		return plan.Plan{}, fmt.Errorf("destroy %s: %w", name, err)
	}
	old := &spec.Spec{Name: name} // a damaged record's: what it placed is not known
	if doc, err := storedDoc(rec); err == nil {
		old = doc.Spec
	} else if !errors.Is(err, store.ErrDamagedRecord) {
		return plan.Plan{}, err
	}
	if err := c.Store.DeleteIf(name, rev); err != nil {
		return plan.Plan{}, fmt.Errorf("destroy %s: %w", name, err)
	}
	return hostsPlan(old, &spec.Spec{Name: name}), nil
}

// Status is the spec's topology with each host's report: a host's state
// is its agent's standing, and the ports on it are "unknown" to the
// server, which reads no kernel but its own.
func (c *Cluster) Status(name string) (*InfraStatus, error) {
	rec, err := c.Get(name)
	if err != nil {
		return nil, err
	}
	doc, err := storedDoc(rec)
	reports, rerr := c.Store.Reports(name)
	if rerr != nil {
		return nil, rerr
	}
	if errors.Is(err, store.ErrDamagedRecord) { // that infrastructure's alone
		st := &status.Infra{Name: name, Hosts: []status.Host{}, Switches: []status.Switch{}, VMs: []status.VM{}, HostPorts: []status.Port{}}
		return &InfraStatus{Infra: st, Cluster: &ClusterStatus{Hosts: etcdstore.Assess(0, nil, reports), Damaged: err.Error()}}, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, len(doc.Spec.Hosts))
	for i, h := range doc.Spec.Hosts {
		names[i] = h.Name
	}
	views := etcdstore.Assess(rec.Generation, names, reports)
	cs := &ClusterStatus{Converged: etcdstore.Converged(views), Hosts: views}
	state := map[string]string{}
	for _, v := range views {
		state[v.Host] = string(v.State)
		switch v.State {
		case etcdstore.HostLagging:
			cs.Lagging = append(cs.Lagging, v.Host)
		case etcdstore.HostGone:
			cs.Dead = append(cs.Dead, v.Host)
		}
	}
	st := specStatus(rec, doc.Spec, func(host string) string {
		if s := state[host]; s != string(etcdstore.HostCurrent) {
			return "host " + s
		}
		return "unknown"
	})
	st.Security = hostsSecurity(views)
	return &InfraStatus{Infra: st, Cluster: cs}, nil
}

// specStatus is the topology a spec describes, each port in the state
// stateOf gives its host.
func specStatus(rec *store.Record, s *spec.Spec, stateOf func(host string) string) *status.Infra {
	st := &status.Infra{Name: rec.Name, Generation: rec.Generation, SpecFile: rec.SpecFile,
		Hosts: []status.Host{}, Switches: []status.Switch{}, VMs: []status.VM{}, HostPorts: []status.Port{}}
	for _, h := range s.Hosts {
		hs := status.Host{Name: h.Name, Native: h.Native, NICs: []status.NIC{}}
		for _, n := range h.NICs {
			hs.NICs = append(hs.NICs, status.NIC{Name: n.Name, Speed: n.Speed, IP: n.IP, State: stateOf(h.Name)})
		}
		st.Hosts = append(st.Hosts, hs)
	}
	for i := range s.Switches {
		st.Switches = append(st.Switches, reconcile.SwitchStatusOf(&s.Switches[i]))
	}
	for _, vm := range s.VMs {
		vs := status.VM{Name: vm.Name, Host: vm.Host, NICs: []status.Port{}}
		for i, n := range vm.NICs {
			vs.NICs = append(vs.NICs, status.Port{Name: fmt.Sprintf("eth%d", i), PortGroup: n.PortGroup, IP: n.IP, State: stateOf(vm.Host)})
		}
		st.VMs = append(st.VMs, vs)
	}
	for _, hp := range s.HostPorts {
		st.HostPorts = append(st.HostPorts, status.Port{Host: hp.Host, PortGroup: hp.PortGroup, IP: hp.IP, State: stateOf(hp.Host)})
	}
	return st
}

func (c *Cluster) notHere(what string) error {
	return &httpError{status: http.StatusNotImplemented, body: ErrorBody{Error: what +
		" is each host's over etcd: the server reads no host's kernel (scrape each host agent's --metrics-addr)"}}
}

// IOCStats is each host's over etcd.
func (c *Cluster) IOCStats(string, time.Duration) (*reconcile.IOCStats, error) {
	return nil, c.notHere("Network I/O Control")
}

// Counting is each host's over etcd.
func (c *Cluster) Counting() (metrics.Counting, func(), error) {
	return nil, nil, fmt.Errorf("counters: %w", ErrNotHere)
}

// Netperf is run on the hosts over etcd.
func (c *Cluster) Netperf(context.Context, string, string, string, string, []string) (*netperf.Report, error) {
	return nil, c.notHere("a netperf run")
}

// Record keeps an event in etcd.
func (c *Cluster) Record(ev events.Event) error { return c.Store.AppendEvent(ev) }

// Events reads the events kept in etcd.
func (c *Cluster) Events(infra string, limit int) ([]events.Event, error) {
	all, err := c.Store.Events()
	if err != nil {
		return nil, err
	}
	return events.Filter(all, infra, limit), nil
}

// hostsSecurity gathers the port security counters the hosts' agents
// reported into one list by port, as status on one machine has them: a VM,
// and so its ports, is on one host.
func hostsSecurity(views []etcdstore.HostView) []status.PortSecurity {
	var out []status.PortSecurity
	for _, v := range views {
		if v.Report != nil {
			out = append(out, v.Report.Security...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Port < out[j].Port })
	return out
}
