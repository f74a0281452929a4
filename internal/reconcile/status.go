package reconcile

import (
	"strconv"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
)

// SwitchStatusOf is a switch as its spec describes it: the kernel holds
// nothing of a switch that status reports beyond that.
func SwitchStatusOf(sw *spec.Switch) status.Switch {
	ss := status.Switch{Name: sw.Name, Hosts: sw.SwitchHosts(), Type: switchType(sw), Uplinks: []string{}, PortGroups: []string{}}
	for _, u := range sw.Uplinks {
		ss.Uplinks = append(ss.Uplinks, u.Name)
	}
	for _, pg := range sw.PortGroups {
		ss.PortGroups = append(ss.PortGroups, pg.Name)
	}
	return ss
}

// CountingObserver is a dataplane that, observing everything, returns the
// firewall counters it read on the way, by namespace: status then reads
// them only for a namespace left out.
type CountingObserver interface {
	ObserveCounting(infra string, hints []plan.Resource) ([]plan.Resource, map[string]map[string]map[string]uint64, error)
}

// status.Infra describes an infrastructure from its spec and what is observed.
func (e *Engine) Status(doc *spec.Document) (*status.Infra, error) {
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
	paused := e.wantPaused(rec)
	hints := e.model(doc, nil, last, paused)
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
			Now: time.Now().UTC().Truncate(time.Second), PortPrograms: e.portPrograms(), Paused: paused}))
	}
	observed = plan.ResolveSteer(observed, desired)
	links := map[string]plan.End{}
	switchSide := map[string]plan.End{} // the other end of each link's pair
	addrs := map[string]bool{}
	for _, r := range observed {
		switch r.Kind {
		case plan.KindVeth:
			links[r.A.NS+"/"+r.A.Name] = r.A
			switchSide[r.A.NS+"/"+r.A.Name] = r.B
			if r.B.Name != "" {
				links[r.B.NS+"/"+r.B.Name] = r.B // a container's vNIC
			}
		case plan.KindDevice:
			links[r.NS+"/"+r.Name] = plan.End{NS: r.NS, Name: r.Name} // a guest's TAP
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
	// A paused port's switch-side end is down (plan.Paused); until it
	// is, the port is as it is, and drift says what an apply would do.
	pausedState := func(ns, name, state string) string {
		if end, ok := switchSide[ns+"/"+name]; ok && end.Down && state != "missing" {
			return "paused"
		}
		return state
	}
	team := func(ps *status.Port, id string) {
		if a, ok := assigned[id]; ok {
			ps.Uplink = a.Uplink
			ps.Why = string(a.Reason)
			if !a.Since.IsZero() {
				ps.Why += " at " + a.Since.Local().Format(time.DateTime)
			}
		}
	}
	st := &status.Infra{Name: s.Name}
	if rec != nil {
		st.Generation, st.SpecFile = rec.Generation, rec.SpecFile
	}
	st.Paused = []string(paused)
	st.Networks = NetworksOf(s)
	for _, h := range s.Hosts {
		ns := plan.NSName(s.Name, h.Name)
		hs := status.Host{Name: h.Name, Namespace: ns, Native: h.Native}
		for _, n := range h.NICs {
			mac, state := port(ns, n.Name, n.IP)
			hs.NICs = append(hs.NICs, status.NIC{Name: n.Name, Speed: n.Speed, MAC: mac, IP: n.IP, State: state, Uplink: links[ns+"/"+n.Name].Master})
		}
		st.Hosts = append(st.Hosts, hs)
	}
	for i := range s.Switches {
		st.Switches = append(st.Switches, SwitchStatusOf(&s.Switches[i]))
	}
	for i := range s.VMs {
		vm := &s.VMs[i]
		vs := status.VM{Name: vm.Name, Host: vm.Host, CPUs: vm.CPUs}
		if !vm.Attached() {
			vs.Namespace = plan.NSName(s.Name, vm.Name)
		}
		for i, n := range vm.NICs {
			name := "eth" + strconv.Itoa(i)
			ns, link, tap := plan.VNICPlace(s.Name, vm, i)
			if !tap {
				vs.Namespace = ns // a container's, or the VM's own
			}
			ip := n.IP
			if tap {
				ip = "" // the guest's to configure: vnet cannot see it
			}
			mac, state := port(ns, link, ip)
			if tap && mac == "" && state != "missing" {
				mac = n.MAC
			}
			if !n.IsConnected() && state == "up" {
				state = "disconnected"
			} else if paused.VNIC(vm.Name, &n) {
				state = pausedState(ns, link, state)
			}
			ps := status.Port{Name: name, PortGroup: n.PortGroup, Network: n.Network, MAC: mac, IP: n.IP, State: state}
			team(&ps, plan.PortID(vm.Name, name))
			vs.NICs = append(vs.NICs, ps)
		}
		st.VMs = append(st.VMs, vs)
	}
	for i, hp := range s.HostPorts {
		ns := plan.NSName(s.Name, hp.Host)
		name := s.HostPortName(i)
		mac, state := port(ns, name, hp.IP)
		if paused.HostPort(hp.PortGroup) {
			state = pausedState(ns, name, state)
		}
		ps := status.Port{Host: hp.Host, Name: name, PortGroup: hp.PortGroup, MAC: mac, IP: hp.IP, State: state}
		team(&ps, plan.PortID(hp.Host, name))
		st.HostPorts = append(st.HostPorts, ps)
	}
	if st.Security, err = e.securityStatus(s, desired, counters); err != nil {
		return nil, err
	}
	if pp, ok := e.DP.(PortProgrammer); ok && len(st.Security) > 0 {
		_, st.PortPolicy = pp.PortPrograms()
	}
	st.Balancers = e.balancerStatus(s)
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

// NetworksOf are a spec's virtual networks as status reports them: the
// spec holds all there is to say of them, the VNI pinned with it.
func NetworksOf(s *spec.Spec) []status.Network {
	var out []status.Network
	for i := range s.Networks {
		n := &s.Networks[i]
		vms := 0
		for _, vm := range s.VMs {
			for _, nic := range vm.NICs {
				if nic.Network == n.Name {
					vms++
					break
				}
			}
		}
		hosts := s.NetworkHosts(n.Name)
		if hosts == nil {
			hosts = []string{}
		}
		out = append(out, status.Network{Name: n.Name, VNI: n.VNI, Subnet: n.Subnet, Subnet6: n.Subnet6, Router: n.Router,
			PortGroup: n.PortGroup, Hosts: hosts, VMs: vms})
	}
	return out
}
