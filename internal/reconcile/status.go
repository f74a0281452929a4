package reconcile

import (
	"strconv"

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
	MAC       string `json:"mac"`
	IP        string `json:"ip,omitempty"`
	State     string `json:"state"`
}

// Status describes an infrastructure from its spec and what is observed.
func (e *Engine) Status(doc *spec.Document) (*Status, error) {
	s := doc.Spec
	desired := e.model(doc)
	observed, err := e.DP.Observe(s.Name, desired)
	if err != nil {
		return nil, err
	}
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
		case ip != "" && !addrs[ns+"/"+name+"/"+ip]:
			return end.MAC, "no address"
		}
		return end.MAC, "up"
	}
	st := &Status{Name: s.Name}
	if rec, err := e.Store.Get(s.Name); err == nil {
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
	for _, sw := range s.Switches {
		ss := SwitchStatus{Name: sw.Name, Hosts: sw.SwitchHosts(), Type: switchType(&sw)}
		for _, u := range sw.Uplinks {
			ss.Uplinks = append(ss.Uplinks, u.Name)
		}
		for _, pg := range sw.PortGroups {
			ss.PortGroups = append(ss.PortGroups, pg.Name)
		}
		st.Switches = append(st.Switches, ss)
	}
	for _, vm := range s.VMs {
		ns := plan.NSName(s.Name, vm.Name)
		vs := VMStatus{Name: vm.Name, Host: vm.Host, Namespace: ns, CPUs: vm.CPUs}
		for i, n := range vm.NICs {
			name := "eth" + strconv.Itoa(i)
			mac, state := port(ns, name, n.IP)
			vs.NICs = append(vs.NICs, PortStatus{Name: name, PortGroup: n.PortGroup, MAC: mac, IP: n.IP, State: state})
		}
		st.VMs = append(st.VMs, vs)
	}
	for i, hp := range s.HostPorts {
		ns := plan.NSName(s.Name, hp.Host)
		name := s.HostPortName(i)
		mac, state := port(ns, name, hp.IP)
		st.HostPorts = append(st.HostPorts, PortStatus{Host: hp.Host, Name: name, PortGroup: hp.PortGroup, MAC: mac, IP: hp.IP, State: state})
	}
	for _, a := range plan.Diff(desired, observed).Actions {
		st.Drift = append(st.Drift, a.String())
	}
	return st, nil
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
