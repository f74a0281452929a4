package metrics

import (
	"fmt"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
)

// ReadHost takes one snapshot of what one host of a cluster realizes of an
// infrastructure, as its agent sees it: the vNICs of the VMs placed on it,
// each in its own namespace, and the host's NICs that the spec makes
// uplinks, read in hostNS (plan.CurrentNS: the agent's own) where a NIC of
// that name exists. A host's NICs are the machine's own, which vnet does
// not shape, so there are no pool classes to read.
func ReadHost(c Counting, s *spec.Spec, host, hostNS string) (*Snapshot, error) {
	snap := &Snapshot{Infra: s.Name, At: time.Now().UTC(), Ports: []PortSample{}, Uplinks: []UplinkSample{}, Pools: []PoolSample{}}
	for _, vm := range s.VMs {
		if vm.Host != host {
			continue
		}
		ns := plan.NSName(s.Name, vm.Name)
		if vm.Attached() {
			// A container's namespace holds its vNICs; a QEMU guest's are
			// inside the guest, out of reach.
			ns = vm.NICs[0].NetnsName()
			if ns == "" {
				continue
			}
		}
		m, err := c.LinkStates(ns)
		if err != nil {
			return nil, fmt.Errorf("read counters of %s: %w (has the agent realized %s?)", ns, err, s.Name)
		}
		for i, n := range vm.NICs {
			name := fmt.Sprintf("eth%d", i)
			st := m[n.LinkName(i)]
			snap.Ports = append(snap.Ports, PortSample{Host: host, VM: vm.Name, VNIC: name, PortGroup: n.PortGroup,
				Up: st.Up && n.IsConnected()}.counting(st))
		}
	}
	if fc, ok := c.(FirewallCounting); ok {
		sec, err := readHostSecurity(fc, s, host, hostNS)
		if err != nil {
			return nil, err
		}
		snap.Security = sec
	}
	if lc, ok := c.(LBCounting); ok && s.HasBalancers() {
		snap.Balancers = readBalancers(lc, s, host, hostNS)
	}
	h, ok := s.Host(host)
	if !ok {
		return snap, nil
	}
	var links map[string]status.Link
	for _, sw := range s.Switches {
		for _, u := range sw.Uplinks {
			nicName, ok := u.NICs[host]
			if !ok {
				continue
			}
			if links == nil {
				var err error
				if links, err = c.LinkStates(hostNS); err != nil {
					return nil, fmt.Errorf("read counters of host %s: %w", host, err)
				}
			}
			st, ok := links[nicName]
			if !ok {
				continue
			}
			var line uint64
			if nic, ok := h.NIC(nicName); ok {
				line = uint64(nic.Speed)
			}
			snap.Uplinks = append(snap.Uplinks, UplinkSample{Host: host, Switch: sw.Name, Uplink: u.Name, NIC: nicName, Line: line,
				Up: st.Up, TxBytes: st.TxBytes, RxBytes: st.RxBytes})
		}
	}
	return snap, nil
}

// readHostSecurity reads what the firewall rules of the host's vNICs'
// switch ports counted: their ports are in hostNS, a TAP under its own
// name.
func readHostSecurity(fc FirewallCounting, s *spec.Spec, host, hostNS string) ([]SecuritySample, error) {
	var counters map[string]map[string]uint64
	var out []SecuritySample
	for _, vm := range s.VMs {
		if vm.Host != host {
			continue
		}
		for i, n := range vm.NICs {
			if counters == nil {
				var err error
				if counters, err = fc.FirewallCounters(hostNS); err != nil {
					return nil, fmt.Errorf("read firewall counters of host %s: %w", host, err)
				}
			}
			port := plan.VNICPortName(s.Name, vm.Name, i)
			if tap := n.TapName(); tap != "" {
				port = tap
			}
			if c := counters[port]; c != nil {
				out = append(out, SecuritySample{Host: host, VM: vm.Name, VNIC: fmt.Sprintf("eth%d", i), PortGroup: n.PortGroup, Counters: c})
			}
		}
	}
	return out, nil
}
