package api

import (
	"time"

	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/service"
)

// InfraSummary is one infrastructure in the list.
type InfraSummary struct {
	Name       string    `json:"name"`
	Generation int       `json:"generation"`
	AppliedAt  time.Time `json:"applied_at"`
	SpecFile   string    `json:"spec_file"`
	// Paused is what is paused (vnet pause), absent when nothing is.
	Paused []string `json:"paused,omitempty"`
}

// Infra is one infrastructure: its summary and the spec as applied.
type Infra struct {
	InfraSummary
	Spec string `json:"spec"` // the YAML as applied
}

func summaryOf(in service.Infra) InfraSummary {
	return InfraSummary{Name: in.Name, Generation: in.Generation, AppliedAt: in.AppliedAt, SpecFile: in.SpecFile, Paused: in.Paused}
}

// ApplyResult is what a PUT did, or with dryRun would do.
type ApplyResult struct {
	Infra    string       `json:"infra"`
	DryRun   bool         `json:"dry_run"`
	Changes  int          `json:"changes"`  // actions in the plan
	Executed int          `json:"executed"` // actions carried out
	Plan     []PlanAction `json:"plan"`
	// Hosts is, over etcd, the plan host by host, each with what it was
	// worked out against.
	Hosts []service.HostPlan `json:"hosts,omitempty"`
	// AgentStarted is the log of the teaming agent the apply started.
	AgentStarted string `json:"agent_started,omitempty"`
	// Warnings is what a valid spec may mean other than it seems: ports
	// of one switch whose subnets overlap without being the same.
	Warnings []string `json:"warnings,omitempty"`
	// Attached is what became of the VMs runtimes attached (containers,
	// pods, libvirt guests): kept as they are, or with dropAttached=true
	// taken out when the spec has no place for them.
	Attached *service.Attached `json:"attached,omitempty"`
}

// PlanAction is one step of a plan.
type PlanAction = service.PlanAction

// DestroyResult is what a DELETE removed.
type DestroyResult struct {
	Infra   string `json:"infra"`
	Removed int    `json:"removed"`
}

// StatsResult are rates averaged over a window, as the server sampled them.
type StatsResult struct {
	Window float64 `json:"window_s"` // asked for; Seconds says how much the samples cover
	*metrics.Averages
}

// InfraStatus is what /status answers: what exists, and over etcd how far
// each host's agent has got.
type InfraStatus = service.InfraStatus

// ClusterStatus is each host's standing over etcd.
type ClusterStatus = service.ClusterStatus

// Event is one entry of the event list: a change made through the server,
// or what an agent did (a failover, an LBT move, a limit split).
type Event = service.Event

// The netperf runs' request and answer.
type (
	NetperfRequest = service.NetperfRequest
	NetperfOptions = service.NetperfOptions
	NetperfRun     = service.NetperfRun
)

// maxEvents is the most events one request returns.
const maxEvents = 500
