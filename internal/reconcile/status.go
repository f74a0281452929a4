package reconcile

import (
	"strconv"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/units"
)

// Status is what exists of one infrastructure, as vnet status shows it.
type Status struct {
	Name       string         `json:"name"`
	Generation int            `json:"generation"`
	SpecFile   string         `json:"spec_file"`
	Hosts      []HostStatus   `json:"hosts"`
	Switches   []SwitchStatus `json:"switches"`
	VMs        []VMStatus     `json:"vms"`
	HostPorts  []PortStatus   `json:"hostports"`
	Drift      []string       `json:"drift,omitempty"` // what an apply would change
	// Security lists the ports with port security or an ACL, and their drops.
	Security []SecurityStatus `json:"security,omitempty"`
	// PortPolicy says how this machine enforces port policies: vnet's
	// tc/BPF programs, or nftables and why (with ports that have one).
	PortPolicy string `json:"port_policy,omitempty"`
	// Agent is the state of the infrastructure's agent when it teams
	// uplinks (filled in by the caller, which knows where agents run).
	Agent *AgentStatus `json:"agent,omitempty"`
}

// AgentStatus says whether failover and load-based teaming are being done.
type AgentStatus struct {
	Running bool   `json:"running"`
	PID     int    `json:"pid,omitempty"`
	Log     string `json:"log"`
}

// HostStatus is a host and its physical NICs.
type HostStatus struct {
	Name      string      `json:"name"`
	Namespace string      `json:"namespace"`
	Native    bool        `json:"native"`
	NICs      []NICStatus `json:"nics"`
}

// NICStatus is a physical NIC.
type NICStatus struct {
	Name   string     `json:"name"`
	Speed  units.Rate `json:"speed"`
	MAC    string     `json:"mac"`
	IP     string     `json:"ip,omitempty"`
	Uplink string     `json:"uplink_of,omitempty"` // switch it carries traffic for
	State  string     `json:"state"`
}

// SwitchStatus is a virtual switch.
type SwitchStatus struct {
	Name       string   `json:"name"`
	Type       string   `json:"type"` // distributed, standard or private
	Hosts      []string `json:"hosts"`
	Uplinks    []string `json:"uplinks"`
	PortGroups []string `json:"portgroups"`
}

// SwitchStatusOf is a switch as its spec describes it: the kernel holds
// nothing of a switch that status reports beyond that.
func SwitchStatusOf(sw *spec.Switch) SwitchStatus {
	ss := SwitchStatus{Name: sw.Name, Hosts: sw.SwitchHosts(), Type: switchType(sw), Uplinks: []string{}, PortGroups: []string{}}
	for _, u := range sw.Uplinks {
		ss.Uplinks = append(ss.Uplinks, u.Name)
	}
	for _, pg := range sw.PortGroups {
		ss.PortGroups = append(ss.PortGroups, pg.Name)
	}
	return ss
}

// VMStatus is a VM and its vNICs.
type VMStatus struct {
	Name      string       `json:"name"`
	Host      string       `json:"host"`
	Namespace string       `json:"namespace"`
	CPUs      float64      `json:"cpus,omitempty"`
	NICs      []PortStatus `json:"nics"`
}

// PortStatus is a vNIC or a host port.
type PortStatus struct {
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

// CountingObserver is a dataplane that, observing everything, returns the
// firewall counters it read on the way, by namespace: status then reads
// them only for a namespace left out.
type CountingObserver interface {
	ObserveCounting(infra string, hints []plan.Resource) ([]plan.Resource, map[string]map[string]map[string]uint64, error)
}

// Status describes an infrastructure from its spec and what is observed.
func (e *Engine) Status(doc *spec.Document) (*Status, error) {
	s := doc.Spec
	rec, err := e.lastRecord(s.Name)
	if err != nil {
		rec = nil
	}
	var last *spec.Spec // the record's, read once
	if sameSpec(rec, doc) {
		last = doc.Spec
	} else {
		last = e.specOf(rec)
	}
	hints := e.model(doc, nil, last)
	var counters map[string]map[string]map[string]uint64
	var observed []plan.Resource
	if co, ok := e.DP.(CountingObserver); ok {
		observed, counters, err = co.ObserveCounting(s.Name, hints)
	} else {
		observed, err = e.DP.Observe(s.Name, hints)
	}
	if err != nil {
		return nil, err
	}
	observed, _ = claimWith(e.listedIn(s.Name, rec), e.Store.ID(), s.Name, observed, nil)
	// Judge drift against the uplinks as they are: steering away from a
	// down uplink is the agent doing its job, not drift.
	assigned, down, ceils := plan.Assignments(observed), downUplinks(s, observed), plan.PoolCeils(observed)
	desired := hints
	if len(assigned) > 0 || len(down) > 0 || len(ceils) > 0 || hasSteer(hints) || !e.modelsAlike(last, doc) {
		desired = e.markOwn(s.Name, plan.Model(s, plan.Options{NumCPU: e.numCPU(), Teams: assigned, Down: down, PoolCeils: ceils,
			Now: time.Now().UTC().Truncate(time.Second), PortPrograms: e.portPrograms()}))
	}
	observed = plan.ResolveSteer(observed, desired)
	links := map[string]plan.End{}
	addrs := map[string]bool{}
	for _, r := range observed {
		switch r.Kind {
		case plan.KindVeth:
			links[r.A.NS+"/"+r.A.Name] = r.A
		case plan.KindAddr:
			addrs[r.NS+"/"+r.Link+"/"+r.CIDR] = true
		}
	}
	port := func(ns, name, ip string) (string, string) {
		end, ok := links[ns+"/"+name]
		switch {
		case !ok:
			return "", "missing"
		case end.Down:
			return end.MAC, "down"
		case ip != "" && !addrs[ns+"/"+name+"/"+ip]:
			return end.MAC, "no address"
		}
		return end.MAC, "up"
	}
	team := func(ps *PortStatus, id string) {
		if a, ok := assigned[id]; ok {
			ps.Uplink = a.Uplink
			ps.Why = string(a.Reason)
			if !a.Since.IsZero() {
				ps.Why += " at " + a.Since.Local().Format(time.DateTime)
			}
		}
	}
	st := &Status{Name: s.Name}
	if rec != nil {
		st.Generation, st.SpecFile = rec.Generation, rec.SpecFile
	}
	for _, h := range s.Hosts {
		ns := plan.NSName(s.Name, h.Name)
		hs := HostStatus{Name: h.Name, Namespace: ns, Native: h.Native}
		for _, n := range h.NICs {
			mac, state := port(ns, n.Name, n.IP)
			hs.NICs = append(hs.NICs, NICStatus{Name: n.Name, Speed: n.Speed, MAC: mac, IP: n.IP, State: state, Uplink: links[ns+"/"+n.Name].Master})
		}
		st.Hosts = append(st.Hosts, hs)
	}
	for i := range s.Switches {
		st.Switches = append(st.Switches, SwitchStatusOf(&s.Switches[i]))
	}
	for _, vm := range s.VMs {
		ns := plan.NSName(s.Name, vm.Name)
		vs := VMStatus{Name: vm.Name, Host: vm.Host, Namespace: ns, CPUs: vm.CPUs}
		for i, n := range vm.NICs {
			name := "eth" + strconv.Itoa(i)
			mac, state := port(ns, name, n.IP)
			if !n.IsConnected() && state == "up" {
				state = "disconnected"
			}
			ps := PortStatus{Name: name, PortGroup: n.PortGroup, Network: n.Network, MAC: mac, IP: n.IP, State: state}
			team(&ps, plan.PortID(vm.Name, name))
			vs.NICs = append(vs.NICs, ps)
		}
		st.VMs = append(st.VMs, vs)
	}
	for i, hp := range s.HostPorts {
		ns := plan.NSName(s.Name, hp.Host)
		name := s.HostPortName(i)
		mac, state := port(ns, name, hp.IP)
		ps := PortStatus{Host: hp.Host, Name: name, PortGroup: hp.PortGroup, MAC: mac, IP: hp.IP, State: state}
		team(&ps, plan.PortID(hp.Host, name))
		st.HostPorts = append(st.HostPorts, ps)
	}
	if st.Security, err = e.securityStatus(s, desired, counters); err != nil {
		return nil, err
	}
	if pp, ok := e.DP.(PortProgrammer); ok && len(st.Security) > 0 {
		_, st.PortPolicy = pp.PortPrograms()
	}
	for _, a := range plan.Diff(desired, observed).Actions {
		st.Drift = append(st.Drift, a.String())
	}
	return st, nil
}

// modelsAlike reports whether the model of doc that reads the host for
// status (model, with nothing observed) is the one status judges drift
// against when observation tells nothing: when no spec of another apply
// resets offloads in it, and the engine models every host alike.
func (e *Engine) modelsAlike(last *spec.Spec, doc *spec.Document) bool {
	return (last == nil || last == doc.Spec) && e.Host == "" && len(e.UplinksDown) == 0 && len(e.deviceSpeeds) == 0
}

// downUplinks are the uplinks whose NIC, or its physical switch port, is
// down, as "host/uplink".
func downUplinks(s *spec.Spec, observed []plan.Resource) map[string]bool {
	down := map[string]bool{}
	ends := map[string]plan.Resource{}
	for _, r := range observed {
		if r.Kind == plan.KindVeth {
			ends[r.A.NS+"/"+r.A.Name] = r
		}
	}
	for _, sw := range s.Switches {
		for _, u := range sw.Uplinks {
			for host, nic := range u.NICs {
				if r, ok := ends[plan.NSName(s.Name, host)+"/"+nic]; ok && (r.A.Down || r.B.Down) {
					down[host+"/"+u.Name] = true
				}
			}
		}
	}
	return down
}

func switchType(sw *spec.Switch) string {
	switch {
	case len(sw.Uplinks) == 0:
		return "private"
	case len(sw.SwitchHosts()) > 1:
		return "distributed"
	}
	return "standard"
}
