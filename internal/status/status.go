package status

import "github.com/vnet-project/vnet/internal/units"

// Infra is what exists of one infrastructure, as vnet status shows it.
type Infra struct {
	Name       string   `json:"name"`
	Generation int      `json:"generation"`
	SpecFile   string   `json:"spec_file"`
	Hosts      []Host   `json:"hosts"`
	Switches   []Switch `json:"switches"`
	VMs        []VM     `json:"vms"`
	HostPorts  []Port   `json:"hostports"`
	Drift      []string `json:"drift,omitempty"` // what an apply would change
	// Security lists the ports with port security or an ACL, and their drops.
	Security []PortSecurity `json:"security,omitempty"`
	// PortPolicy says how this machine enforces port policies: vnet's
	// tc/BPF programs, or nftables and why (with ports that have one).
	PortPolicy string `json:"port_policy,omitempty"`
	// Balancers are the load balancers, with their backends' health and
	// connections.
	Balancers []Balancer `json:"load_balancers,omitempty"`
	// Agent is the state of the infrastructure's agent when it teams
	// uplinks (filled in by the caller, which knows where agents run).
	Agent *Agent `json:"agent,omitempty"`
}

// Agent says whether failover and load-based teaming are being done.
type Agent struct {
	Running bool   `json:"running"`
	PID     int    `json:"pid,omitempty"`
	Log     string `json:"log"`
}

// Host is a host and its physical NICs.
type Host struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Native    bool   `json:"native"`
	NICs      []NIC  `json:"nics"`
}

// NIC is a physical NIC.
type NIC struct {
	Name   string     `json:"name"`
	Speed  units.Rate `json:"speed"`
	MAC    string     `json:"mac"`
	IP     string     `json:"ip,omitempty"`
	Uplink string     `json:"uplink_of,omitempty"` // switch it carries traffic for
	State  string     `json:"state"`
}

// Switch is a virtual switch.
type Switch struct {
	Name       string   `json:"name"`
	Type       string   `json:"type"` // distributed, standard or private
	Hosts      []string `json:"hosts"`
	Uplinks    []string `json:"uplinks"`
	PortGroups []string `json:"portgroups"`
}

// VM is a VM and its vNICs.
type VM struct {
	Name      string  `json:"name"`
	Host      string  `json:"host"`
	Namespace string  `json:"namespace"`
	CPUs      float64 `json:"cpus,omitempty"`
	NICs      []Port  `json:"nics"`
}

// Port is a vNIC or a host port.
type Port struct {
	Host      string `json:"host,omitempty"`
	Name      string `json:"name"`
	PortGroup string `json:"portgroup"`
	Network   string `json:"network,omitempty"` // a vNIC's virtual network
	MAC       string `json:"mac"`
	IP        string `json:"ip,omitempty"`
	State     string `json:"state"`
	// Uplink carries the port's traffic when its switch teams several on
	// the host; Why says how it got there (pinned, hashed, moved by LBT
	// at a time, failover).
	Uplink string `json:"uplink,omitempty"`
	Why    string `json:"why,omitempty"`
}

// PortSecurity is one switch port's firewall: its policy in short and
// what its rules counted (packets), by label: forged-mac, ip-spoof,
// arp-spoof, nd-spoof, stacked-vlan, ra-guard, not-for-mac (unicast for
// another MAC), acl[N] (the port group's rule N, allow or deny) and
// acl-default.
type PortSecurity struct {
	Port      string `json:"port"` // "web1 eth0" or "esx1 vmk0"
	PortGroup string `json:"portgroup"`
	Link      string `json:"link"` // the switch-side port in the host namespace
	Policy    string `json:"policy"`
	// By is what enforces the policy: "tc/BPF" (programs on the port) or
	// "nftables".
	By       string            `json:"by,omitempty"`
	Counters map[string]uint64 `json:"counters,omitempty"`
}
