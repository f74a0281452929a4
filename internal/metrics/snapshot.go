// Package metrics reads an infrastructure's traffic counters (vNICs,
// uplinks, Network I/O Control pools), exposes them to Prometheus at scrape
// time, and keeps rings of samples from which rates over a window are
// averaged. It reads the kernel only through the Counting interface.
package metrics

import (
	"fmt"
	"sort"
	"time"

	"github.com/vnet-project/vnet/internal/ioc"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
)

// Counting is what reading counters needs from the dataplane.
type Counting interface {
	LinkStates(ns string) (map[string]status.Link, error)
	TCCounters(ns, link string) (map[uint32]plan.Counters, plan.Counters, error)
}

// FirewallCounting is what reading port security's counters needs; a
// dataplane without it has none to report.
type FirewallCounting interface {
	FirewallCounters(ns string) (map[string]map[string]uint64, error)
}

// Snapshot is every counter of one infrastructure at one moment.
type Snapshot struct {
	Infra    string           `json:"infra"`
	At       time.Time        `json:"at"`
	Ports    []PortSample     `json:"ports"`
	Uplinks  []UplinkSample   `json:"uplinks"`
	Pools    []PoolSample     `json:"pools"`
	Security []SecuritySample `json:"security,omitempty"`
	// Balancers are the load balancers' backends as the host's (or, on
	// one machine, every host's) client ports steer to them.
	Balancers []BalancerSample `json:"load_balancers,omitempty"`
}

// BalancerSample is one backend of a load balancer as one host's client
// ports see it: the connections they sent it from a VIP, those active
// now, and whether they send it new ones (its health as the host knows
// it).
type BalancerSample struct {
	Host    string `json:"host"`
	Site    string `json:"site"`
	LB      string `json:"lb"`
	VIP     string `json:"vip"`
	Backend string `json:"backend"` // its address
	Port    int    `json:"port"`
	Proto   string `json:"proto"`
	Total   uint64 `json:"connections"`
	Active  uint64 `json:"active"`
	Up      bool   `json:"up"`
}

// LBCounting is what reading the load balancers' counts needs; a dataplane
// without it has none to report.
type LBCounting interface {
	LBCounts(ns, port string) ([]status.BackendConns, error)
	LBDown(ns, port string) (string, error)
}

// SecuritySample is what the firewall rules of one vNIC's (or host port's)
// switch port counted, in packets, by label: a security check's drops
// (forged-mac, ip-spoof, arp-spoof, nd-spoof, stacked-vlan, ra-guard,
// not-for-mac), an ACL rule's matches (acl[N], allow or deny) and the ACL
// default's drops (acl-default). Only ports with a firewall have one.
type SecuritySample struct {
	Host      string            `json:"host"`
	VM        string            `json:"vm,omitempty"` // empty for a host port
	VNIC      string            `json:"vnic"`
	PortGroup string            `json:"portgroup"`
	Counters  map[string]uint64 `json:"counters"`
}

// PortSample is a VM's vNIC or a host port. Transmit is what the VM (or
// host) sends into its switch, receive what it gets from it.
type PortSample struct {
	Host      string `json:"host"`
	VM        string `json:"vm,omitempty"` // empty for a host port
	VNIC      string `json:"vnic"`
	PortGroup string `json:"portgroup"`
	Up        bool   `json:"up"`
	TxBytes   uint64 `json:"tx_bytes"`
	RxBytes   uint64 `json:"rx_bytes"`
	// TxDrops and RxDrops are the packets the vNIC dropped sending into
	// its switch and receiving from it.
	TxDrops uint64 `json:"tx_drops"`
	RxDrops uint64 `json:"rx_drops"`
}

// counting is the port with the link's counters.
func (p PortSample) counting(st status.Link) PortSample {
	p.TxBytes, p.RxBytes, p.TxDrops, p.RxDrops = st.TxBytes, st.RxBytes, st.TxDropped, st.RxDropped
	return p
}

// Key names the port within its infrastructure.
func (p PortSample) Key() string {
	if p.VM == "" {
		return p.Host + "/" + p.VNIC
	}
	return p.VM + "/" + p.VNIC
}

// UplinkSample is one host's NIC serving as a switch's uplink.
type UplinkSample struct {
	Host    string `json:"host"`
	Switch  string `json:"switch"`
	Uplink  string `json:"uplink"`
	NIC     string `json:"nic"`
	Line    uint64 `json:"line_bps"`
	Up      bool   `json:"up"`
	TxBytes uint64 `json:"tx_bytes"`
	RxBytes uint64 `json:"rx_bytes"`
}

// Key names the uplink within its infrastructure.
func (u UplinkSample) Key() string { return u.Host + "/" + u.Switch + "/" + u.Uplink }

// PoolSample is a Network I/O Control pool's class on one host's uplink:
// its policy as the spec gives it, the class that realizes it, and the
// class's counters (transmit only: pools divide an uplink's egress).
type PoolSample struct {
	Host        string        `json:"host"`
	Switch      string        `json:"switch"`
	Uplink      string        `json:"uplink"`
	NIC         string        `json:"nic"`
	Pool        string        `json:"pool"`
	Shares      int           `json:"shares"`
	Limit       uint64        `json:"limit_bps,omitempty"`       // per host, 0: none
	Reservation uint64        `json:"reservation_bps,omitempty"` // 0: none
	Assured     uint64        `json:"assured_bps"`               // the class's rate
	Ceil        uint64        `json:"ceil_bps"`                  // the class's ceiling
	Counters    plan.Counters `json:"counters"`
}

// Key names the pool's class within its infrastructure.
func (p PoolSample) Key() string { return p.Host + "/" + p.Switch + "/" + p.Uplink + "/" + p.Pool }

// Read takes one snapshot of an infrastructure's counters. A namespace
// that cannot be read fails the whole snapshot: an infrastructure half
// there is not one to report rates of.
func Read(c Counting, s *spec.Spec) (*Snapshot, error) {
	links := map[string]map[string]status.Link{}
	linksIn := func(ns string) (map[string]status.Link, error) {
		if m, ok := links[ns]; ok {
			return m, nil
		}
		m, err := c.LinkStates(ns)
		if err != nil {
			return nil, fmt.Errorf("read counters of %s: %w (is %s applied?)", ns, err, s.Name)
		}
		links[ns] = m
		return m, nil
	}
	linksOf := func(node string) (map[string]status.Link, error) { return linksIn(plan.NSName(s.Name, node)) }
	snap := &Snapshot{Infra: s.Name, At: time.Now().UTC()}
	for vi := range s.VMs {
		vm := &s.VMs[vi]
		for i, n := range vm.NICs {
			ns, link, tap := plan.VNICPlace(s.Name, vm, i)
			m, err := linksIn(ns)
			if err != nil {
				return nil, err
			}
			st := m[link]
			if tap { // the switch's side of the guest's vNIC
				st.TxBytes, st.RxBytes = st.RxBytes, st.TxBytes
				st.TxDropped, st.RxDropped = st.RxDropped, st.TxDropped
			}
			snap.Ports = append(snap.Ports, PortSample{Host: vm.Host, VM: vm.Name, VNIC: fmt.Sprintf("eth%d", i), PortGroup: n.PortGroup,
				Up: st.Up && n.IsConnected()}.counting(st))
		}
	}
	for i, hp := range s.HostPorts {
		m, err := linksOf(hp.Host)
		if err != nil {
			return nil, err
		}
		name := s.HostPortName(i)
		st := m[name]
		snap.Ports = append(snap.Ports, PortSample{Host: hp.Host, VNIC: name, PortGroup: hp.PortGroup, Up: st.Up}.counting(st))
	}
	for _, sw := range s.Switches {
		for _, u := range sw.Uplinks {
			for _, host := range sortedKeys(u.NICs) {
				m, err := linksOf(host)
				if err != nil {
					return nil, err
				}
				nicName := u.NICs[host]
				var line uint64
				if h, ok := s.Host(host); ok {
					if nic, ok := h.NIC(nicName); ok {
						line = uint64(nic.Speed)
					}
				}
				st := m[nicName]
				snap.Uplinks = append(snap.Uplinks, UplinkSample{Host: host, Switch: sw.Name, Uplink: u.Name, NIC: nicName, Line: line,
					Up: st.Up, TxBytes: st.TxBytes, RxBytes: st.RxBytes})
			}
		}
	}
	pools, err := readPools(c, s)
	if err != nil {
		return nil, err
	}
	snap.Pools = pools
	if fc, ok := c.(FirewallCounting); ok {
		if snap.Security, err = readSecurity(fc, s); err != nil {
			return nil, err
		}
	}
	if lc, ok := c.(LBCounting); ok && s.HasBalancers() {
		snap.Balancers = readBalancers(lc, s, "", "")
	}
	return snap, nil
}

// readSecurity reads each host's firewall counters once and gives them to
// the ports they belong to.
func readSecurity(fc FirewallCounting, s *spec.Spec) ([]SecuritySample, error) {
	byNS := map[string]map[string]map[string]uint64{}
	countersOf := func(host, link string) (map[string]uint64, error) {
		ns := plan.NSName(s.Name, host)
		m, ok := byNS[ns]
		if !ok {
			var err error
			if m, err = fc.FirewallCounters(ns); err != nil {
				return nil, fmt.Errorf("read firewall counters of %s: %w", ns, err)
			}
			byNS[ns] = m
		}
		return m[link], nil
	}
	var out []SecuritySample
	for vi := range s.VMs {
		vm := &s.VMs[vi]
		for i, n := range vm.NICs {
			c, err := countersOf(vm.Host, plan.SwitchPort(s.Name, vm, i))
			if err != nil {
				return nil, err
			}
			if c != nil {
				out = append(out, SecuritySample{Host: vm.Host, VM: vm.Name, VNIC: fmt.Sprintf("eth%d", i), PortGroup: n.PortGroup, Counters: c})
			}
		}
	}
	for i, hp := range s.HostPorts {
		name := s.HostPortName(i)
		c, err := countersOf(hp.Host, plan.HostPortSwitchPort(name))
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, SecuritySample{Host: hp.Host, VNIC: name, PortGroup: hp.PortGroup, Counters: c})
		}
	}
	return out, nil
}

func readPools(c Counting, s *spec.Spec) ([]PoolSample, error) {
	var out []PoolSample
	for _, u := range plan.IOCUplinks(s) {
		classes, _, err := c.TCCounters(u.NS, u.NIC)
		if err != nil {
			return nil, fmt.Errorf("read pool counters of %s/%s: %w (is %s applied?)", u.NS, u.NIC, err, s.Name)
		}
		sw, uplink := switchAndUplink(s, u.Switch, u.Host, u.NIC)
		policy := map[string]spec.PoolSpec{}
		shares := map[string]int{ioc.Unclassified: ioc.Normal}
		if sw != nil {
			for _, p := range sw.IOCPools() {
				shares[p.Name] = p.Shares
			}
			if sw.IOC != nil {
				policy = sw.IOC.Pools
			}
		}
		for _, cl := range u.Classes {
			ps := policy[cl.Pool]
			out = append(out, PoolSample{Host: u.Host, Switch: u.Switch, Uplink: uplink, NIC: u.NIC, Pool: cl.Pool,
				Shares: shares[cl.Pool], Limit: uint64(ps.Limit), Reservation: uint64(ps.Reservation),
				Assured: cl.Rate, Ceil: cl.Ceil, Counters: classes[cl.Minor]})
		}
	}
	return out, nil
}

// switchAndUplink finds a switch and the name of its uplink that is nic on host.
func switchAndUplink(s *spec.Spec, swName, host, nic string) (*spec.Switch, string) {
	for i := range s.Switches {
		sw := &s.Switches[i]
		if sw.Name != swName {
			continue
		}
		for _, u := range sw.Uplinks {
			if u.NICs[host] == nic {
				return sw, u.Name
			}
		}
		return sw, nic
	}
	return nil, nic
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
