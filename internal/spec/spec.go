// Package spec defines vnet's declarative description of a virtual
// infrastructure, reads it from YAML with the position of every field, and
// validates it. It knows nothing of the kernel: what the spec means on Linux
// is decided by package plan.
//
// What makes loading fast lives beside it: fastyaml parses the plain shape
// of large specs, speccache keeps validated specs in a binary form, and
// spectest generates specs for tests.
package spec

import (
	"strconv"

	"github.com/vnet-project/vnet/internal/units"
)

// Spec is one virtual infrastructure. Its Name prefixes everything vnet
// creates for it, so two infrastructures coexist on one machine.
type Spec struct {
	Name      string     `yaml:"name"`
	Hosts     []Host     `yaml:"hosts"`
	Switches  []Switch   `yaml:"switches"`
	VMs       []VM       `yaml:"vms"`
	HostPorts []HostPort `yaml:"hostports"`
	Networks  []Network  `yaml:"networks"`
}

// Host is a hypervisor host, or with Native set a physical machine whose
// workloads run on the host itself.
type Host struct {
	Name   string `yaml:"name"`
	Native bool   `yaml:"native" spec:"zero"`
	NICs   []NIC  `yaml:"nics"`
	// Underlay is the host's own IP address that its tunnels start and end
	// at, for switches that span hosts over VXLAN (docs/cluster.md).
	Underlay string `yaml:"underlay"`
}

// NIC is a physical NIC. In the lab it is a veth into the emulated physical
// switch, shaped to Speed in both directions.
type NIC struct {
	Name  string     `yaml:"name"`
	Speed units.Rate `yaml:"speed"`
	IP    string     `yaml:"ip"`  // only on native hosts: the machine's own address
	MTU   int        `yaml:"mtu"` // default: the largest MTU of the switches it serves, else 1500
	// Device names an existing interface of a real host (eth1) that this
	// NIC is: vnet enslaves it to the switch it is an uplink of and gives
	// it back as found, but never creates or deletes it. Realized by the
	// host agent only (docs/hosts.md).
	Device string `yaml:"device"`
	// Shared says that the device carries the machine's own traffic (its
	// default route, or addresses it uses) and is to be an uplink all the
	// same: its addresses stop serving the machine once it is a bridge
	// port. Without it, such a device is refused (plan.CheckHostFacts).
	Shared bool `yaml:"shared" spec:"zero"`
}

// IsDevice reports whether the NIC is an existing device of a real host.
func (n *NIC) IsDevice() bool { return n.Device != "" }

// Switch is a virtual switch. It is distributed when its uplinks map NICs of
// several hosts, and a private segment when it has no uplink at all.
type Switch struct {
	Name       string      `yaml:"name"`
	Hosts      []string    `yaml:"hosts"` // hosts without an uplink on this switch (private segments)
	MTU        int         `yaml:"mtu"`   // default 1500
	Uplinks    []Uplink    `yaml:"uplinks"`
	PortGroups []PortGroup `yaml:"portgroups"`
	IOC        *IOC        `yaml:"ioc"`
	Teaming    *Teaming    `yaml:"teaming"` // the default of its port groups
	VNI        int         `yaml:"vni"`     // its VXLAN network identifier between hosts; default derived from the infra and switch
}

// IOC is Network I/O Control on a switch's uplinks.
type IOC struct {
	Enabled bool                `yaml:"enabled" spec:"zero"`
	Pools   map[string]PoolSpec `yaml:"pools"` // system pools (overrides) and user pools
}

// PoolSpec is a resource pool's policy.
type PoolSpec struct {
	Shares      string     `yaml:"shares"`                  // low, normal, high or 1..100
	Limit       units.Rate `yaml:"limit"`                   // per host, across all the switch's uplinks
	Reservation units.Rate `yaml:"reservation" spec:"zero"` // 0: none
}

// Uplink binds one physical NIC per host to the switch.
type Uplink struct {
	Name string            `yaml:"name"`
	NICs map[string]string `yaml:"nics"` // host name -> NIC name
}

// PortGroup is a named group of switch ports sharing policy.
type PortGroup struct {
	Name     string         `yaml:"name"`
	Pool     string         `yaml:"pool"`     // the IOC pool of its traffic (default vm)
	Shaping  *Shaping       `yaml:"shaping"`  // per port, both directions
	Classify []ClassifyRule `yaml:"classify"` // rules that put some of its traffic in other pools
	Teaming  *Teaming       `yaml:"teaming"`  // fields it sets override the switch's
	Security *Security      `yaml:"security"` // see security.go
	ACL      *ACL           `yaml:"acl"`
	// Subnet is the port group's address range: its vNICs' ip must be in
	// it, and the CNI plugin allocates containers' addresses from it.
	// Gateway, in it, is the router the containers' default route goes
	// through; it is never allocated.
	Subnet  string `yaml:"subnet"`
	Gateway string `yaml:"gateway"`
	// LoadBalancers spread connections to a VIP over the port group's VMs
	// (loadbalancer.go).
	LoadBalancers []LoadBalancer `yaml:"loadBalancers"`
}

// Shaping is a port group's traffic shaper.
type Shaping struct {
	Egress  *Shaper `yaml:"egress"`  // from the VMs into the switch
	Ingress *Shaper `yaml:"ingress"` // from the switch to the VMs
}

// Shaper is a token bucket: Average over time, Peak for at most Burst bytes.
type Shaper struct {
	Average units.Rate `yaml:"average"`
	Peak    units.Rate `yaml:"peak"` // default: Average
	Burst   units.Size `yaml:"burst"`
}

// ClassifyRule matches IPv4 traffic of a port group and names its pool.
type ClassifyRule struct {
	Proto string `yaml:"proto"` // tcp, udp, icmp
	SPort int    `yaml:"sport"`
	DPort int    `yaml:"dport"`
	DSCP  *int   `yaml:"dscp"`
	Src   string `yaml:"src"` // prefix
	Dst   string `yaml:"dst"`
	Pool  string `yaml:"pool"`
}

// IOCEnabled reports whether the switch runs Network I/O Control.
func (s *Switch) IOCEnabled() bool { return s.IOC != nil && s.IOC.Enabled }

// PoolOf is the pool a port group's traffic belongs to.
func (pg *PortGroup) PoolOf() string {
	if pg.Pool == "" {
		return "vm"
	}
	return pg.Pool
}

// PortGroup returns the port group with that name and its switch.
func (s *Spec) PortGroup(name string) (*PortGroup, *Switch, bool) {
	for i := range s.Switches {
		for j := range s.Switches[i].PortGroups {
			if s.Switches[i].PortGroups[j].Name == name {
				return &s.Switches[i].PortGroups[j], &s.Switches[i], true
			}
		}
	}
	return nil, nil, false
}

// VM is a virtual machine: in the lab a network namespace with its own
// cgroup.
type VM struct {
	Name string  `yaml:"name"`
	Host string  `yaml:"host"`
	CPUs float64 `yaml:"cpus"` // CPU limit in cores; 0 means unlimited
	NICs []VNIC  `yaml:"nics"` // eth0, eth1, ... inside the VM, in this order
}

// MaxVNICs is how many vNICs a VM may have.
const MaxVNICs = 10

// VNIC is a virtual NIC on a port group or on a virtual network.
type VNIC struct {
	PortGroup string    `yaml:"portgroup"`
	Network   string    `yaml:"network"` // instead of a port group: an isolated virtual network (networks.go)
	IP        string    `yaml:"ip"`
	IP6       string    `yaml:"ip6"` // a network vNIC's IPv6 address, beside ip (networks.go)
	MAC       string    `yaml:"mac"` // default: derived from the infra, VM and index, stable
	MTU       int       `yaml:"mtu"` // default: the switch's MTU
	Offloads  *Offloads `yaml:"offloads"`
	Connected *bool     `yaml:"connected"` // false: the port exists but is cut from the switch (default true)
	// Attach, when set, makes the vNIC something that exists already
	// instead of a namespace of vnet's own (docs/hosts.md).
	Attach *Attach `yaml:"attach"`
	// Shaping, when set, is this vNIC's traffic shaper: each direction it
	// gives replaces its port group's for the vNIC (the CNI bandwidth
	// capability).
	Shaping *Shaping `yaml:"shaping"`
}

// Attach names what an existing VM or container brings as a vNIC: a TAP
// device its hypervisor opened, or its network namespace. Exactly one is
// set.
type Attach struct {
	Tap   string `yaml:"tap"`   // an existing TAP device on the host: it becomes the switch port
	Netns string `yaml:"netns"` // an existing network namespace (/run/netns/NAME): vnet puts the vNIC in it
	// Ifname is the vNIC's name inside the namespace (netns only); the
	// default is ethN, N its index. A container runtime chooses it.
	Ifname string `yaml:"ifname"`
	// Container is the runtime's ID of the container whose namespace or
	// TAP this is, and CNI the CNI network that attached the vNIC: the CNI
	// plugin finds its attachments by them (docs/containers.md).
	Container string `yaml:"container"`
	CNI       string `yaml:"cni"`
}

// TapName is the TAP device the vNIC is, or "".
func (n *VNIC) TapName() string {
	if n.Attach == nil {
		return ""
	}
	return n.Attach.Tap
}

// NetnsName is the existing namespace the vNIC goes into, or "".
func (n *VNIC) NetnsName() string {
	if n.Attach == nil {
		return ""
	}
	return n.Attach.Netns
}

// LinkName is the name of the i-th vNIC inside its VM: attach.ifname, else
// ethN. A TAP's is the TAP's.
func (n *VNIC) LinkName(i int) string {
	if n.Attach != nil && n.Attach.Ifname != "" {
		return n.Attach.Ifname
	}
	return "eth" + strconv.Itoa(i)
}

// ContainerOf is the runtime's ID of the container the VM is, from its
// vNICs' attach.container, or "".
func (vm *VM) ContainerOf() string {
	for _, n := range vm.NICs {
		if n.Attach != nil && n.Attach.Container != "" {
			return n.Attach.Container
		}
	}
	return ""
}

// Attached reports whether the VM brings its vNICs itself (QEMU or a
// container): then vnet makes no namespace or cgroup for it.
func (vm *VM) Attached() bool {
	for _, n := range vm.NICs {
		if n.Attach != nil {
			return true
		}
	}
	return false
}

// UsesRealHost reports whether the spec names existing devices or
// namespaces of a machine.
func (s *Spec) UsesRealHost() bool {
	if s.NamesDevices() {
		return true
	}
	for _, vm := range s.VMs {
		if vm.Attached() {
			return true
		}
	}
	return false
}

// NamesDevices reports whether a host's NIC is an existing device, which
// only a host's agent realizes: the lab emulates the physical network.
func (s *Spec) NamesDevices() bool {
	for _, h := range s.Hosts {
		for _, n := range h.NICs {
			if n.IsDevice() {
				return true
			}
		}
	}
	return false
}

// IsConnected reports whether the vNIC is attached to its port group.
func (n *VNIC) IsConnected() bool { return n.Connected == nil || *n.Connected }

// Offloads are the receive and segmentation offloads of a vNIC; an unset
// field leaves the kernel's default.
type Offloads struct {
	GRO *bool `yaml:"gro"`
	TSO *bool `yaml:"tso"`
}

// HostPort is an interface of the host itself on a port group, for system
// traffic (management, vMotion, storage).
type HostPort struct {
	Host      string `yaml:"host"`
	PortGroup string `yaml:"portgroup"`
	IP        string `yaml:"ip"`
	Name      string `yaml:"name"` // default vmk0, vmk1, ... per host in order
	MTU       int    `yaml:"mtu"`
}

// DefaultMTU is the MTU of anything that does not say otherwise.
const DefaultMTU = 1500

// SwitchHosts returns the hosts a switch exists on: those it has an uplink
// on, then those listed explicitly, each once.
func (s *Switch) SwitchHosts() []string {
	seen := map[string]bool{}
	var out []string
	add := func(h string) {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	for _, u := range s.Uplinks {
		for _, h := range sortedKeys(u.NICs) {
			add(h)
		}
	}
	for _, h := range s.Hosts {
		add(h)
	}
	return out
}

// OnHost reports whether the switch exists on the host: SwitchHosts
// without building the list, for callers that ask once per host.
func (s *Switch) OnHost(host string) bool {
	for _, u := range s.Uplinks {
		if _, ok := u.NICs[host]; ok {
			return true
		}
	}
	for _, h := range s.Hosts {
		if h == host {
			return true
		}
	}
	return false
}

// EffectiveMTU is the switch's MTU with the default applied.
func (s *Switch) EffectiveMTU() int {
	if s.MTU == 0 {
		return DefaultMTU
	}
	return s.MTU
}

// Lookup helpers used by the validator and the planner.

// Host returns the host with that name.
func (s *Spec) Host(name string) (*Host, bool) {
	for i := range s.Hosts {
		if s.Hosts[i].Name == name {
			return &s.Hosts[i], true
		}
	}
	return nil, false
}

// VM returns the VM with that name.
func (s *Spec) VM(name string) (*VM, bool) {
	for i := range s.VMs {
		if s.VMs[i].Name == name {
			return &s.VMs[i], true
		}
	}
	return nil, false
}

// NIC returns the host's NIC with that name.
func (h *Host) NIC(name string) (*NIC, bool) {
	for i := range h.NICs {
		if h.NICs[i].Name == name {
			return &h.NICs[i], true
		}
	}
	return nil, false
}

// PortGroupSwitch returns the switch that holds the port group.
func (s *Spec) PortGroupSwitch(pg string) (*Switch, bool) {
	for i := range s.Switches {
		for _, p := range s.Switches[i].PortGroups {
			if p.Name == pg {
				return &s.Switches[i], true
			}
		}
	}
	return nil, false
}

// HostPortName is the interface name of the i-th host port, with the default
// vmkN numbering counted per host.
func (s *Spec) HostPortName(i int) string {
	hp := s.HostPorts[i]
	if hp.Name != "" {
		return hp.Name
	}
	n := 0
	for j := 0; j < i; j++ {
		if s.HostPorts[j].Host == hp.Host && s.HostPorts[j].Name == "" {
			n++
		}
	}
	return defaultHostPortName(n)
}

func defaultHostPortName(n int) string { return "vmk" + strconv.Itoa(n) }
