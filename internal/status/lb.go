package status

import "time"

// BackendHealth is what a host's health checks found of a load balancer's
// backend it runs, as its agent reports it.
type BackendHealth struct {
	Key   string    `json:"key"` // the site, load balancer, VM and vNIC: "network a-web/web/web2/0"
	Up    bool      `json:"up"`
	Since time.Time `json:"since"`           // when its last probe changed its state
	Error string    `json:"error,omitempty"` // why the last probe failed, while down
}

// BackendConns is what the load balancers of a host's client ports sent
// one backend from one VIP: connections since they were first loaded, and
// those active (TCP: not closed by the client; UDP: a datagram within the
// last minute).
type BackendConns struct {
	Site   string `json:"site"` // "network a-web", "portgroup pg-web"
	LB     string `json:"lb"`
	VIP    string `json:"vip"`
	Addr   string `json:"addr"`
	Port   int    `json:"port"`
	Proto  string `json:"proto"`
	Total  uint64 `json:"connections"`
	Active uint64 `json:"active"`
}

// Balancer is a load balancer as vnet status shows it: its VIPs and
// listeners, and each backend's health and connections.
type Balancer struct {
	Site      string            `json:"site"`
	Name      string            `json:"name"`
	VIPs      []string          `json:"vips"`
	Listeners []string          `json:"listeners"` // "tcp 80 -> 8080"
	Checked   bool              `json:"health_checked"`
	Backends  []BalancerBackend `json:"backends"`
}

// BalancerBackend is one backend of a Balancer.
type BalancerBackend struct {
	VM    string   `json:"vm"`
	NIC   int      `json:"nic"`
	Host  string   `json:"host"`
	Addrs []string `json:"addrs"`
	// Health is up or down as its host's checks found it, unchecked
	// without a health check, unknown while its host has not reported.
	Health      string `json:"health"`
	Error       string `json:"error,omitempty"`
	Connections uint64 `json:"connections"` // sent by every client port
	Active      uint64 `json:"active"`
}
