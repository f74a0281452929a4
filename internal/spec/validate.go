package spec

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/units"
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

// Limits on values, each where the kernel, or vnet's use of it, stops
// doing what the spec says.
const (
	// MinCPUs is the smallest CPU limit: the kernel refuses a CFS quota
	// below 1 ms of each 100 ms period.
	MinCPUs = 0.01
	// MaxCPUs is the largest CPU limit. A VM's cpuset has at most the
	// machine's CPUs anyway; the bound keeps specs portable and far below
	// what the kernel's quota arithmetic holds.
	MaxCPUs = 1024
	// MinRate is the slowest rate. The kernel keeps rates in whole bytes
	// per second, and vnet's HTB buckets hold at least a 64 KiB frame:
	// below about 2 Kbit/s, the time to fill one overflows the 32-bit tick
	// count that tells the kernel a bucket's size. 8 Kbit/s leaves a margin.
	MinRate = units.Rate(8_000)
	// MaxRate is the fastest rate, 1 Tbit/s.
	MaxRate = units.Rate(1_000_000_000_000)
	// minBurst is two full-size frames.
	minBurst = units.Size(2048)
	// MaxBurst is the largest shaper burst.
	MaxBurst = units.Size(1 << 30)
	// MaxBurstTime is the longest a shaper's burst may last at its average
	// rate: the kernel cuts a token bucket's depth to about 4.29 s.
	MaxBurstTime = 4 * time.Second
)

// RulesRevision counts the changes to what decoding and Validate refuse.
// The binary form of a validated spec (package speccache) is bound to it,
// so that a spec that older rules let through is not taken on their word
// but loaded and validated again. Raise it with every change that refuses
// what was accepted.
const RulesRevision = 2

// reservedLinkNames are interface names the kernel refuses: they are the
// per-protocol "all" and "default" settings under /proc/sys/net.
var reservedLinkNames = map[string]bool{"all": true, "default": true}

// generatedLinkPrefixes start the names of the links vnet names itself
// (package plan): a prefix, then eight hex digits of a hash of what the
// link is, so that a name is short, stable and unique in its namespace.
// generatedLinkNames are those it names the same everywhere.
var (
	generatedLinkPrefixes = []string{"p", "vs", "vx", "nb", "nx", "gw", "rp", "vn", "vk", "vh"}
	generatedLinkNames    = map[string]bool{"vnet-underlay": true, "pswitch": true}
)

// GeneratedLinkName reports whether name has the form of a link that vnet
// names itself. A spec's link takes no such name: whether it would meet
// the very link vnet makes is only known when the links are made, on
// some host, at some later apply.
func GeneratedLinkName(name string) bool {
	if generatedLinkNames[name] {
		return true
	}
	for _, p := range generatedLinkPrefixes {
		if len(name) == len(p)+8 && strings.HasPrefix(name, p) && isLowerHex(name[len(p):]) {
			return true
		}
	}
	return false
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Validate checks everything that can be checked without the kernel: names,
// references between objects, addresses, MTUs. It returns every problem; a
// document it finds none in counts as validated (Document.Validated).
func Validate(doc *Document) Errors {
	v := &validator{doc: doc, s: doc.Spec, x: newIndex(doc.Spec)}
	v.run()
	sortErrors(v.errs)
	doc.valid = len(v.errs) == 0
	return v.errs
}

type validator struct {
	doc  *Document
	s    *Spec
	x    *index
	errs Errors
	ips  map[netip.Addr]string // address -> path that first used it
	macs map[string]string
	// Addresses and MACs of networks' vNICs, by address space (see
	// Network.AddressSpace): they may repeat in another space.
	netIPs  map[string]map[netip.Addr]string
	netMACs map[string]map[string]string
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
	v.checkUnderlay()
	v.checkNetworks()
	v.checkLoadBalancers()
	v.checkSecurity()
	v.checkRealHosts()
	v.checkPortGroupSubnets()
}

func (v *validator) checkName(path, name string, maxLen int, re *regexp.Regexp, what string) bool {
	switch {
	case name == "":
		v.errf(path, "%s needs a name", what)
	case len(name) > maxLen:
		v.errf(path, "name %q is longer than %d characters", name, maxLen)
	case !nameMatches(re, name):
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

// checkLinkName checks a name that becomes a Linux interface name.
func (v *validator) checkLinkName(path, name, what string) bool {
	if !v.checkName(path, name, maxIfaceName, ifaceName, what) {
		return false
	}
	if reservedLinkNames[name] {
		v.errf(path, "name %q is reserved by the kernel for settings of all interfaces", name)
		return false
	}
	if GeneratedLinkName(name) {
		v.errf(path, "name %q has the form of the links vnet names itself (such as vn, vs or vk and eight hex digits, or vnet-underlay): choose another", name)
		return false
	}
	return true
}

// checkRate checks a rate the spec sets; 0 (not set) is left to the caller.
func (v *validator) checkRate(path string, r units.Rate) bool {
	if r != 0 && (r < MinRate || r > MaxRate) {
		v.errf(path, "rate %s is outside %s..%s", r, MinRate, MaxRate)
		return false
	}
	return true
}

func (v *validator) checkHosts() {
	seen := map[string]string{}
	for i, h := range v.s.Hosts {
		p := indexPath("hosts", i)
		if v.checkName(p+".name", h.Name, maxObjectName, objectName, "a host") {
			v.unique(seen, h.Name, p+".name", "host")
		}
		nics := map[string]string{}
		for j, n := range h.NICs {
			np := indexPath(p+".nics", j)
			if v.checkLinkName(np+".name", n.Name, "a NIC") {
				v.unique(nics, n.Name, np+".name", "NIC")
			}
			if n.Speed == 0 && !n.IsDevice() {
				v.errf(np+".speed", "a NIC needs a line rate, e.g. speed: 1Gbit")
			}
			v.checkRate(np+".speed", n.Speed)
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
		p := indexPath("switches", i)
		if v.checkLinkName(p+".name", sw.Name, "a switch") {
			v.unique(seenSw, sw.Name, p+".name", "switch")
		}
		v.checkMTU(p+".mtu", sw.MTU)
		for j, h := range sw.Hosts {
			v.checkSwitchHost(indexPath(p+".hosts", j), h)
		}
		upNames := map[string]string{}
		for j, u := range sw.Uplinks {
			up := indexPath(p+".uplinks", j)
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
	h, ok := v.x.host(name)
	switch {
	case !ok:
		v.errf(path, "unknown host %q", name)
	case h.Native:
		v.errf(path, "host %q is native: it has no virtual switches", name)
	}
}

func (v *validator) checkUplinkNIC(path, hostName, nicName string, sw *Switch, owner map[string]string) {
	h, ok := v.x.host(hostName)
	if !ok {
		v.errf(path, "unknown host %q", hostName)
		return
	}
	if h.Native {
		v.errf(path, "host %q is native: it has no virtual switches", hostName)
		return
	}
	n, ok := v.x.nic(h, nicName)
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
	for i := range v.s.VMs {
		v.checkVM(i, seen)
	}
}

// checkVM checks VM i of the spec: its name (unique among those in seen),
// host, CPUs and vNICs.
func (v *validator) checkVM(i int, seen map[string]string) {
	vm := &v.s.VMs[i]
	p := indexPath("vms", i)
	if v.checkName(p+".name", vm.Name, maxObjectName, objectName, "a VM") {
		if _, clash := v.x.host(vm.Name); clash {
			v.errf(p+".name", "VM %q has the name of a host; vnet exec could not tell them apart", vm.Name)
		}
		v.unique(seen, vm.Name, p+".name", "VM")
	}
	h, ok := v.x.host(vm.Host)
	switch {
	case vm.Host == "":
		v.errf(p+".host", "a VM needs the host it runs on")
	case !ok:
		v.errf(p+".host", "unknown host %q", vm.Host)
	case h.Native:
		v.errf(p+".host", "host %q is native: it runs no VMs", vm.Host)
	}
	v.checkCPUs(p+".cpus", vm.CPUs)
	if len(vm.NICs) > MaxVNICs {
		v.errf(p+".nics", "a VM has at most %d vNICs, got %d", MaxVNICs, len(vm.NICs))
	}
	for j, n := range vm.NICs {
		v.checkVNIC(indexPath(p+".nics", j), vm.Host, n)
	}
}

// checkCPUs checks a VM's CPU limit. Left out, it is 0: no limit; written
// out, it must be one the kernel takes (and NaN fails every comparison).
func (v *validator) checkCPUs(path string, cpus float64) {
	if cpus == 0 && !v.doc.Given(path) {
		return
	}
	if !(cpus >= MinCPUs && cpus <= MaxCPUs) {
		v.errf(path, "cpus must be %g..%d cores (or left out for no limit), got %g", MinCPUs, MaxCPUs, cpus)
	}
}

func (v *validator) checkVNIC(path, host string, n VNIC) {
	v.checkVNICShaping(path, n)
	if n.Network != "" {
		v.checkNetworkVNIC(path, n)
		return
	}
	sw := v.checkPortGroupOnHost(path+".portgroup", n.PortGroup, host)
	if n.IP != "" {
		v.checkCIDR(path+".ip", n.IP)
	}
	if n.IP6 != "" {
		v.errf(path+".ip6", "ip6 is for vNICs on a network; on a port group give an IPv6 address as ip")
	}
	v.checkMTU(path+".mtu", n.MTU)
	if sw != nil && n.MTU > sw.EffectiveMTU() {
		v.errf(path+".mtu", "mtu %d is larger than switch %q's mtu %d", n.MTU, sw.Name, sw.EffectiveMTU())
	}
	v.checkVNICMAC(path, n, v.macs)
}

// checkVNICMAC checks a vNIC's MAC, unique among those in seen.
func (v *validator) checkVNICMAC(path string, n VNIC, seen map[string]string) {
	if n.MAC != "" {
		hw, err := net.ParseMAC(n.MAC)
		switch {
		case err != nil || len(hw) != 6:
			v.errf(path+".mac", "%q is not an Ethernet MAC address", n.MAC)
		case hw[0]&1 == 1:
			v.errf(path+".mac", "%s is a multicast address; a NIC needs a unicast one", n.MAC)
		case hw.String() == "00:00:00:00:00:00":
			v.errf(path+".mac", "%s is the zero address, which the kernel refuses for a NIC", n.MAC)
		default:
			v.unique(seen, strings.ToLower(hw.String()), path+".mac", "MAC address")
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
	sw, ok := v.x.pgSwitch[pg]
	if !ok {
		v.errf(path, "unknown port group %q", pg)
		return nil
	}
	if host == "" {
		return sw
	}
	if v.x.swOn[sw][host] {
		return sw
	}
	v.errf(path, "port group %q is on switch %q, which is not on host %q (switch hosts: %s)", pg, sw.Name, host, strings.Join(v.x.swHosts[sw], ", "))
	return nil
}

func (v *validator) checkHostPorts() {
	for i, hp := range v.s.HostPorts {
		p := indexPath("hostports", i)
		h, ok := v.x.host(hp.Host)
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
			v.checkLinkName(p+".name", hp.Name, "a host port")
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
	for i := range v.s.Switches {
		sw := &v.s.Switches[i]
		for _, h := range v.x.swHosts[sw] {
			claim(h, sw.Name, fmt.Sprintf("switches[%d].name", i), "switch")
		}
	}
	// On a real host a host port is made beside the machine's own
	// interfaces, of which the spec knows the devices.
	devices := map[[2]string]string{} // host, device -> path
	for i, h := range v.s.Hosts {
		for j, n := range h.NICs {
			if n.Device != "" {
				devices[[2]string{h.Name, n.Device}] = fmt.Sprintf("hosts[%d].nics[%d].device", i, j)
			}
		}
	}
	names := hostPortNames(v.s)
	for i, hp := range v.s.HostPorts {
		path := fmt.Sprintf("hostports[%d].name", i)
		if hp.Name == "" {
			path = indexPath("hostports", i)
		}
		if dev, ok := devices[[2]string{hp.Host, names[i]}]; ok {
			v.errf(path, "host port %q on host %q has the name of the machine's device at %s: name the host port otherwise", names[i], hp.Host, dev)
			continue
		}
		claim(hp.Host, names[i], path, "host port")
	}
}

func (v *validator) checkCIDR(path, s string) { v.checkCIDRIn(path, s, v.ips) }

// checkCIDRIn checks an interface address, unique among those in ips (one
// address space).
func (v *validator) checkCIDRIn(path, s string, ips map[netip.Addr]string) {
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		v.errf(path, "%q is not an address with a prefix length, e.g. 192.168.50.11/24", s)
		return
	}
	a := pfx.Addr()
	if !v.notMapped(path, "", a) {
		return
	}
	if pfx.Bits() == 0 {
		v.errf(path, "%s: prefix length /0 would put the whole address space on the link", s)
		return
	}
	if a.IsMulticast() || a.IsUnspecified() || a.IsLoopback() {
		v.errf(path, "%s cannot be an interface address", a)
		return
	}
	if a.Is4() && pfx.Bits() < 31 && (a == pfx.Masked().Addr() || a == lastAddr(pfx)) {
		v.errf(path, "%s is the network or broadcast address of %s", a, pfx.Masked())
		return
	}
	if prev, dup := ips[a]; dup {
		v.errf(path, "address %s is already used at %s", a, prev)
		return
	}
	ips[a] = path
}

// notMapped refuses an IPv4-mapped IPv6 address (::ffff:10.0.0.1): it is
// an IPv4 address in IPv6's clothes, which the kernel would set and match
// as IPv6, and which the checks of IPv4 addresses (unique, in a subnet)
// would not see as the address it stands for. It reports whether a is
// none. The field's path is path+field, made only for an error: a large
// spec's networks ask for every subnet.
func (v *validator) notMapped(path, field string, a netip.Addr) bool {
	if a.Is4In6() {
		v.errf(path+field, "%s is an IPv4 address written as IPv6 (IPv4-mapped): write it as %s", a, a.Unmap())
		return false
	}
	return true
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

// indexPath names the i-th item of the list at path, without the cost of
// fmt.Sprintf for each of a large spec's many paths.
func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// nameMatches is re.MatchString, by hand for the two patterns of names,
// which a large spec asks of tens of thousands of names.
func nameMatches(re *regexp.Regexp, s string) bool {
	switch re {
	case objectName:
		return isObjectName(s)
	case ifaceName:
		return isIfaceName(s)
	}
	return re.MatchString(s)
}

// isObjectName is objectName.MatchString(s).
func isObjectName(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isIfaceName is ifaceName.MatchString(s).
func isIfaceName(s string) bool {
	if s == "" || s[0] == '-' || s[0] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
