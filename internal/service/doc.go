// Package service holds vnet's use cases, each once: apply (and its plan),
// destroy, status, stats, Network I/O Control samples, link and unlink,
// exec, gc, recover, events, netperf runs between VMs, and the agents'
// processes. The faces (the CLI in cmd/vnet, the HTTP API in internal/api)
// parse, call one of these and print or encode the result; none of them
// reaches the store, the planner's engine or the kernel by itself.
//
// Three back ends answer the same Service interface:
//
//   - Local: the state store in a state directory (bbolt) and this
//     machine's kernel. It takes an infrastructure's lock for every change
//     and, under the same lock, starts, reloads or stops the teaming agent
//     of an infrastructure that teams uplinks.
//   - Cluster: the state in etcd; an apply stores the spec as the next
//     generation and each host's agent (hostagent) realizes its part, and
//     status reads what the agents report. It reads no kernel.
//   - api.Remote: a vnet server, through its HTTP API.
//
// Local and Cluster are also a Backend, which a vnet server serves: it
// keeps the event list, runs netperf between VMs and is sampled for
// metrics.
//
// State lives in the back end's value, never in globals: a copy of the
// records a server reads again and again (Local.ReadsFresh), the specs it
// decoded, its sampler, its netperf runs. A long-running process keeps one
// value for its life; a command makes one, calls it once and closes it.
// Each operation opens the store and the dataplane it needs and closes them
// after it, so a value never holds a kernel handle between operations.
//
// Errors on which an exit status or an HTTP status depends wrap one of the
// sentinels declared here (ErrNotFound, ErrLocked, ErrInvalid, ...): match
// them with errors.Is.
package service
