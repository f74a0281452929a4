package plan

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/vnet-project/vnet/internal/spec"
)

// LinkFacts is what the host says of one of its links that a spec names.
type LinkFacts struct {
	Type   string // the kernel's link kind: "tuntap", "veth", "device" (a physical NIC), ...
	Tap    bool   // a TAP (not a TUN) device
	Master string // the link it is a port of, or ""
	// MasterAlias is the alias of Master, which says whether the bridge is
	// one of vnet's (OwnedBy).
	MasterAlias string
	Alias       string
	Speed       uint64 // bit/s as the device reports it (ethtool); 0: none
	// Addresses are the link's own global addresses (not link-local),
	// and DefaultRoute whether a default route of the main table leaves
	// through it: the machine's own traffic uses the link.
	Addresses    []string
	DefaultRoute bool
}

// OwnTraffic describes what of the machine's own traffic the link carries,
// "" when none.
func (lf LinkFacts) OwnTraffic() string {
	var what []string
	if lf.DefaultRoute {
		what = append(what, "the default route")
	}
	if len(lf.Addresses) > 0 {
		what = append(what, "the addresses "+strings.Join(lf.Addresses, ", "))
	}
	return strings.Join(what, " and ")
}

// HostFacts is what the host's agent reads of the machine before it plans
// the host's part of a spec: the links and namespaces the spec names.
type HostFacts struct {
	Links        map[string]LinkFacts // by name, in the host's namespace; a missing name does not exist
	Netns        map[string]bool      // namespaces that exist, of those named by attach: netns
	UnderlayLink string               // the link holding the host's underlay address, "" when none
}

// HostNames lists what a host's part of the spec needs of the machine: the
// devices and TAPs in its namespace, and the namespaces vNICs attach to.
// Of the VMs, only those checked does (see CheckedVMs).
func HostNames(s *spec.Spec, host string, checked func(vm *spec.VM) bool) (links, namespaces []string) {
	if h, ok := s.Host(host); ok {
		for _, n := range h.NICs {
			if n.IsDevice() {
				links = append(links, n.Device)
			}
		}
	}
	for i := range s.VMs {
		vm := &s.VMs[i]
		if vm.Host != host || !checked(vm) {
			continue
		}
		for _, n := range vm.NICs {
			if t := n.TapName(); t != "" {
				links = append(links, t)
			}
			if ns := n.NetnsName(); ns != "" {
				namespaces = append(namespaces, ns)
			}
		}
	}
	return links, namespaces
}

// CheckHostFacts checks the real devices, TAPs and namespaces that the
// host's part of the spec names against what the machine has. Each error
// names the spec field. It returns the line rates of the devices whose NIC
// gives no speed, for Options.DeviceSpeeds.
// Of the VMs, only those checked does: f need hold no other VM's names.
func CheckHostFacts(doc *spec.Document, host string, f HostFacts, checked func(vm *spec.VM) bool) (map[string]uint64, error) {
	s := doc.Spec
	var errs spec.Errors
	speeds := map[string]uint64{}
	usable := func(path, name, what string) (LinkFacts, bool) {
		lf, ok := f.Links[name]
		switch {
		case !ok:
			errs = append(errs, doc.Errorf(path, "%s %q does not exist on host %s", what, name, host))
			return lf, false
		case lf.Master != "" && !OwnedBy(lf.MasterAlias, s.Name):
			errs = append(errs, doc.Errorf(path, "%s %s is a port of %s already, which vnet did not make for %s: take it out first (ip link set %s nomaster)", what, name, lf.Master, s.Name, name))
			return lf, false
		case IsDeviceAlias(lf.Alias) && !OwnedBy(lf.Alias, s.Name):
			errs = append(errs, doc.Errorf(path, "%s %s is used by another infrastructure (%s)", what, name, lf.Alias))
			return lf, false
		}
		return lf, true
	}
	for i := range s.Hosts {
		h := &s.Hosts[i]
		if h.Name != host {
			continue
		}
		for j, n := range h.NICs {
			if !n.IsDevice() {
				continue
			}
			p := fmt.Sprintf("hosts[%d].nics[%d]", i, j)
			lf, ok := usable(p+".device", n.Device, "device")
			if !ok {
				continue
			}
			if n.Device == f.UnderlayLink {
				errs = append(errs, doc.Errorf(p+".device", "device %s carries host %s's underlay address %s, which its tunnels need: give the switch another NIC", n.Device, host, h.Underlay))
				continue
			}
			if own := lf.OwnTraffic(); own != "" && !n.Shared {
				// A bridge port's addresses no longer serve the machine:
				// made an uplink, the device would cut it off.
				errs = append(errs, doc.Errorf(p+".device", "device %s carries this machine's own traffic (%s), which would stop once it is a switch's uplink: give the switch another NIC, or set shared: true to take it all the same", n.Device, own))
				continue
			}
			if n.Speed == 0 {
				if lf.Speed == 0 {
					errs = append(errs, doc.Errorf(p+".speed", "device %s reports no speed (a %s); give the NIC a line rate, e.g. speed: 10Gbit", n.Device, lf.Type))
					continue
				}
				speeds[n.Device] = lf.Speed
			}
		}
	}
	for i := range s.VMs {
		vm := &s.VMs[i]
		if vm.Host != host || !checked(vm) {
			continue
		}
		for j, n := range vm.NICs {
			p := fmt.Sprintf("vms[%d].nics[%d].attach", i, j)
			if t := n.TapName(); t != "" {
				if lf, ok := usable(p+".tap", t, "TAP device"); ok && !lf.Tap {
					errs = append(errs, doc.Errorf(p+".tap", "%s is a %s, not a TAP device", t, lf.Type))
				}
				if sw, _ := s.PortGroupSwitch(n.PortGroup); n.MAC == "" && n.IsConnected() && sw != nil && realUplinks(s, sw, host) > 1 {
					errs = append(errs, doc.Errorf(fmt.Sprintf("vms[%d].nics[%d]", i, j), "TAP %s has no mac:, but switch %s teams %d real uplinks on host %s, whose steering needs each port's MAC: give the guest's MAC (mac: 52:54:00:...)", t, sw.Name, realUplinks(s, sw, host), host))
				}
			}
			if ns := n.NetnsName(); ns != "" && !f.Netns[ns] {
				errs = append(errs, doc.Errorf(p+".netns", "namespace %q does not exist on host %s (ip netns list)", ns, host))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return speeds, nil
}

// realUplinks counts the switch's attached uplinks on the host that are
// real devices.
func realUplinks(s *spec.Spec, sw *spec.Switch, host string) int {
	h, ok := s.Host(host)
	if !ok {
		return 0
	}
	n := 0
	for _, u := range attachedUplinks(sw, host) {
		if nic, ok := h.NIC(u.NICs[host]); ok && nic.IsDevice() {
			n++
		}
	}
	return n
}

// AllVMs checks every VM's names (HostNames, CheckHostFacts).
func AllVMs(*spec.VM) bool { return true }

// NoVMs checks no VM's names, only the host's real NICs.
func NoVMs(*spec.VM) bool { return false }

// CheckedVMs returns which VMs of next a check of the host's names must
// look at when last, a spec whose names were checked on the host, was
// applied there: those new or changed since. The others' TAPs and
// namespaces were there, and what became of them since is drift, which a
// full check finds. A change of the hosts or switches, which the checks
// of a TAP depend on, checks all of them; so does no last spec.
func CheckedVMs(last, next *spec.Spec) func(vm *spec.VM) bool {
	if last == nil || !reflect.DeepEqual(last.Hosts, next.Hosts) || !reflect.DeepEqual(last.Switches, next.Switches) {
		return AllVMs
	}
	was := make(map[string]*spec.VM, len(last.VMs))
	for i := range last.VMs {
		was[last.VMs[i].Name] = &last.VMs[i]
	}
	return func(vm *spec.VM) bool {
		old, ok := was[vm.Name]
		return !ok || old.Host != vm.Host || !sameNICs(old.NICs, vm.NICs)
	}
}

// sameNICs reports whether two VMs' vNICs are the same: one slice, as an
// edit of other VMs leaves a VM's (spec.EditVMs), which a check of every
// VM at each container's ADD then does not compare field by field, or
// equal ones.
func sameNICs(a, b []spec.VNIC) bool {
	if len(a) == len(b) && len(a) > 0 && &a[0] == &b[0] {
		return true
	}
	return reflect.DeepEqual(a, b)
}
