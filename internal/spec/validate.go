package spec

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
)

var (
	// Object names become parts of namespace names and cgroup paths.
	objectName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	// Names that become Linux interface names inside a namespace.
	ifaceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
)

const (
	maxObjectName = 32
	maxIfaceName  = 15 // IFNAMSIZ - 1
	maxInfraName  = 20
	minMTU        = 68
	maxMTU        = 65535
)

// Validate checks everything that can be checked without the kernel: names,
// references between objects, addresses, MTUs. It returns every problem.
func Validate(doc *Document) Errors {
	v := &validator{doc: doc, s: doc.Spec}
	v.run()
	sortErrors(v.errs)
	return v.errs
}

type validator struct {
	doc  *Document
	s    *Spec
	errs Errors
	ips  map[netip.Addr]string // address -> path that first used it
	macs map[string]string
}

func (v *validator) errf(path, format string, args ...any) {
	v.errs = append(v.errs, v.doc.Errorf(path, format, args...))
}

func (v *validator) run() {
	v.ips = map[netip.Addr]string{}
	v.macs = map[string]string{}
	v.checkName("name", v.s.Name, maxInfraName, objectName, "an infrastructure")
	v.checkHosts()
	v.checkSwitches()
	v.checkVMs()
	v.checkHostPorts()
	v.checkIfaceNamesPerHost()
	v.checkSecurity()
}

func (v *validator) checkName(path, name string, maxLen int, re *regexp.Regexp, what string) bool {
	switch {
	case name == "":
		v.errf(path, "%s needs a name", what)
	case len(name) > maxLen:
		v.errf(path, "name %q is longer than %d characters", name, maxLen)
	case !re.MatchString(name):
		if re == objectName {
			v.errf(path, "name %q: use lower-case letters, digits and inner dashes", name)
		} else {
			v.errf(path, "name %q is not a valid interface name", name)
		}
	default:
		return true
	}
	return false
}

func (v *validator) checkHosts() {
	seen := map[string]string{}
	for i, h := range v.s.Hosts {
		p := fmt.Sprintf("hosts[%d]", i)
		if v.checkName(p+".name", h.Name, maxObjectName, objectName, "a host") {
			v.unique(seen, h.Name, p+".name", "host")
		}
		nics := map[string]string{}
		for j, n := range h.NICs {
			np := fmt.Sprintf("%s.nics[%d]", p, j)
			if v.checkName(np+".name", n.Name, maxIfaceName, ifaceName, "a NIC") {
				v.unique(nics, n.Name, np+".name", "NIC")
			}
			if n.Speed == 0 {
				v.errf(np+".speed", "a NIC needs a line rate, e.g. speed: 1Gbit")
			}
			if n.IP != "" {
				if !h.Native {
					v.errf(np+".ip", "only a native host's NIC carries an address; a hypervisor host's NIC is an uplink (give the host a hostport instead)")
				} else {
					v.checkCIDR(np+".ip", n.IP)
				}
			}
			v.checkMTU(np+".mtu", n.MTU)
		}
	}
}

func (v *validator) checkSwitches() {
	seenSw := map[string]string{}
	seenPG := map[string]string{}
	nicOwner := map[string]string{} // host/nic -> path of the uplink that binds it
	for i, sw := range v.s.Switches {
		p := fmt.Sprintf("switches[%d]", i)
		if v.checkName(p+".name", sw.Name, maxIfaceName, ifaceName, "a switch") {
			v.unique(seenSw, sw.Name, p+".name", "switch")
		}
		v.checkMTU(p+".mtu", sw.MTU)
		for j, h := range sw.Hosts {
			v.checkSwitchHost(fmt.Sprintf("%s.hosts[%d]", p, j), h)
		}
		upNames := map[string]string{}
		for j, u := range sw.Uplinks {
			up := fmt.Sprintf("%s.uplinks[%d]", p, j)
			if v.checkName(up+".name", u.Name, maxObjectName, ifaceName, "an uplink") {
				v.unique(upNames, u.Name, up+".name", "uplink")
			}
			if len(u.NICs) == 0 {
				v.errf(up+".nics", "an uplink maps at least one host to a NIC, e.g. nics: {esx1: vmnic0}")
			}
			for _, hn := range sortedKeys(u.NICs) {
				v.checkUplinkNIC(joinPath(up+".nics", hn), hn, u.NICs[hn], &sw, nicOwner)
			}
		}
		if len(sw.Uplinks) == 0 && len(sw.Hosts) == 0 {
			v.errf(p, "switch %q is on no host: give it uplinks, or hosts: [...] for a private segment", sw.Name)
		}
		for j, pg := range sw.PortGroups {
			pp := fmt.Sprintf("%s.portgroups[%d].name", p, j)
			if v.checkName(pp, pg.Name, maxObjectName, objectName, "a port group") {
				v.unique(seenPG, pg.Name, pp, "port group (port group names are global)")
			}
		}
		v.checkIOC(i, &v.s.Switches[i])
		v.checkTeams(i, &v.s.Switches[i])
	}
}

func (v *validator) checkSwitchHost(path, name string) {
	h, ok := v.s.Host(name)
	switch {
	case !ok:
		v.errf(path, "unknown host %q", name)
	case h.Native:
		v.errf(path, "host %q is native: it has no virtual switches", name)
	}
}

func (v *validator) checkUplinkNIC(path, hostName, nicName string, sw *Switch, owner map[string]string) {
	h, ok := v.s.Host(hostName)
	if !ok {
		v.errf(path, "unknown host %q", hostName)
		return
	}
	if h.Native {
		v.errf(path, "host %q is native: it has no virtual switches", hostName)
		return
	}
	n, ok := h.NIC(nicName)
	if !ok {
		v.errf(path, "host %q has no NIC %q", hostName, nicName)
		return
	}
	key := hostName + "/" + nicName
	if prev, dup := owner[key]; dup {
		v.errf(path, "NIC %s is already an uplink at %s", key, prev)
		return
	}
	owner[key] = path
	if n.MTU != 0 && n.MTU < sw.EffectiveMTU() {
		v.errf(path, "NIC %s has mtu %d, smaller than switch %q's mtu %d", key, n.MTU, sw.Name, sw.EffectiveMTU())
	}
}

func (v *validator) checkVMs() {
	seen := map[string]string{}
	for i, vm := range v.s.VMs {
		p := fmt.Sprintf("vms[%d]", i)
		if v.checkName(p+".name", vm.Name, maxObjectName, objectName, "a VM") {
			if _, clash := v.s.Host(vm.Name); clash {
				v.errf(p+".name", "VM %q has the name of a host; vnet exec could not tell them apart", vm.Name)
			}
			v.unique(seen, vm.Name, p+".name", "VM")
		}
		h, ok := v.s.Host(vm.Host)
		switch {
		case vm.Host == "":
			v.errf(p+".host", "a VM needs the host it runs on")
		case !ok:
			v.errf(p+".host", "unknown host %q", vm.Host)
		case h.Native:
			v.errf(p+".host", "host %q is native: it runs no VMs", vm.Host)
		}
		if vm.CPUs < 0 {
			v.errf(p+".cpus", "cpus must be positive (or left out for no limit), got %g", vm.CPUs)
		}
		if len(vm.NICs) > MaxVNICs {
			v.errf(p+".nics", "a VM has at most %d vNICs, got %d", MaxVNICs, len(vm.NICs))
		}
		for j, n := range vm.NICs {
			v.checkVNIC(fmt.Sprintf("%s.nics[%d]", p, j), vm.Host, n)
		}
	}
}

func (v *validator) checkVNIC(path, host string, n VNIC) {
	sw := v.checkPortGroupOnHost(path+".portgroup", n.PortGroup, host)
	if n.IP != "" {
		v.checkCIDR(path+".ip", n.IP)
	}
	v.checkMTU(path+".mtu", n.MTU)
	if sw != nil && n.MTU > sw.EffectiveMTU() {
		v.errf(path+".mtu", "mtu %d is larger than switch %q's mtu %d", n.MTU, sw.Name, sw.EffectiveMTU())
	}
	if n.MAC != "" {
		hw, err := net.ParseMAC(n.MAC)
		switch {
		case err != nil || len(hw) != 6:
			v.errf(path+".mac", "%q is not an Ethernet MAC address", n.MAC)
		case hw[0]&1 == 1:
			v.errf(path+".mac", "%s is a multicast address; a NIC needs a unicast one", n.MAC)
		default:
			v.unique(v.macs, strings.ToLower(hw.String()), path+".mac", "MAC address")
		}
	}
}

// checkPortGroupOnHost resolves a port group and checks that its switch
// exists on the host; it returns the switch when it does.
func (v *validator) checkPortGroupOnHost(path, pg, host string) *Switch {
	if pg == "" {
		v.errf(path, "a port group is required")
		return nil
	}
	sw, ok := v.s.PortGroupSwitch(pg)
	if !ok {
		v.errf(path, "unknown port group %q", pg)
		return nil
	}
	if host == "" {
		return sw
	}
	for _, h := range sw.SwitchHosts() {
		if h == host {
			return sw
		}
	}
	v.errf(path, "port group %q is on switch %q, which is not on host %q (switch hosts: %s)", pg, sw.Name, host, strings.Join(sw.SwitchHosts(), ", "))
	return nil
}

func (v *validator) checkHostPorts() {
	for i, hp := range v.s.HostPorts {
		p := fmt.Sprintf("hostports[%d]", i)
		h, ok := v.s.Host(hp.Host)
		switch {
		case hp.Host == "":
			v.errf(p+".host", "a host port needs its host")
		case !ok:
			v.errf(p+".host", "unknown host %q", hp.Host)
		case h.Native:
			v.errf(p+".host", "host %q is native: give its NIC an ip instead", hp.Host)
		default:
			v.checkPortGroupOnHost(p+".portgroup", hp.PortGroup, hp.Host)
		}
		if hp.Name != "" {
			v.checkName(p+".name", hp.Name, maxIfaceName, ifaceName, "a host port")
		}
		if hp.IP == "" {
			v.errf(p+".ip", "a host port needs an address, e.g. 192.168.60.1/24")
		} else {
			v.checkCIDR(p+".ip", hp.IP)
		}
		v.checkMTU(p+".mtu", hp.MTU)
	}
}

// checkIfaceNamesPerHost catches two objects that would become the same
// interface inside one host's namespace.
func (v *validator) checkIfaceNamesPerHost() {
	type owner struct{ path, what string }
	perHost := map[string]map[string]owner{}
	claim := func(host, name, path, what string) {
		if perHost[host] == nil {
			perHost[host] = map[string]owner{"lo": {"", "the loopback"}}
		}
		if prev, ok := perHost[host][name]; ok {
			where := ""
			if prev.path != "" {
				where = " at " + prev.path
			}
			v.errf(path, "%s %q on host %q has the name of %s%s", what, name, host, prev.what, where)
			return
		}
		perHost[host][name] = owner{path, what}
	}
	for i, h := range v.s.Hosts {
		for j, n := range h.NICs {
			claim(h.Name, n.Name, fmt.Sprintf("hosts[%d].nics[%d].name", i, j), "NIC")
		}
	}
	for i, sw := range v.s.Switches {
		for _, h := range sw.SwitchHosts() {
			claim(h, sw.Name, fmt.Sprintf("switches[%d].name", i), "switch")
		}
	}
	for i, hp := range v.s.HostPorts {
		path := fmt.Sprintf("hostports[%d].name", i)
		if hp.Name == "" {
			path = fmt.Sprintf("hostports[%d]", i)
		}
		claim(hp.Host, v.s.HostPortName(i), path, "host port")
	}
}

func (v *validator) checkCIDR(path, s string) {
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		v.errf(path, "%q is not an address with a prefix length, e.g. 192.168.50.11/24", s)
		return
	}
	a := pfx.Addr()
	if a.IsMulticast() || a.IsUnspecified() || a.IsLoopback() {
		v.errf(path, "%s cannot be an interface address", a)
		return
	}
	if a.Is4() && pfx.Bits() < 31 && (a == pfx.Masked().Addr() || a == lastAddr(pfx)) {
		v.errf(path, "%s is the network or broadcast address of %s", a, pfx.Masked())
		return
	}
	if prev, dup := v.ips[a]; dup {
		v.errf(path, "address %s is already used at %s", a, prev)
		return
	}
	v.ips[a] = path
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

func (v *validator) checkMTU(path string, mtu int) {
	if mtu != 0 && (mtu < minMTU || mtu > maxMTU) {
		v.errf(path, "mtu %d is outside %d..%d", mtu, minMTU, maxMTU)
	}
}

func (v *validator) unique(seen map[string]string, name, path, what string) {
	if prev, dup := seen[name]; dup {
		v.errf(path, "duplicate %s %q (first at %s)", what, name, prev)
		return
	}
	seen[name] = path
}
