package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/netperf"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// ClusterStore is what the etcd back end needs of the shared store
// (etcdstore.Store).
type ClusterStore interface {
	List() ([]*store.Record, error)
	GetRev(name string) (*store.Record, int64, error)
	PutIf(r *store.Record, expectRev int64) (int64, error)
	DeleteIfRev(name string, expectRev int64) (int64, error)
	Reports(infra string) ([]etcdstore.Report, error)
	Reported() ([]string, error)
	WaitCurrent(ctx context.Context, infra string, gen int, stored int64, hosts []string, on func(etcdstore.HostEvent)) error
	WaitWithdrawn(ctx context.Context, infra string, removed int64, on func(etcdstore.HostEvent)) error
	AppendEvent(ev events.Event) error
	Events() ([]events.Event, error)
	Close() error
	// The history, whose entries go in their records' transactions.
	store.HistoryStore
	PutIfRecorded(r *store.Record, expectRev int64, e history.Entry) (int64, history.Entry, error)
	DeleteIfRevRecorded(name string, expectRev int64, e history.Entry) (int64, history.Entry, error)
}

// Cluster is the back end of a cluster whose state is in etcd: an apply
// stores the spec as the infrastructure's next generation and each host's
// agent realizes its part; status says, per host, what the agents
// reported. It reads no kernel, so Network I/O Control samples, counters
// and netperf runs are each host's (its agent's /metrics).
type Cluster struct {
	// Cache keeps the specs loaded, stored or read back; nil keeps them
	// in memory only.
	Cache *speccache.Cache
	// Trace receives where an apply's time goes; nil: nowhere.
	Trace io.Writer

	conn   lazyStore
	once   sync.Once
	change sync.Mutex // one change at a time from this process

	decoded specMemo
	sampling
}

// OpenCluster is the back end of the etcd at endpoints, reached over TLS
// with files when they name any. It connects on first use, so that a
// command can load its spec meanwhile.
func OpenCluster(endpoints []string, files TLSFiles, specs *speccache.Cache) *Cluster {
	c := &Cluster{Cache: specs}
	c.conn.open = func() (ClusterStore, error) {
		tc, err := files.Config()
		if err != nil {
			return nil, tagged{ErrInvalid, err.Error()}
		}
		st, err := etcdstore.Open(etcdstore.Options{Endpoints: endpoints, TLS: tc})
		if err != nil {
			return nil, err // not a nil *Store in the interface
		}
		return st, nil
	}
	return c
}

// ClusterOf is the back end of a store opened already.
func ClusterOf(st ClusterStore, specs *speccache.Cache) *Cluster {
	c := &Cluster{Cache: specs}
	c.conn.open = func() (ClusterStore, error) { return st, nil }
	return c
}

// Connect connects now, to fail early when etcd cannot be reached.
func (c *Cluster) Connect() error {
	_, err := c.store()
	return err
}

func (c *Cluster) init() {
	c.once.Do(func() {
		if c.Cache == nil {
			c.Cache = speccache.New("")
		}
	})
}

func (c *Cluster) store() (ClusterStore, error) { return c.conn.get() }

// Close closes the connection to etcd, once it is made.
func (c *Cluster) Close() error { return c.conn.close() }

// LoadFile reads a spec file through the cache of specs.
func (c *Cluster) LoadFile(path string) (*spec.Document, error) {
	c.init()
	return c.Cache.LoadFile(path)
}

// Load reads a spec's bytes through the cache of specs.
func (c *Cluster) Load(file string, src []byte) (*spec.Document, error) {
	c.init()
	return c.Cache.Load(file, src)
}

func (c *Cluster) docOf(rec *store.Record) (*spec.Document, error) {
	c.init()
	return rec.DocVia(c.Cache)
}

// List returns every infrastructure stored in etcd, by name.
func (c *Cluster) List(context.Context) ([]Infra, error) {
	_, recs, err := c.records()
	if err != nil {
		return nil, err
	}
	return infras(recs), nil
}

// records are every record in etcd, by name.
func (c *Cluster) records() (ClusterStore, []*store.Record, error) {
	st, err := c.store()
	if err != nil {
		return nil, nil, err
	}
	recs, err := st.List()
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	return st, recs, nil
}

// Get returns one infrastructure.
func (c *Cluster) Get(_ context.Context, name string) (*Infra, error) {
	rec, err := c.record(name)
	if err != nil {
		return nil, err
	}
	in := infraOf(rec)
	return &in, nil
}

// Spec is an infrastructure's spec as stored in etcd.
func (c *Cluster) Spec(_ context.Context, name string) (*spec.Document, error) {
	rec, err := c.record(name)
	if err != nil {
		return nil, err
	}
	return c.docOf(rec)
}

func (c *Cluster) record(name string) (*store.Record, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	rec, _, err := st.GetRev(name)
	return rec, err
}

// lastGeneration is an infrastructure's record in etcd and its revision,
// read while the spec loads.
type lastGeneration struct {
	st   ClusterStore
	name string
	rec  *store.Record
	rev  int64
	err  error
}

// readLast reads the record of name ("": only connects).
func (c *Cluster) readLast(name string) lastGeneration {
	st, err := c.store()
	if err != nil {
		return lastGeneration{err: err}
	}
	g := lastGeneration{st: st, name: name}
	if name != "" {
		g.rec, g.rev, g.err = st.GetRev(name)
	}
	return g
}

// Apply stores the spec as the infrastructure's next generation, unless
// it is unchanged or another apply stored one since this one read it. It
// changes nothing on this machine: each host's agent realizes its part.
// With Wait it then waits for every host to report the generation current.
// The VMs runtimes attached stay as they are (applyKeeping).
func (c *Cluster) Apply(ctx context.Context, src Source, o ApplyOptions) (*ApplyResult, error) {
	return applyKeeping(ctx, src, o, c.apply)
}

func (c *Cluster) apply(ctx context.Context, src Source, o ApplyOptions) (*ApplyResult, error) {
	if o.Full {
		return nil, tagged{ErrInvalid, "--full: only an apply on this host reads it; each host's agent reads everything every --interval"}
	}
	// One change at a time from this process: a second apply of a
	// server's reads the generation the first stored.
	c.change.Lock()
	defer c.change.Unlock()
	start := time.Now()
	lap := reconcile.Stopwatch(c.tracef)
	doc, last, err := c.loadBeside(src, lap)
	if err != nil {
		return nil, err
	}
	name := doc.Spec.Name
	if last.name != name { // the file's name was not where fileSpecName looks
		last.rec, last.rev, last.err = last.st.GetRev(name)
		lap("read the last generation from etcd")
	}
	if last.err != nil && !errors.Is(last.err, store.ErrNotFound) {
		return nil, last.err
	}
	ch := changeOf(ctx, history.Apply)
	if err := ch.onTopOf(last.rec); err != nil {
		return nil, err
	}
	// Reworked against the generation it is stored on top of: a change
	// stored since (an attachment) makes the store refuse it.
	if doc, err = reworked(ctx, doc, func() (*spec.Document, error) { return docOr(c, last.rec) }); err != nil {
		return nil, err
	}
	// Networks' VNIs are stored with the spec, so that one left out keeps
	// the VNI it got, whatever networks come and go around it.
	if doc, err = store.PinVNIs(doc, last.rec, c.Cache); err != nil {
		return nil, err
	}
	lap("pin VNIs")
	res := &ApplyResult{Infra: name, DryRun: o.DryRun, Plan: []PlanAction{}, Warnings: Warnings(doc),
		Stored: &Stored{Infra: name, Generation: 1, Hosts: hostNames(doc.Spec)}}
	switch {
	case last.rec == nil:
	case bytes.Equal(last.rec.Spec, doc.Source):
		res.Stored.Generation, res.Stored.Unchanged = last.rec.Generation, true
		if o.Stored != nil {
			o.Stored(*res.Stored)
		}
		if o.Wait > 0 && !o.DryRun {
			return res, c.waitCurrent(ctx, last.st, doc.Spec, last.rec.Generation, last.rev, time.Now(), res.Stored, o)
		}
		return res, nil
	default:
		res.Stored.Generation = last.rec.Generation + 1
	}
	if o.Detail {
		res.Hosts = c.hostPlans(last.st, last.rec, doc.Spec)
		res.Plan = Flatten(res.Hosts)
	}
	if o.DryRun {
		return res, nil
	}
	// The agents make the spec of its encoding, not of its YAML.
	rec := &store.Record{Name: name, SpecFile: doc.File, Spec: doc.Source, SpecEncoded: speccache.EncodeValidated(doc),
		Generation: res.Stored.Generation, AppliedAt: time.Now().UTC(), Paused: keptPaused(last.rec, doc.Spec)}
	lap("encode")
	entry := entryOf(o.By, ch, name, rec.Generation)
	entry.SpecFile, entry.Spec, entry.Summary = rec.SpecFile, history.Text(rec.Spec), summary(specOr(c, last.rec), doc.Spec)
	storedRev, _, err := last.st.PutIfRecorded(rec, last.rev, entry)
	note(c, o.By.event(ch.event(), name, start, 0, err), o.Log)
	if err != nil {
		return nil, fmt.Errorf("apply %s: %w", name, err)
	}
	lap("store generation %d", rec.Generation)
	c.Cache.AddEncoded(doc, rec.SpecEncoded)
	lap("cache the spec")
	stored := time.Now()
	res.Stored.Took = stored.Sub(start)
	if o.Stored != nil {
		o.Stored(*res.Stored)
	}
	if o.Wait > 0 {
		return res, c.waitCurrent(ctx, last.st, doc.Spec, rec.Generation, storedRev, stored, res.Stored, o)
	}
	return res, nil
}

// loadBeside loads the spec while it reads the last generation from etcd,
// which it finds by the name the file gives on a line of its own.
func (c *Cluster) loadBeside(src Source, lap func(string, ...any)) (*spec.Document, lastGeneration, error) {
	if src.Doc != nil {
		return src.Doc, c.readLast(src.Doc.Spec.Name), nil
	}
	read := make(chan lastGeneration, 1)
	go func() { read <- c.readLast(fileSpecName(src.File)) }()
	doc, err := c.LoadFile(src.File)
	lap("load %s", src.File)
	if err != nil { // without waiting for etcd, which may not answer soon
		return nil, lastGeneration{}, err
	}
	last := <-read
	lap("read the last generation from etcd (meanwhile)")
	if last.st == nil {
		return nil, last, last.err
	}
	return doc, last, nil
}

// waitCurrent waits, at most o.Wait from stored, for every host of the
// spec to report generation gen, stored at etcd revision rev, current.
func (c *Cluster) waitCurrent(ctx context.Context, st ClusterStore, s *spec.Spec, gen int, rev int64, stored time.Time, res *Stored, o ApplyOptions) error {
	ctx, cancel := context.WithDeadline(ctx, stored.Add(o.Wait))
	defer cancel()
	hosts := hostNames(s)
	err := st.WaitCurrent(ctx, s.Name, gen, rev, hosts, func(ev etcdstore.HostEvent) {
		if o.Progress != nil {
			o.Progress(WaitEvent{HostEvent: ev, After: time.Since(stored), Listed: slices.Contains(hosts, ev.Host)})
		}
	})
	if err != nil {
		return waitFailed("apply "+s.Name, o.Wait, err)
	}
	res.Current = time.Since(stored)
	return nil
}

// WaitEvent is a host's report reaching a state while a wait follows it.
type WaitEvent struct {
	HostEvent
	// After is the time since the generation was stored, or removed.
	After time.Duration
	// Listed says the spec names the host.
	Listed bool
}

// waitFailed says why a wait ended short; running out of time is
// ErrTimedOut, so that a script can tell it from a failure.
func waitFailed(what string, limit time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return tagged{ErrTimedOut, fmt.Sprintf("%s: --wait=%s ran out: %v", what, limit, err)}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Destroy removes the infrastructure's spec from etcd, unless it was
// applied again since this command read it; each host's agent then
// removes its part. With Wait it then waits until no host reports it.
func (c *Cluster) Destroy(ctx context.Context, name string, o DestroyOptions) (*DestroyResult, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	c.change.Lock()
	defer c.change.Unlock()
	destroyStart := time.Now()
	rec, rev, err := st.GetRev(name)
	if err != nil {
		return nil, fmt.Errorf("destroy %s: %w", name, err)
	}
	res := &DestroyResult{Infra: name, Generation: rec.Generation}
	if o.Detail {
		res.Removed = len(c.hostsPlan(rec, &spec.Spec{Name: name}).Actions)
	}
	entry := entryOf(o.By, change{verb: history.Destroy}, name, 0)
	entry.SpecFile, entry.Spec, entry.Summary = rec.SpecFile, history.Text(rec.Spec), summary(specOr(c, rec), nil)
	deleted, _, err := st.DeleteIfRevRecorded(name, rev, entry)
	note(c, o.By.event(events.Destroy, name, destroyStart, 0, err), o.Log)
	if err != nil {
		return nil, fmt.Errorf("destroy %s: %w", name, err)
	}
	if o.Removed != nil {
		o.Removed(rec.Generation)
	}
	if o.Wait <= 0 {
		return res, nil
	}
	removed := time.Now()
	ctx, cancel := context.WithDeadline(ctx, removed.Add(o.Wait))
	defer cancel()
	err = st.WaitWithdrawn(ctx, name, deleted, func(ev etcdstore.HostEvent) {
		if ev.State == etcdstore.HostGone && ev.Report == nil {
			res.Withdrawn++
		}
		if o.Progress != nil {
			o.Progress(WaitEvent{HostEvent: ev, After: time.Since(removed)})
		}
	})
	res.Took = time.Since(removed)
	if err != nil {
		return res, waitFailed("destroy "+name, o.Wait, err)
	}
	return res, nil
}

// hostsPlan is what the hosts' agents would change, host by host: the
// kernel objects of the new spec's part on each host against the stored
// one's (old; nil when none).
func (c *Cluster) hostsPlan(old *store.Record, next *spec.Spec) plan.Plan {
	last := specOr(c, old)
	var out plan.Plan
	for _, h := range hostsOf(next, last) {
		var lastPaused plan.Paused
		if old != nil {
			lastPaused = old.Paused
		}
		out.Actions = append(out.Actions, hostDiffPaused(next, last, h, keptPaused(old, next), lastPaused).Actions...)
	}
	return out
}

// Status is each named infrastructure's (or every one's) topology as its
// spec describes it, with each host's report: a host's state is its
// agent's standing, and the ports on it are "unknown" to this process,
// which reads no host's kernel. An infrastructure destroyed while hosts
// still report it shows as removed until their reports go.
func (c *Cluster) Status(_ context.Context, names []string) ([]*InfraStatus, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	recs, removed, err := c.selectRecords(st, names)
	if err != nil {
		return nil, err
	}
	out := []*InfraStatus{}
	for _, rec := range recs {
		s, err := c.statusOf(st, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	for _, name := range removed {
		reports, err := st.Reports(name)
		if err != nil {
			return nil, err
		}
		if len(reports) == 0 { // withdrawn since it was listed
			continue
		}
		views := etcdstore.Assess(0, nil, reports)
		s := &Status{Name: name, Hosts: []HostStatus{}, Switches: []SwitchStatus{}, VMs: []VMStatus{}, HostPorts: []PortStatus{},
			Security: hostsSecurity(views)}
		out = append(out, &InfraStatus{Infra: s, Cluster: clusterStatus(views, time.Time{}, true)})
	}
	return out, nil
}

func (c *Cluster) statusOf(st ClusterStore, rec *store.Record) (*InfraStatus, error) {
	doc, err := c.docOf(rec)
	reports, rerr := st.Reports(rec.Name)
	if rerr != nil {
		return nil, rerr
	}
	if errors.Is(err, store.ErrDamagedRecord) { // that infrastructure's alone
		views := etcdstore.Assess(0, nil, reports)
		s := &Status{Name: rec.Name, Hosts: []HostStatus{}, Switches: []SwitchStatus{}, VMs: []VMStatus{}, HostPorts: []PortStatus{},
			Security: hostsSecurity(views)}
		cs := clusterStatus(views, time.Time{}, false)
		cs.Damaged = err.Error()
		return &InfraStatus{Infra: s, Cluster: cs}, nil
	}
	if err != nil {
		return nil, err
	}
	views := etcdstore.Assess(rec.Generation, hostNames(doc.Spec), reports)
	cs := clusterStatus(views, rec.AppliedAt, false)
	state := map[string]string{}
	for _, v := range views {
		state[v.Host] = string(v.State)
	}
	s := specStatus(rec, doc.Spec, func(host string) string {
		if s := state[host]; s != string(etcdstore.HostCurrent) {
			return "host " + s
		}
		return "unknown"
	})
	s.Security = hostsSecurity(views)
	s.Balancers = reconcile.ReportedBalancers(doc.Spec, reports)
	return &InfraStatus{Infra: s, Cluster: cs}, nil
}

func clusterStatus(views []etcdstore.HostView, appliedAt time.Time, removed bool) *ClusterStatus {
	cs := &ClusterStatus{Converged: etcdstore.Converged(views), Hosts: views, AppliedAt: appliedAt, Removed: removed}
	for _, v := range views {
		switch v.State {
		case etcdstore.HostLagging:
			cs.Lagging = append(cs.Lagging, v.Host)
		case etcdstore.HostGone:
			cs.Dead = append(cs.Dead, v.Host)
		}
	}
	return cs
}

// selectRecords are the named records, or every one, and the
// infrastructures whose record is gone (destroyed) but that some host
// still reports: those named, or with no names every one.
func (c *Cluster) selectRecords(st ClusterStore, names []string) ([]*store.Record, []string, error) {
	if len(names) == 0 {
		return c.allRecords()
	}
	var recs []*store.Record
	var removed []string
	for _, name := range names {
		r, _, err := st.GetRev(name)
		if errors.Is(err, store.ErrNotFound) {
			reports, rerr := st.Reports(name)
			if rerr != nil {
				return nil, nil, rerr
			}
			if len(reports) > 0 {
				removed = append(removed, name)
				continue
			}
		}
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, r)
	}
	return recs, removed, nil
}

func (c *Cluster) allRecords() ([]*store.Record, []string, error) {
	st, recs, err := c.records()
	if err != nil {
		return nil, nil, err
	}
	reported, err := st.Reported()
	if err != nil {
		return nil, nil, err
	}
	stored := make(map[string]bool, len(recs))
	for _, r := range recs {
		stored[r.Name] = true
	}
	var removed []string
	for _, name := range reported {
		if !stored[name] {
			removed = append(removed, name)
		}
	}
	return recs, removed, nil
}

// specStatus is the topology a spec describes, each port in the state
// stateOf gives its host.
func specStatus(rec *store.Record, s *spec.Spec, stateOf func(host string) string) *Status {
	paused := rec.Paused.Normal()
	st := &Status{Name: rec.Name, Generation: rec.Generation, SpecFile: rec.SpecFile, Paused: paused,
		Hosts: []HostStatus{}, Switches: []SwitchStatus{}, VMs: []VMStatus{}, HostPorts: []PortStatus{}}
	// A paused port of a host whose agent is current is paused: the
	// agent realized what etcd holds.
	portState := func(host string, isPaused bool) string {
		if s := stateOf(host); s != "unknown" || !isPaused {
			return s
		}
		return "paused"
	}
	for _, h := range s.Hosts {
		hs := HostStatus{Name: h.Name, Native: h.Native, NICs: []NICStatus{}}
		for _, n := range h.NICs {
			hs.NICs = append(hs.NICs, NICStatus{Name: n.Name, Speed: n.Speed, IP: n.IP, State: stateOf(h.Name)})
		}
		st.Hosts = append(st.Hosts, hs)
	}
	for i := range s.Switches {
		st.Switches = append(st.Switches, reconcile.SwitchStatusOf(&s.Switches[i]))
	}
	st.Networks = reconcile.NetworksOf(s)
	for i := range s.VMs {
		vm := &s.VMs[i]
		vs := VMStatus{Name: vm.Name, Host: vm.Host, CPUs: vm.CPUs, NICs: []PortStatus{}}
		for j, n := range vm.NICs {
			// Where the vNIC is and its MAC are what the spec and vnet's
			// choices make them, as the host's agent realizes them.
			ns, _, tap := plan.VNICPlace(s.Name, vm, j)
			if !tap {
				vs.Namespace = ns
			}
			mac := n.MAC
			if !tap || mac != "" {
				mac = plan.VNICMAC(s.Name, vm, j)
			}
			vs.NICs = append(vs.NICs, PortStatus{Name: fmt.Sprintf("eth%d", j), PortGroup: n.PortGroup, Network: n.Network, MAC: mac, IP: n.IP,
				State: portState(vm.Host, paused.VNIC(vm.Name, &n))})
		}
		st.VMs = append(st.VMs, vs)
	}
	for _, hp := range s.HostPorts {
		st.HostPorts = append(st.HostPorts, PortStatus{Host: hp.Host, PortGroup: hp.PortGroup, IP: hp.IP,
			State: portState(hp.Host, paused.HostPort(hp.PortGroup))})
	}
	return st
}

// hostsSecurity gathers the port security counters the hosts' agents
// reported into one list by port, as status on one machine has them: a VM,
// and so its ports, is on one host.
func hostsSecurity(views []etcdstore.HostView) []SecurityStatus {
	var out []SecurityStatus
	for _, v := range views {
		if v.Report != nil {
			out = append(out, v.Report.Security...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Port < out[j].Port })
	return out
}

func hostNames(s *spec.Spec) []string {
	names := make([]string, len(s.Hosts))
	for i, h := range s.Hosts {
		names[i] = h.Name
	}
	return names
}

const kernelsElsewhere = " is each host's over etcd: the server reads no host's kernel (scrape each host agent's --metrics-addr)"

// IOCStats is each host's over etcd.
func (c *Cluster) IOCStats(ctx context.Context, name string, _ time.Duration) (*IOCStats, error) {
	if _, err := c.Get(ctx, name); err != nil {
		return nil, err
	}
	return nil, tagged{ErrNotHere, "Network I/O Control" + kernelsElsewhere}
}

// Netperf is run on the hosts over etcd.
func (c *Cluster) Netperf(context.Context, string, string, string, string, []string) (*netperf.Report, error) {
	return nil, tagged{ErrNotHere, "a netperf run" + kernelsElsewhere}
}

// Counting is each host's over etcd.
func (c *Cluster) Counting() (metrics.Counting, func(), error) {
	return nil, nil, fmt.Errorf("counters: %w", ErrNotHere)
}

// ReadsKernel: over etcd the counters are each host agent's.
func (c *Cluster) ReadsKernel() bool { return false }

// Sample makes the sampler a server runs; over etcd it reads nothing.
func (c *Cluster) Sample(interval, keep time.Duration) *metrics.Sampler {
	return c.makeSampler(c, interval, keep)
}

// Stats are each host's over etcd: a server's sampler says why it has no
// samples.
func (c *Cluster) Stats(ctx context.Context, name string, o StatsOptions) (*Averages, error) {
	if _, err := c.Get(ctx, name); err != nil {
		return nil, err
	}
	if sm := c.made(); sm != nil {
		return windowed(sm, name, o.Window)
	}
	return nil, tagged{ErrNotHere, "counters" + kernelsElsewhere}
}

// Specs are the specs stored in etcd, each decoded once per version.
func (c *Cluster) Specs() []*spec.Spec {
	_, recs, err := c.records()
	if err != nil {
		return nil
	}
	return c.decoded.specs(recs, c.docOf)
}

// Agents are the host agents each infrastructure names, up while their
// reports live.
func (c *Cluster) Agents() ([]AgentUp, error) {
	st, recs, err := c.records()
	if err != nil {
		return nil, err
	}
	var out []AgentUp
	for _, r := range recs {
		doc, err := c.docOf(r)
		if err != nil {
			continue
		}
		reports, err := st.Reports(r.Name)
		if err != nil {
			return nil, err
		}
		for _, v := range etcdstore.Assess(r.Generation, hostNames(doc.Spec), reports) {
			out = append(out, AgentUp{Infra: r.Name, Host: v.Host, Up: v.State != etcdstore.HostGone})
		}
	}
	return out, nil
}

func (c *Cluster) tracef(format string, args ...any) {
	if c.Trace != nil {
		fmt.Fprintf(c.Trace, format, args...)
	}
}

// lazyStore connects to etcd on first use, once.
type lazyStore struct {
	open func() (ClusterStore, error)
	once sync.Once
	done chan struct{}
	st   ClusterStore
	err  error
}

func (z *lazyStore) get() (ClusterStore, error) {
	z.once.Do(func() {
		z.done = make(chan struct{})
		go func() {
			z.st, z.err = z.open()
			close(z.done)
		}()
	})
	<-z.done
	return z.st, z.err
}

// close closes the store once it is open, without waiting for a connection
// still being made.
func (z *lazyStore) close() error {
	closed := make(chan struct{})
	close(closed)
	z.once.Do(func() { z.done, z.err = closed, errors.New("etcd: closed") })
	select {
	case <-z.done:
		if z.st != nil {
			return z.st.Close()
		}
	default:
		go func() {
			<-z.done
			if z.st != nil {
				z.st.Close()
			}
		}()
	}
	return nil
}

// fileSpecName is the infrastructure name a spec file gives on a line of its
// own before anything else nested (name: NAME), or "" when it gives none
// there. It only lets the record be read before the file is loaded: the
// loaded spec's name decides.
func fileSpecName(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	return nameLine(head[:n])
}

// nameLine finds the top-level "name:" line in the head of a YAML file,
// before the first line that is indented or starts a list.
func nameLine(head []byte) string {
	for line := range strings.Lines(string(head)) {
		line = strings.TrimRight(line, "\r\n")
		if v, ok := strings.CutPrefix(line, "name:"); ok {
			v = strings.TrimSpace(v)
			if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
				v = v[1 : len(v)-1]
			}
			if strings.ContainsAny(v, " #{}[],&*!|>'\"%@`") {
				return ""
			}
			return v
		}
		if line == "" || line[0] == ' ' || line[0] == '\t' || line[0] == '-' || line[0] == '#' {
			continue
		}
	}
	return ""
}

// tagged is an error in its own words that errors.Is matches with a
// sentinel.
type tagged struct {
	sentinel error
	msg      string
}

func (e tagged) Error() string        { return e.msg }
func (e tagged) Is(target error) bool { return target == e.sentinel }

// ParseEndpoints splits a comma-separated list of etcd endpoints (--etcd,
// VNET_ETCD), dropping blanks.
func ParseEndpoints(s string) []string { return etcdstore.ParseEndpoints(s) }
