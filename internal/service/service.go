package service

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/netperf"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// Service is the use cases every back end answers, wherever the state and
// the kernels are: this machine (Local), a cluster's etcd and its hosts'
// agents (Cluster), or a vnet server through its API (api.Remote).
type Service interface {
	// LoadFile reads a spec file, through the back end's cache of specs
	// where it keeps one.
	LoadFile(path string) (*spec.Document, error)
	// Load reads a spec that came from file (a request's body), through
	// the same cache.
	Load(file string, src []byte) (*spec.Document, error)
	// List returns every infrastructure, by name.
	List(ctx context.Context) ([]Infra, error)
	// Get returns one infrastructure with its spec as applied; an unknown
	// one is ErrNotFound.
	Get(ctx context.Context, name string) (*Infra, error)
	// Apply converges the infrastructure to the spec, or with DryRun says
	// what it would do. The VMs runtimes attached stay as they are: an
	// apply whose spec has no place for one is refused (ErrAttached)
	// unless DropAttached.
	Apply(ctx context.Context, src Source, o ApplyOptions) (*ApplyResult, error)
	// Destroy removes an infrastructure; an unknown one is ErrNotFound.
	Destroy(ctx context.Context, name string, o DestroyOptions) (*DestroyResult, error)
	// Status observes the named infrastructures, or every one.
	Status(ctx context.Context, names []string) ([]*InfraStatus, error)
	// IOCStats samples Network I/O Control's counters over interval.
	IOCStats(ctx context.Context, name string, interval time.Duration) (*IOCStats, error)
	// Stats are the rates averaged over a window.
	Stats(ctx context.Context, name string, o StatsOptions) (*Averages, error)
	// Events returns up to limit events of infra (all when empty), newest
	// first.
	Events(ctx context.Context, infra string, limit int) ([]Event, error)
	// Link moves a running VM's vNIC to a port group, or with Connected
	// false cuts it, as a change of the applied spec.
	Link(ctx context.Context, r LinkRequest) (*LinkResult, error)
	// Pause stops the traffic of a VM, network, port group or whole
	// infrastructure at its switch ports, keeping everything configured;
	// Resume starts it again. What is paused outlives the agents and an
	// apply of the same spec.
	Pause(ctx context.Context, r PauseRequest) (*PauseResult, error)
	Resume(ctx context.Context, r PauseRequest) (*PauseResult, error)
	// Operations: history, diff, rollback, the applied spec, describe,
	// snapshot and restore.
	Operations
	// Close releases what the service holds.
	Close() error
}

// Backend is a Service whose state and kernels are reached from this
// process, which a vnet server serves over HTTP: it also keeps events,
// runs netperf between VMs, and is sampled for metrics.
type Backend interface {
	Service
	// Record keeps an event. The list outlives the server: agents add
	// failovers, LBT moves and limit splits to it.
	Record(ev Event) error
	// Netperf runs vnet netperf in node from (a VM or host) against a
	// netserver it starts on addr in VM to, with netperf's arguments, and
	// stops the netserver; ctx bounds the whole run.
	Netperf(ctx context.Context, infra, from, to, addr string, args []string) (*netperf.Report, error)
	// Counting opens the kernel's counters for reading.
	Counting() (metrics.Counting, func(), error)
	// Spec is an applied infrastructure's spec.
	Spec(ctx context.Context, name string) (*spec.Document, error)
	// EditVM applies the spec in force with one VM written in or taken
	// out (VMEdit), as Apply applies that spec; a VM taken out that the
	// spec has not is ErrNoVM.
	EditVM(ctx context.Context, e VMEdit, o ApplyOptions) (*ApplyResult, error)
	// Specs are the specs of the applied infrastructures.
	Specs() []*spec.Spec
	// Agents say which agents of the infrastructures run.
	Agents() ([]AgentUp, error)
	// ReadsKernel says whether the counters are this machine's; over etcd
	// they are each host agent's.
	ReadsKernel() bool
	// Sample makes the sampler behind windowed stats, which the caller
	// runs; Stats answers from its samples from then on.
	Sample(interval, keep time.Duration) *metrics.Sampler
}

// Sentinels of the errors on which an exit status or an HTTP status
// depends; match them with errors.Is.
var (
	// ErrNotFound: no such infrastructure.
	ErrNotFound = store.ErrNotFound
	// ErrLocked: another vnet command holds the state store or the
	// infrastructure; trying again later may succeed.
	ErrLocked = store.ErrLocked
	// ErrConflict: over etcd, another apply or destroy got there first.
	ErrConflict = etcdstore.ErrConflict
	// ErrUnavailable: etcd cannot be reached.
	ErrUnavailable = etcdstore.ErrUnavailable
	// ErrNotSupported: this machine's kernel lacks what the spec needs.
	ErrNotSupported = dataplane.ErrNotSupported
	// ErrNotRoot: changing or reading the kernel needs root.
	ErrNotRoot = dataplane.ErrNotRoot
	// ErrInvalid: a spec or a request that is not valid (exit status 2,
	// HTTP 400).
	ErrInvalid = spec.ErrInvalid
	// ErrNotHere is wrapped by what a back end cannot do from where it
	// runs: over etcd the server reads no host's kernel.
	ErrNotHere = errors.New("not served by this backend")
	// ErrNoSamples: a sampled window has too few samples yet.
	ErrNoSamples = errors.New("no samples")
	// ErrTimedOut: a wait ran out of time.
	ErrTimedOut = errors.New("timed out")
	// ErrBusy: what was asked for is in use (a VM another netperf run
	// measures).
	ErrBusy = errors.New("busy")
	// ErrTooMany: as many runs as may run at once run already.
	ErrTooMany = errors.New("too many at once")
	// ErrNotCertain: gc or recover --adopt left what it cannot be sure
	// no live store made; the error says which command takes it all the
	// same.
	ErrNotCertain = errors.New("who made it is not certain")
)

// Types the faces print and send, kept where they are made.
type (
	// Status is what exists of an infrastructure.
	Status = status.Infra
	// HostStatus, SwitchStatus, VMStatus, PortStatus, NICStatus and
	// AgentStatus are parts of a Status.
	HostStatus   = status.Host
	SwitchStatus = status.Switch
	VMStatus     = status.VM
	PortStatus   = status.Port
	NICStatus    = status.NIC
	AgentStatus  = status.Agent
	// SecurityStatus is a port's security policy and its counters.
	SecurityStatus = status.PortSecurity
	// BalancerStatus is a load balancer with its backends' health and
	// connections.
	BalancerStatus = status.Balancer
	// IOCStats is one sample of Network I/O Control's counters.
	IOCStats = reconcile.IOCStats
	// HostView is a host's standing from its agent's report, over etcd.
	HostView = etcdstore.HostView
	// HostState is a HostView's state.
	HostState = etcdstore.HostState
	// HostEvent is a host reaching a state while a wait follows it.
	HostEvent = etcdstore.HostEvent
	// Averages are rates averaged over a window.
	Averages = metrics.Averages
	// Event is one entry of the event list.
	Event = events.Event
	// TLSFiles are the files of a TLS connection to etcd.
	TLSFiles = etcdstore.TLSFiles
)

// The states of a host over etcd.
const (
	HostCurrent    = etcdstore.HostCurrent
	HostLagging    = etcdstore.HostLagging
	HostFailed     = etcdstore.HostFailed
	HostGone       = etcdstore.HostGone
	HostUnexpected = etcdstore.HostUnexpected
)

// Infra is one applied infrastructure.
type Infra struct {
	Name       string    `json:"name"`
	Generation int       `json:"generation"`
	AppliedAt  time.Time `json:"applied_at"`
	SpecFile   string    `json:"spec_file"`
	// Paused is what of it is paused (plan.Paused's selectors).
	Paused []string `json:"paused,omitempty"`
	// Spec is the YAML as applied (Get only).
	Spec []byte `json:"-"`
}

// Source is the spec an apply takes: a file to load, or a document loaded
// already (a request's body).
type Source struct {
	File string
	Doc  *spec.Document
}

// ApplyOptions say how an apply goes.
type ApplyOptions struct {
	// DryRun only plans.
	DryRun bool
	// Full reads the whole infrastructure and repairs any drift, rather
	// than only what changed since the last apply (this machine only).
	Full bool
	// Wait, over etcd, waits that long at most for every host to report
	// the generation current, telling Progress of each.
	Wait     time.Duration
	Progress func(WaitEvent)
	// Stored, over etcd, is told of the generation once it is stored, or
	// found stored already, before any wait.
	Stored func(Stored)
	// Detail, over etcd, fills the result's plan with what the hosts'
	// agents will change, which models every host's part of both specs.
	Detail bool
	// Log receives the plan and the progress as the apply goes.
	Log io.Writer
	// By is who asks, for the event list (zero: this process's user,
	// through the command line).
	By Actor
	// DropAttached takes out the VMs runtimes attached (containers,
	// pods, libvirt guests) that the spec has no place for (misfit),
	// instead of refusing the apply (ErrAttached). Those that fit are
	// kept as they are either way.
	DropAttached bool
}

// ApplyResult is what an apply did, or would do.
type ApplyResult struct {
	Infra  string `json:"infra"`
	DryRun bool   `json:"dry_run"`
	// Plan is the kernel's actions: done, or to do; over etcd, the hosts'
	// agents' (when asked for in Detail).
	Plan []PlanAction `json:"plan"`
	// Hosts is, over etcd (when asked for in Detail), the plan host by
	// host, each with what it was worked out against.
	Hosts []HostPlan `json:"hosts,omitempty"`
	// Executed counts the actions carried out here: none over etcd, where
	// the hosts' agents carry them out.
	Executed int `json:"executed"`
	// Stored is the generation kept in etcd (or that would be), with the
	// hosts that realize it; nil on this machine.
	Stored *Stored `json:"stored,omitempty"`
	// AgentStarted is the log of the teaming agent the apply started; ""
	// when none was started (none needed, or one runs already).
	AgentStarted string `json:"agent_started,omitempty"`
	// Warnings is what the spec may mean other than it seems (Warnings).
	Warnings []string `json:"warnings,omitempty"`
	// Attached is what became of the VMs runtimes attached; nil when
	// there were none.
	Attached *Attached `json:"attached,omitempty"`
}

// Stored is a generation of an infrastructure in etcd.
type Stored struct {
	Infra      string   `json:"infra"`
	Generation int      `json:"generation"`
	Unchanged  bool     `json:"unchanged"` // the spec was stored already
	Hosts      []string `json:"hosts"`
	// Took is how long storing it took (from the apply's start), and
	// Current, after a wait, how long after the store every host was.
	Took    time.Duration `json:"-"`
	Current time.Duration `json:"-"`
}

// PlanAction is one step of a plan.
type PlanAction struct {
	Op   string `json:"op"`   // create, change, replace or delete
	Kind string `json:"kind"` // the kind of kernel object
	Text string `json:"text"` // as vnet apply --dry-run prints it
}

// Actions lists a plan's steps.
func Actions(p plan.Plan) []PlanAction {
	out := make([]PlanAction, 0, len(p.Actions))
	for _, a := range p.Actions {
		out = append(out, PlanAction{Op: string(a.Op), Kind: string(a.Subject().Kind), Text: a.String()})
	}
	return out
}

// PlanText is the plan as vnet apply --dry-run prints it.
func PlanText(actions []PlanAction) string {
	if len(actions) == 0 {
		return plan.Plan{}.String()
	}
	var b []byte
	for _, a := range actions {
		b = append(append(b, a.Text...), '\n')
	}
	return string(b)
}

// DestroyOptions say how a destroy goes.
type DestroyOptions struct {
	// Wait, over etcd, waits that long at most until no host reports the
	// infrastructure, telling Progress of each report that goes.
	Wait     time.Duration
	Progress func(WaitEvent)
	// Removed, over etcd, is told of the generation removed from etcd,
	// before any wait.
	Removed func(generation int)
	// Detail, over etcd, counts in the result what the hosts' agents will
	// remove, which models every host's part of the spec.
	Detail bool
	// Log receives what the destroy leaves and removes as it goes.
	Log io.Writer
	// By is who asks, for the event list.
	By Actor
}

// DestroyResult is what a destroy removed.
type DestroyResult struct {
	Infra   string `json:"infra"`
	Removed int    `json:"removed"` // kernel objects (over etcd, the hosts' agents remove them)
	// Generation is, over etcd, the generation removed from etcd; 0 on
	// this machine.
	Generation int `json:"generation,omitempty"`
	// Withdrawn counts, after a wait, the hosts' reports that went, and
	// Took how long after the removal the last one went.
	Withdrawn int           `json:"-"`
	Took      time.Duration `json:"-"`
}

// InfraStatus is what exists of an infrastructure and, over etcd, how far
// each host's agent has got.
type InfraStatus struct {
	*status.Infra
	Cluster *ClusterStatus `json:"cluster,omitempty"`
}

// ClusterStatus is each host's standing from its agent's report: current,
// lagging (an older generation), failed, gone (no live report: the agent
// is dead or was never started) or unexpected.
type ClusterStatus struct {
	Converged bool       `json:"converged"`
	Hosts     []HostView `json:"hosts"`
	Lagging   []string   `json:"lagging,omitempty"`
	Dead      []string   `json:"dead_agents,omitempty"`
	AppliedAt time.Time  `json:"applied_at"`
	// Removed says the infrastructure is gone from etcd (destroyed) while
	// hosts still report it: one whose removal failed is failed, with its
	// errors.
	Removed bool `json:"removed,omitempty"`
	// Damaged says why the infrastructure's record in etcd does not read
	// as its spec: the hosts that still report it are listed, and what
	// stands of it on them stays until its spec is applied again or it is
	// destroyed.
	Damaged string `json:"damaged,omitempty"`
}

// StatsOptions say over what window stats average.
type StatsOptions struct {
	Window time.Duration
	// Interval is the time between samples where the service samples for
	// the call (no sampler runs).
	Interval time.Duration
}

// LiveWindow is the most a service samples for one Stats call by itself:
// a longer window needs the history a sampler keeps (a vnet server's).
const LiveWindow = 5 * time.Second

// AgentUp says whether an agent of an infrastructure runs: on this machine
// the teaming agent (no host), over etcd each host's agent, by its report.
type AgentUp struct {
	Infra, Host string
	Up          bool
}

// Invalid is an error in its own words that is ErrInvalid to errors.Is: a
// request or an option that cannot be served as given.
func Invalid(msg string) error { return tagged{ErrInvalid, msg} }

// Validate checks a spec file afresh, never through a cache: its verdict
// is the one of this build's rules. Errors name the field path and line.
func Validate(path string) (*spec.Document, error) { return spec.LoadFile(path) }

// Warnings is what a valid spec may mean other than it seems (ports of
// one switch whose subnets overlap without being the same), each with its
// field path and line. Every face shows them beside the spec's verdict or
// its apply; they change nothing.
func Warnings(doc *spec.Document) []string {
	var out []string
	for _, w := range spec.Warnings(doc) {
		out = append(out, w.Error())
	}
	return out
}
