package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vnet-project/vnet/internal/agent"
	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/netperf"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store"
)

// Backend is the engine the API serves: the same one the CLI drives, behind
// an interface so that a store shared by several hosts can replace the
// local one without touching the handlers.
type Backend interface {
	// List returns every infrastructure's record, by name.
	List() ([]*store.Record, error)
	// Get returns one record, or an error wrapping store.ErrNotFound.
	Get(name string) (*store.Record, error)
	// Plan is what applying doc would do.
	Plan(doc *spec.Document) (plan.Plan, error)
	// Apply converges the host to doc.
	Apply(doc *spec.Document) (reconcile.Result, error)
	// Destroy removes an infrastructure; an unknown one is store.ErrNotFound.
	Destroy(name string) (plan.Plan, error)
	// Status observes an applied infrastructure.
	Status(name string) (*InfraStatus, error)
	// IOCStats samples Network I/O Control's counters over interval.
	IOCStats(name string, interval time.Duration) (*reconcile.IOCStats, error)
	// Counting opens the dataplane for reading counters.
	Counting() (metrics.Counting, func(), error)
	// Record keeps an event; Events returns up to limit of them, newest
	// first, of infra (all when empty). Both outlive the server: agents
	// add failovers, LBT moves and limit splits to the same list.
	Record(ev events.Event) error
	Events(infra string, limit int) ([]events.Event, error)
	// Netperf runs vnet netperf in node from (a VM or host) against a
	// netserver it starts on addr in VM to, with netperf's arguments, and
	// stops the netserver; ctx bounds the whole run.
	Netperf(ctx context.Context, infra, from, to, addr string, args []string) (*netperf.Report, error)
}

// Local is the backend of one machine: its bbolt store and its kernel.
//
// The store's file lock is exclusive and held by every vnet command while
// it runs, so reads are served from a copy of the records refreshed every
// second or so; only applies and destroys open the store. Every operation
// opens its own dataplane: the netlink handles of a long-lived one would
// go on pointing at namespaces that a vnet command run beside the server
// has since made again.
type Local struct {
	StateDir string
	// Exe is the vnet binary that runs agents for infrastructures that team
	// uplinks; empty leaves agents alone.
	Exe string
	// Log receives each apply's plan and progress.
	Log io.Writer

	change sync.Mutex // one apply or destroy at a time from this process

	mu      sync.Mutex
	records []*store.Record
	readAt  time.Time
	readErr error
}

// refreshEvery is how old the copy of the records may grow before a read
// opens the store again.
const refreshEvery = time.Second

// records returns the records, reading the store again when the copy is old.
func (b *Local) cached(force bool) ([]*store.Record, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !force && time.Since(b.readAt) < refreshEvery && b.readAt != (time.Time{}) {
		return b.records, b.readErr
	}
	st, err := store.OpenBolt(b.StateDir)
	if err != nil {
		// A store being recovered or replaced: answer from the last copy.
		if b.readAt != (time.Time{}) {
			return b.records, nil
		}
		return nil, err
	}
	recs, err := st.List()
	st.Close()
	b.records, b.readErr, b.readAt = recs, err, time.Now()
	return recs, err
}

// List returns every infrastructure's record.
func (b *Local) List() ([]*store.Record, error) {
	recs, err := b.cached(false)
	out := append([]*store.Record(nil), recs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// Get returns one record. A name the copy lacks is looked up afresh: it may
// have been applied by a command a moment ago.
func (b *Local) Get(name string) (*store.Record, error) {
	for _, force := range []bool{false, true} {
		recs, err := b.cached(force)
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

// engine opens the store and a dataplane for one change.
func (b *Local) engine() (*reconcile.Engine, func(), error) {
	log := b.Log
	if log == nil {
		log = io.Discard
	}
	return b.openEngine(log)
}

// readEngine is an engine for observing and planning: reading the store
// takes no lock, so it never waits on a command changing an
// infrastructure.
func (b *Local) readEngine() (*reconcile.Engine, func(), error) {
	return b.openEngine(io.Discard)
}

func (b *Local) openEngine(log io.Writer) (*reconcile.Engine, func(), error) {
	dp, err := dataplane.New()
	if err != nil {
		return nil, nil, err
	}
	st, err := store.OpenBolt(b.StateDir)
	if err != nil {
		dp.Close()
		return nil, nil, err
	}
	return &reconcile.Engine{DP: dp, Store: st, Log: log, Specs: storedSpecs}, func() { st.Close(); dp.Close() }, nil
}

// Plan is what applying doc would do.
func (b *Local) Plan(doc *spec.Document) (plan.Plan, error) {
	eng, done, err := b.readEngine()
	if err != nil {
		return plan.Plan{}, err
	}
	defer done()
	return eng.Plan(doc)
}

// Apply converges the host to doc and runs, or stops, its agent.
func (b *Local) Apply(doc *spec.Document) (reconcile.Result, error) {
	b.change.Lock()
	defer b.change.Unlock()
	defer b.cached(true) //nolint:errcheck // only refreshes the copy
	eng, done, err := b.engine()
	if err != nil {
		return reconcile.Result{}, err
	}
	res, err := eng.Apply(doc)
	done() // the agent reads the spec from the store
	if err != nil {
		return res, err
	}
	return res, b.syncAgent(doc.Spec)
}

func (b *Local) syncAgent(s *spec.Spec) error {
	if b.Exe == "" {
		return nil
	}
	if len(plan.HostTeams(s)) == 0 {
		return agent.Stop(b.StateDir, s.Name)
	}
	_, err := agent.Ensure(b.StateDir, s.Name, b.Exe)
	return err
}

// Destroy removes an infrastructure and stops its agent.
func (b *Local) Destroy(name string) (plan.Plan, error) {
	b.change.Lock()
	defer b.change.Unlock()
	defer b.cached(true) //nolint:errcheck // only refreshes the copy
	eng, done, err := b.engine()
	if err != nil {
		return plan.Plan{}, err
	}
	defer done()
	_, known := eng.Store.Get(name)
	if b.Exe != "" {
		if err := agent.Stop(b.StateDir, name); err != nil {
			return plan.Plan{}, err
		}
		_ = os.Remove(agent.LogFile(b.StateDir, name))
	}
	p, err := eng.Destroy(name)
	if err != nil {
		return p, err
	}
	if p.Empty() && errors.Is(known, store.ErrNotFound) {
		return p, fmt.Errorf("destroy %s: %w", name, store.ErrNotFound)
	}
	return p, nil
}

// Status observes an applied infrastructure.
func (b *Local) Status(name string) (*InfraStatus, error) {
	doc, err := b.doc(name)
	if err != nil {
		return nil, err
	}
	eng, done, err := b.readEngine()
	if err != nil {
		return nil, err
	}
	defer done()
	st, err := eng.Status(doc)
	if err != nil {
		return nil, err
	}
	if len(plan.HostTeams(doc.Spec)) > 0 {
		pid, running := agent.Running(b.StateDir, name)
		st.Agent = &status.Agent{Running: running, PID: pid, Log: agent.LogFile(b.StateDir, name)}
	}
	return &InfraStatus{Infra: st}, nil
}

// IOCStats samples Network I/O Control's counters over interval.
func (b *Local) IOCStats(name string, interval time.Duration) (*reconcile.IOCStats, error) {
	doc, err := b.doc(name)
	if err != nil {
		return nil, err
	}
	dp, err := dataplane.New()
	if err != nil {
		return nil, err
	}
	defer dp.Close()
	return reconcile.CollectIOCStats(dp, doc, interval)
}

// Record adds an event to the state directory's journal, which the
// infrastructures' agents write to as well.
func (b *Local) Record(ev events.Event) error { return events.In(b.StateDir).Append(ev) }

// Events reads the state directory's journal.
func (b *Local) Events(infra string, limit int) ([]events.Event, error) {
	return events.In(b.StateDir).Newest(infra, limit)
}

// Netperf runs the engine of vnet netperf between two nodes, each end in
// its node's namespace and cgroup by vnet exec, as the lab does. The
// netserver listens on a port of its own for this run alone.
func (b *Local) Netperf(ctx context.Context, infra, from, to, addr string, args []string) (*netperf.Report, error) {
	if b.Exe == "" {
		return nil, fmt.Errorf("netperf: this server runs no vnet binary: %w", ErrNotHere)
	}
	port := strconv.Itoa(20000 + rand.IntN(20000))
	srv := exec.Command(b.Exe, "--state-dir", b.StateDir, "exec", infra+"/"+to, "--", b.Exe, "netserver", "-D", "-p", port, "-L", addr)
	// Both ends die with the server, should it die without ending them.
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := srv.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("netperf: start netserver in %s: %w", to, err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	if err := awaitListening(ctx, stderr); err != nil {
		return nil, fmt.Errorf("netperf: netserver in %s on %s:%s: %w", to, addr, port, err)
	}
	argv := append([]string{"--state-dir", b.StateDir, "exec", infra + "/" + from, "--", b.Exe, "netperf", "-p", port}, args...)
	cmd := exec.CommandContext(ctx, b.Exe, argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = strings.TrimSpace(string(out))
		}
		return nil, fmt.Errorf("netperf from %s: %v: %s", from, err, msg)
	}
	var rep netperf.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, fmt.Errorf("netperf from %s: unreadable result: %w", from, err)
	}
	return &rep, nil
}

// awaitListening reads the netserver's log until it listens, it ends, or
// ctx does; the rest of its log is drained so that it never blocks.
func awaitListening(ctx context.Context, log io.Reader) error {
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(log)
		var last string
		for sc.Scan() {
			last = sc.Text()
			if strings.Contains(last, "listening on") {
				ready <- nil
				_, _ = io.Copy(io.Discard, log)
				return
			}
		}
		ready <- fmt.Errorf("it ended: %s", last)
	}()
	select {
	case err := <-ready:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(15 * time.Second):
		return errors.New("not listening after 15 s")
	}
}

// Counting opens a dataplane for reading counters.
func (b *Local) Counting() (metrics.Counting, func(), error) {
	dp, err := dataplane.New()
	if err != nil {
		return nil, nil, err
	}
	return dp, dp.Close, nil
}

func (b *Local) doc(name string) (*spec.Document, error) {
	rec, err := b.Get(name)
	if err != nil {
		return nil, err
	}
	return storedDoc(rec)
}
