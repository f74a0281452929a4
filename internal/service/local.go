package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
)

// Local is the back end of one machine: the state store in its state
// directory (bbolt) and this machine's kernel. It runs the teaming agent
// of each infrastructure that teams uplinks, under the infrastructure's
// lock.
//
// Each operation opens the dataplane it needs and closes it after it: the
// netlink handles of a long-lived dataplane would go on pointing at
// namespaces that a vnet command run beside a server has since made again.
// What a Local keeps between operations is what stays true whoever changes
// the state, or is checked before it is used (see warm): the store's value
// (which opens the file for each operation, and knows what it last read
// and wrote of it), the spec and model of each infrastructure's last apply
// from this process (kept by the record's spec bytes), the specs it
// decoded (by their bytes), a copy of the records (with ReadsFresh zero,
// none), and a server's sampler.
type Local struct {
	// StateDir is where the store, its locks, the agents' pid files and
	// logs, and the event journal live.
	StateDir string
	// Exe is the vnet binary, which runs the teaming agents and the ends
	// of netperf runs; empty leaves agents alone and runs no netperf.
	Exe string
	// Cache keeps the specs loaded, applied or read back; nil keeps them
	// in memory only.
	Cache *speccache.Cache
	// Trace receives where an apply's time goes; nil: nowhere.
	Trace io.Writer
	// ReadsFresh is how old the copy of the records that reads answer
	// from may grow before a read opens the store again; zero reads the
	// store every time. A server reads the same records for every scrape
	// and sample.
	ReadsFresh time.Duration

	once   sync.Once
	change sync.Mutex // one change at a time from this process

	mu      sync.Mutex
	copied  []*store.Record
	readAt  time.Time
	readErr error

	decoded specMemo
	docs    docMemo // the document of each infrastructure's last record read or stored
	// attached indexes the spec each infrastructure's last change of
	// attachments made, for the next one (attachIndex).
	attached attachIndexes
	sampling
	warm warm
}

// NewLocal is the back end of this machine with its state in stateDir and
// the spec cache beside it; exe is the vnet binary ("" runs no agents).
func NewLocal(stateDir, exe string) *Local {
	return &Local{StateDir: stateDir, Exe: exe, Cache: SpecCache(stateDir)}
}

// SpecCache keeps the specs that commands loaded, applied or read back in
// the state directory, so that the next command given the same bytes does
// not decode and validate a large spec's YAML again.
func SpecCache(stateDir string) *speccache.Cache {
	return speccache.New(filepath.Join(stateDir, "spec-cache"))
}

func (l *Local) init() {
	l.once.Do(func() {
		if l.Cache == nil {
			l.Cache = speccache.New("")
		}
	})
}

// stopwatch prints to Trace, if set, the time of each step under its
// label (reconcile.Stopwatch).
func (l *Local) stopwatch() func(format string, args ...any) {
	if l.Trace == nil {
		return reconcile.Stopwatch(nil)
	}
	return reconcile.Stopwatch(l.tracef)
}

// tracef writes to Trace, if set.
func (l *Local) tracef(format string, args ...any) {
	if l.Trace != nil {
		fmt.Fprintf(l.Trace, format, args...)
	}
}

// Close releases the locks of the store's value; every operation closes
// the rest of what it opened.
func (l *Local) Close() error { return l.warm.drop() }

// LoadFile reads a spec file through the state directory's cache.
func (l *Local) LoadFile(path string) (*spec.Document, error) {
	l.init()
	return l.Cache.LoadFile(path)
}

// Load reads a spec's bytes through the state directory's cache; a spec
// that differs from one in force only in some VMs (a client's edit of a
// VM, sent whole) is read as that change (spec.LoadAfter).
func (l *Local) Load(file string, src []byte) (*spec.Document, error) {
	if doc, ok := l.docs.loadAfter(file, src); ok {
		return doc, nil
	}
	l.init()
	return l.Cache.Load(file, src)
}

func (l *Local) load(src Source) (*spec.Document, error) {
	if src.Doc != nil {
		return src.Doc, nil
	}
	return l.LoadFile(src.File)
}

// openStore opens the state store for an operation that keeps its value to
// itself (gc, recover); reading it takes no lock, so it never waits on a
// command changing an infrastructure.
func (l *Local) openStore() (*store.Bolt, error) { return store.OpenBolt(l.StateDir) }

// engine opens the dataplane for one operation, with the store, the
// models and what the kernel was found to have kept warm; done keeps what
// the dataplane found and closes it.
func (l *Local) engine(log io.Writer) (eng *reconcile.Engine, st *store.Bolt, done func(), err error) {
	l.init()
	dp, err := dataplane.New()
	if err != nil {
		return nil, nil, nil, err
	}
	// A TAP that a VM attaches is a device of the machine's: what it was
	// before vnet took it is kept here until it is given back.
	dp.DeviceStateDir = l.deviceStateDir()
	st, memo, err := l.warm.get(l.StateDir, l.Trace)
	if err != nil {
		dp.Close()
		return nil, nil, nil, err
	}
	if log == nil {
		log = io.Discard
	}
	dp.AssumeFeatures(l.warm.kernel())
	eng = &reconcile.Engine{DP: dp, Store: st, Log: log, Specs: l.Cache, Trace: l.Trace, Memo: memo}
	return eng, st, func() {
		l.warm.keepKernel(dp.Features())
		dp.Close()
	}, nil
}

// cached returns the records, reading the store again when the copy is
// older than ReadsFresh (or force).
func (l *Local) cached(force bool) ([]*store.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fresh := !l.readAt.IsZero() && time.Since(l.readAt) < l.ReadsFresh
	if fresh && !force {
		return l.copied, l.readErr
	}
	st, _, err := l.warm.get(l.StateDir, l.Trace)
	if err != nil {
		// A store being recovered or replaced: a server answers from the
		// last copy.
		if l.ReadsFresh > 0 && !l.readAt.IsZero() {
			return l.copied, nil
		}
		return nil, err
	}
	recs, err := st.List()
	l.copied, l.readErr, l.readAt = recs, err, time.Now()
	return recs, err
}

// changed drops the copy of the records after a change of this process's.
func (l *Local) changed() {
	l.mu.Lock()
	l.readAt = time.Time{}
	l.mu.Unlock()
}

// List returns every applied infrastructure, by name.
func (l *Local) List(context.Context) ([]Infra, error) {
	recs, err := l.records(nil, nil)
	if err != nil {
		return nil, err
	}
	return infras(recs), nil
}

func infras(recs []*store.Record) []Infra {
	out := make([]Infra, 0, len(recs))
	for _, r := range recs {
		out = append(out, infraOf(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func infraOf(r *store.Record) Infra {
	return Infra{Name: r.Name, Generation: r.Generation, AppliedAt: r.AppliedAt, SpecFile: r.SpecFile, Spec: r.Spec,
		Paused: r.Paused.Normal()}
}

// Get returns one infrastructure.
func (l *Local) Get(_ context.Context, name string) (*Infra, error) {
	rec, err := l.record(name)
	if err != nil {
		return nil, err
	}
	in := infraOf(rec)
	return &in, nil
}

// record returns an infrastructure's record.
func (l *Local) record(name string) (*store.Record, error) {
	recs, err := l.records(nil, []string{name})
	if err != nil {
		return nil, err
	}
	return recs[0], nil
}

// records are the named records, or every one: from st (opened for the
// call when nil), or from the copy when ReadsFresh keeps one. A name the
// copy lacks is looked up afresh: a command may have applied it a moment
// ago.
func (l *Local) records(st store.Store, names []string) ([]*store.Record, error) {
	if l.ReadsFresh > 0 {
		return l.fromCopy(names)
	}
	if st == nil {
		bolt, _, err := l.warm.get(l.StateDir, l.Trace)
		if err != nil {
			return nil, err
		}
		st = bolt
	}
	if len(names) == 0 {
		return st.List()
	}
	out := make([]*store.Record, 0, len(names))
	for _, name := range names {
		r, err := recordHead(st, name)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (l *Local) fromCopy(names []string) ([]*store.Record, error) {
	recs, err := l.cached(false)
	if err != nil || len(names) == 0 {
		return recs, err
	}
	out := make([]*store.Record, 0, len(names))
	for _, name := range names {
		r, err := l.fromCopyOne(name)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (l *Local) fromCopyOne(name string) (*store.Record, error) {
	for _, force := range []bool{false, true} {
		recs, err := l.cached(force)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Name == name {
				return r, nil
			}
		}
	}
	return nil, fmt.Errorf("%q: %w", name, store.ErrNotFound)
}

// recordHead reads a record without what was realized where the store can:
// what reads a record's spec needs no more.
func recordHead(st store.Store, name string) (*store.Record, error) {
	if h, ok := st.(store.HeadReader); ok {
		return h.Head(name)
	}
	return st.Get(name)
}

// Spec is an applied infrastructure's spec.
func (l *Local) Spec(_ context.Context, name string) (*spec.Document, error) { return l.doc(name) }

// docFresh is the spec of an applied infrastructure as the store holds
// it now, never from the copy of the records a server reads from.
func (l *Local) docFresh(name string) (*spec.Document, error) {
	st, _, err := l.warm.get(l.StateDir, l.Trace)
	if err != nil {
		return nil, err
	}
	return l.docIn(st, name)
}

// doc is the spec of an applied infrastructure.
func (l *Local) doc(name string) (*spec.Document, error) {
	rec, err := l.record(name)
	if err != nil {
		return nil, err
	}
	return l.docOf(rec)
}

// docOf is the record's spec, made of its stored encoding or through the
// spec cache.
func (l *Local) docOf(rec *store.Record) (*spec.Document, error) {
	if doc, ok := l.docs.get(rec); ok {
		return doc, nil
	}
	l.init()
	doc, err := rec.DocVia(l.Cache)
	if err == nil {
		l.docs.put(rec, doc)
	}
	return doc, err
}

// keepDoc keeps doc, which a change stored as rec, as rec's document for
// the next change to read (docMemo): one that validated, as every
// stored spec did.
func (l *Local) keepDoc(rec *store.Record, doc *spec.Document) {
	if doc.Validated() {
		l.docs.put(rec, doc)
	}
}

// Apply converges this machine to the spec and runs, reloads or stops the
// infrastructure's teaming agent, all under the infrastructure's lock.
// An apply on this machine is done when it returns: there is nothing to
// wait for. The VMs runtimes attached stay as they are (applyKeeping).
func (l *Local) Apply(ctx context.Context, src Source, o ApplyOptions) (*ApplyResult, error) {
	return applyKeeping(ctx, src, o, l.apply)
}

func (l *Local) apply(ctx context.Context, src Source, o ApplyOptions) (*ApplyResult, error) {
	doc, err := l.load(src)
	if err != nil {
		return nil, err
	}
	name := doc.Spec.Name
	res := &ApplyResult{Infra: name, DryRun: o.DryRun}
	if o.DryRun {
		if doc, err = reworked(ctx, doc, func() (*spec.Document, error) { return l.docFresh(name) }); err != nil {
			return nil, err
		}
		res.Warnings = Warnings(doc)
		eng, _, done, err := l.engine(nil)
		if err != nil {
			return nil, err
		}
		defer done()
		eng.Full = o.Full
		p, err := eng.Plan(doc)
		res.Plan = Actions(p)
		return res, err
	}
	start := time.Now()
	lap := l.stopwatch()
	err = l.changing(name, "apply ", o.Log, func(eng *reconcile.Engine, st *store.Bolt) error {
		lap("service: engine and lock")
		eng.Full = o.Full
		before := beforeChange(st, name)
		lap("service: last record")
		prior := lapped(priorDoc(l, before), lap, "service: spec in force")
		var err error
		if doc, err = reworked(ctx, doc, prior); err != nil {
			return err
		}
		lap("service: reworked (the edit, the runtimes' VMs kept)")
		res.Warnings = Warnings(doc)
		lap("service: warnings")
		c := changeOf(ctx, history.Apply)
		kept := l.keepInRecord(eng, o.By, c, name, before, prior)
		r, err := eng.Apply(doc)
		res.Plan, res.Executed = Actions(r.Plan), r.Executed
		if err != nil {
			return err
		}
		lap("service: applied")
		if !kept() {
			l.keepLocal(o.By, st, c, name, before, o.Log)
		}
		lap("service: history")
		res.AgentStarted, err = l.syncAgent(doc.Spec)
		return err
	})
	lap("service: agent, unlocked")
	note(l, o.By.event(events.Apply, name, start, res.Executed, err), o.Log)
	lap("service: event")
	return res, err
}

// changing runs change with an engine whose log is log, holding the
// infrastructure's lock, one change at a time from this process. what
// begins the error of a lock that cannot be taken ("apply ").
func (l *Local) changing(name, what string, log io.Writer, change func(*reconcile.Engine, *store.Bolt) error) error {
	return l.changingWithin(name, what, log, 0, change)
}

// changingWithin is changing that waits up to wait for the lock (0: the
// store's default).
func (l *Local) changingWithin(name, what string, log io.Writer, wait time.Duration, change func(*reconcile.Engine, *store.Bolt) error) error {
	l.change.Lock()
	defer l.change.Unlock()
	defer l.changed()
	eng, st, done, err := l.engine(log)
	if err != nil {
		return err
	}
	defer done()
	if wait > 0 {
		st.LockWait = wait
	}
	unlock, err := st.Lock(name)
	if err != nil {
		return fmt.Errorf("%s%s: %w", what, name, err)
	}
	defer unlock()
	return change(eng, st)
}

// Destroy removes an infrastructure and stops its agent, under its lock.
// It is done when it returns: there is nothing to wait for.
func (l *Local) Destroy(_ context.Context, name string, o DestroyOptions) (*DestroyResult, error) {
	var res *DestroyResult
	start := time.Now()
	err := l.changing(name, "destroy ", o.Log, func(eng *reconcile.Engine, st *store.Bolt) (err error) {
		before := beforeChange(st, name)
		if res, err = l.destroy(eng, st, name); err == nil {
			l.keepLocal(o.By, st, change{verb: history.Destroy}, name, before, o.Log)
		}
		return err
	})
	removed := 0
	if res != nil {
		removed = res.Removed
	}
	if !errors.Is(err, store.ErrNotFound) {
		note(l, o.By.event(events.Destroy, name, start, removed, err), o.Log)
	}
	return res, err
}

func (l *Local) destroy(eng *reconcile.Engine, st *store.Bolt, name string) (*DestroyResult, error) {
	_, known := st.Get(name)
	if err := l.stopAgent(name); err != nil {
		return nil, err
	}
	swept, err := eng.Sweep(name)
	if err != nil {
		return nil, fmt.Errorf("destroy %s: %w", name, err)
	}
	p, err := eng.Destroy(name)
	res := &DestroyResult{Infra: name, Removed: len(p.Actions)}
	if err != nil {
		return res, err
	}
	eng.Memo.Forget(name)
	l.docs.forget(name)
	l.attached.forget(name)
	if p.Empty() && len(swept) == 0 && errors.Is(known, store.ErrNotFound) {
		return nil, fmt.Errorf("destroy %s: %w", name, store.ErrNotFound)
	}
	return res, nil
}

// Status observes the named infrastructures, or every one.
func (l *Local) Status(_ context.Context, names []string) ([]*InfraStatus, error) {
	eng, st, done, err := l.engine(nil)
	if err != nil {
		return nil, err
	}
	defer done()
	recs, err := l.records(st, names)
	if err != nil {
		return nil, err
	}
	out := []*InfraStatus{}
	for _, rec := range recs {
		doc, err := l.docOf(rec)
		if err != nil {
			return nil, err
		}
		st, err := eng.Status(doc)
		if err != nil {
			return nil, err
		}
		st.Agent = l.agentStatus(doc.Spec)
		out = append(out, &InfraStatus{Infra: st})
	}
	return out, nil
}

// IOCStats samples Network I/O Control's counters over interval.
func (l *Local) IOCStats(_ context.Context, name string, interval time.Duration) (*IOCStats, error) {
	dp, err := dataplane.New() // first: without root, that is what to say
	if err != nil {
		return nil, err
	}
	defer dp.Close()
	doc, err := l.doc(name)
	if err != nil {
		return nil, err
	}
	return reconcile.CollectIOCStats(dp, doc, interval)
}

// Specs are the specs of the applied infrastructures, each decoded once
// per version.
func (l *Local) Specs() []*spec.Spec {
	recs, err := l.records(nil, nil)
	if err != nil {
		return nil
	}
	return l.decoded.specs(recs, l.docOf)
}

// ReadsKernel: the counters are this machine's.
func (l *Local) ReadsKernel() bool { return true }

// deviceStateDir is where the dataplane records the devices it changes.
func (l *Local) deviceStateDir() string { return filepath.Join(l.StateDir, "devices") }
