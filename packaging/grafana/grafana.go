// Package grafana holds a Grafana dashboard of what vnet exports at
// /metrics (vnet.json): uplinks and Network I/O Control pools, VMs and
// vNICs, port security, and the hosts of a cluster. Import it in Grafana
// (Dashboards, New, Import) and pick the Prometheus that scrapes vnet
// server or the host agents.
package grafana

import _ "embed"

// Dashboard is vnet.json, for a server to hand out beside its metrics.
//
//go:embed vnet.json
var Dashboard []byte
