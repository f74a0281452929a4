// Package etcdstore keeps vnet's state in etcd, so that several hosts share
// one view of every infrastructure.
//
// Keys live under a prefix (DefaultPrefix, "/vnet/", unless told otherwise):
//
//	<prefix>infra/<name>          the infrastructure's store.Record: JSON, or compressed when large
//	<prefix>status/<name>/<host>  what the agent on <host> realized (a Report, as JSON)
//
// A record whose JSON would exceed 64 KiB is stored zstd-compressed, its
// spec and the spec's encoding as bytes rather than base64 (record.go):
// a spec of 10,000 networks is a value of 0.33 MB instead of 4.2 MB. Every
// build reads JSON records; builds before the compressed form cannot read
// it. A host agent lists every record on each change of any: List decodes
// only the values that changed since its last call, and returns copies of
// the records it decoded before for the rest.
//
// A record's etcd modification revision is its version: GetRev returns it and
// PutIf writes only if the record still has it, so of two applies racing on
// one infrastructure exactly one wins and the other gets an error wrapping
// ErrConflict. Nothing is merged.
//
// Host reports are attached to a lease that the reporting agent keeps alive
// (and replaces, publishing its last report again, should etcd expire it).
// An agent that dies stops renewing it, and etcd deletes its report when the
// lease's TTL runs out; a reader therefore tells a dead agent from a live one
// by the absence of its key, with no clock comparison across hosts. Assess
// turns the applied generation, the hosts a spec names and the reports into a
// per-host verdict (current, lagging, failed, gone, unexpected).
//
// Every call is bounded by Options.Timeout. When etcd cannot answer in time
// the error wraps ErrUnavailable and says whether the endpoints were
// unreachable or reachable but without a leader (lost quorum).
package etcdstore
