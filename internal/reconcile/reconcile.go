// Package reconcile drives an apply or a destroy: it observes the host,
// plans with package plan, executes through a Dataplane, and on any failure
// converges the host back to what it observed before.
package reconcile

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"time"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
)

// Dataplane is what the engine needs from the kernel side.
type Dataplane interface {
	Observe(infra string, hints []plan.Resource) ([]plan.Resource, error)
	Execute(a plan.Action) error
	Probe(needs []plan.Resource) error
}

// ScopedObserver is a dataplane that can read only some namespaces of an
// infrastructure (all of them for a nil scope).
type ScopedObserver interface {
	ObserveScope(infra string, scope plan.Scope, hints []plan.Resource) ([]plan.Resource, error)
}

// Sweeper is a dataplane that can find and remove what a command killed
// halfway left of an infrastructure where no observation sees it (an
// unfinished namespace entry, an emptied cgroup directory).
type Sweeper interface {
	Sweep(infra string) ([]string, error)
}

// UnmarkedSweeper is a dataplane that removes the vNIC pairs a command
// killed before marking them left in an infrastructure's namespaces. It
// reads every link there, so the engine asks only after an apply that did
// not finish.
type UnmarkedSweeper interface {
	SweepUnmarked(infra string) ([]string, error)
}

// StalePruner is a dataplane that keeps state shared by many resources
// (the port programs' maps of a switch's namespace) which a command killed
// halfway, or a resource deleted under vnet, can leave holding entries of
// what is gone. Finding those reads every resource that shares it, so the
// engine asks only when some may be there (mayBeStale), of the namespaces
// where the infrastructure has port programs.
type StalePruner interface {
	PruneStale(namespaces []string) error
}

// BatchDeleter is a dataplane that carries out a destroy's deletes faster
// all together than one by one, with the same result; it returns an error
// per action that failed, and calls lap (a Stopwatch) after each part.
type BatchDeleter interface {
	DeleteAll(actions []plan.Action, lap func(format string, args ...any)) []error
}

// PortSweeper is a dataplane whose port programs can hold rules and tables
// that no port's settings name, which a command killed while it wrote
// them leaves: SweepPortPrograms deletes those of the namespaces given.
type PortSweeper interface {
	SweepPortPrograms(namespaces []string) error
}

// DevicePreparer is a dataplane that records, for a whole plan before its
// first step, the state of the devices the plan changes, which each step
// would otherwise record alone.
type DevicePreparer interface {
	PrepareDevices(actions []plan.Action) error
	// DropUnusedDeviceRecords removes, after a rollback, the records of
	// devices the plan never got to change.
	DropUnusedDeviceRecords(actions []plan.Action)
}

// DeviceForgetter is a dataplane that keeps records of the devices it
// changed (DevicePreparer) and removes those of devices that are gone:
// those an apply dropped, and after a destroy those of the
// infrastructure's namespaces.
type DeviceForgetter interface {
	ForgetGoneDevices(devices []plan.Resource) error
	DropStaleDeviceRecords(within func(ns string) bool, dry bool) ([]string, error)
}

// BatchExecutor is a dataplane that carries out some consecutive steps of
// a plan faster together than one by one, with the same result: those
// with the same non-empty BatchKey, at most MaxBatch at once.
// ExecuteBatch returns how many it carried out before the first that
// failed, and that one's error.
type BatchExecutor interface {
	BatchKey(a plan.Action) string
	MaxBatch() int
	ExecuteBatch(actions []plan.Action) (int, error)
}

// HostFactReader is a dataplane that can read the links and namespaces of
// the machine that a host's part of a spec names (plan.HostFacts).
type HostFactReader interface {
	HostFacts(hostNS string, links, namespaces []string, underlay string) (plan.HostFacts, error)
}

// Engine applies and destroys infrastructures.
type Engine struct {
	DP    Dataplane
	Store store.Store
	Log   io.Writer // the plan and progress; io.Discard to silence
	// FailBefore, when set, is called before each step; an error it returns
	// fails the apply there. Tests use it to prove rollback at every step.
	FailBefore func(step int, a plan.Action) error
	NumCPU     int // CPUs for VM cpusets; 0 means this machine's
	// Full makes every apply read the whole infrastructure and repair any
	// drift, rather than only what the change from the last apply touches.
	Full bool
	// Trace, when set, receives where an apply's time goes.
	Trace io.Writer
	// Host and HostNS, when Host is set, realize only that host's part of
	// each spec, as its agent does (plan.Options.Host).
	Host, HostNS string
	// UplinksDown, on a real host, are the teamed uplinks whose device has
	// no carrier ("host/uplink", plan.Options.Down): an apply cannot bring
	// those up, so it keeps ports off them as the host's teaming agent does.
	UplinksDown map[string]bool
	// LBDown, on a host, are the load balancers' backends that their
	// health checks found down (plan.Options.LBDown, by plan.BackendKey).
	LBDown map[string]bool
	// Memo, when set, keeps the spec and model of each apply for the next
	// one, which otherwise decodes the record's spec and models it again.
	Memo *Memo
	// Specs, when set, keeps the specs applied, so that reading the last
	// one back does not decode its YAML again.
	Specs *speccache.Cache
	// Applied, when set, is the last record's spec as the caller read it
	// under the infrastructure's lock (an attachment reads it to write its
	// VM into): taken for the record's spec when their bytes are the same,
	// so that a process that keeps no Memo does not decode a spec of
	// thousands of VMs twice. The engine only reads it, as it reads the
	// specs a Memo keeps.
	Applied *spec.Document
	// History, when set, makes the history entry of the change an apply
	// records (next: the record it writes; doc: its spec; false: the
	// change keeps none), which the store keeps in the record's own write.
	// It is called only where the store can (store.HistoryPutter): a
	// caller whose History was not called keeps the entry itself.
	History func(next *store.Record, doc *spec.Document) (history.Entry, bool)
	// Paused, when set, is what of the infrastructure an apply pauses
	// (plan.Options.Paused), and the record keeps; nil keeps what the
	// last apply's record says is paused, so that applying a spec again
	// resumes nothing.
	Paused *plan.Paused

	deviceSpeeds map[string]uint64 // of the host's real NICs, read by checkHost
}

// scoped gives the planner's options the engine's host.
func (e *Engine) scoped(o plan.Options) plan.Options {
	o.Host, o.HostNS, o.DeviceSpeeds, o.LBDown = e.Host, e.HostNS, e.deviceSpeeds, e.LBDown
	o.PortPrograms = e.portPrograms()
	if len(e.UplinksDown) > 0 {
		down := maps.Clone(e.UplinksDown)
		maps.Copy(down, o.Down)
		o.Down = down
	}
	return o
}

// portPrograms reports whether the dataplane enforces port policies with
// its tc/BPF programs on this machine.
func (e *Engine) portPrograms() bool {
	pp, ok := e.DP.(PortProgrammer)
	if !ok {
		return false
	}
	on, _ := pp.PortPrograms()
	return on
}

func (e *Engine) numCPU() int {
	if e.NumCPU != 0 {
		return e.NumCPU
	}
	return runtime.NumCPU()
}

// stopwatch returns a function that traces the time since it was last
// called (or made), under a label.
func (e *Engine) stopwatch() func(format string, args ...any) {
	if e.Trace == nil {
		return Stopwatch(nil)
	}
	return Stopwatch(e.tracef)
}

// Stopwatch returns a function that prints, with printf, the time since it
// was last called (or made) under a label; with a nil printf it prints
// nothing.
func Stopwatch(printf func(format string, args ...any)) func(format string, args ...any) {
	t := time.Now()
	return func(format string, args ...any) {
		if printf == nil {
			return
		}
		now := time.Now()
		printf("%8.1f ms  %s\n", float64(now.Sub(t).Microseconds())/1000, fmt.Sprintf(format, args...))
		t = now
	}
}

func (e *Engine) tracef(format string, args ...any) {
	if e.Trace != nil {
		fmt.Fprintf(e.Trace, format, args...)
	}
}

func (e *Engine) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format, args...)
	}
}
