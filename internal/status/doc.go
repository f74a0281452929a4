// Package status holds the shapes of what exists right now, as vnet reads
// it back and reports it: an infrastructure's status (vnet status, the
// API), a port's firewall counters (also in a host agent's report in
// etcd) and a link's state (teaming and the metrics).
//
// It is a leaf: it knows nothing of how these are read, so that the store,
// the engine, the agents and the faces can all share them without any of
// them importing a package above its own.
package status
