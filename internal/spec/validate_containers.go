package spec

import (
	"fmt"
	"net/netip"
	"regexp"
)

// cniName is what the CNI specification allows in a network name and a
// container ID: letters, digits, underscore, dot and dash.
var cniName = regexp.MustCompile(`^[A-Za-z0-9_.\-]+$`)

// maxContainerID bounds a container ID as written into the spec: runtimes
// use 64 hex digits or a UUID.
const maxContainerID = 256

// checkPortGroupSubnets checks each port group's subnet and gateway, and
// that its vNICs' addresses are in the subnet.
func (v *validator) checkPortGroupSubnets() {
	subnets := map[string]netip.Prefix{}
	for i, sw := range v.s.Switches {
		for j, pg := range sw.PortGroups {
			p := fmt.Sprintf("switches[%d].portgroups[%d]", i, j)
			if pfx, ok := v.checkPortGroupSubnet(p, pg); ok {
				subnets[pg.Name] = pfx
			}
		}
	}
	if len(subnets) == 0 {
		return
	}
	for i := range v.s.VMs {
		v.checkVMSubnets(i, subnets)
	}
}

// checkVMSubnets checks that VM i's addresses on port groups are in their
// subnets (those that have one, by name).
func (v *validator) checkVMSubnets(i int, subnets map[string]netip.Prefix) {
	for j, n := range v.s.VMs[i].NICs {
		subnet, ok := subnets[n.PortGroup]
		if !ok || n.Network != "" || n.IP == "" {
			continue
		}
		if a, err := netip.ParsePrefix(n.IP); err == nil && !subnet.Contains(a.Addr()) {
			v.errf(indexPath(indexPath("vms", i)+".nics", j)+".ip", "%s is not in port group %s's subnet %s", a.Addr(), n.PortGroup, subnet)
		}
	}
}

// checkPortGroupSubnet checks a port group's subnet and gateway and
// returns the subnet when it is one.
func (v *validator) checkPortGroupSubnet(p string, pg PortGroup) (netip.Prefix, bool) {
	if pg.Subnet == "" {
		if pg.Gateway != "" {
			v.errf(p+".subnet", "a gateway needs the port group's subnet, e.g. subnet: 10.10.0.0/24")
		}
		return netip.Prefix{}, false
	}
	subnet, err := netip.ParsePrefix(pg.Subnet)
	switch {
	case err != nil:
		v.errf(p+".subnet", "%q is not a prefix, e.g. 10.10.0.0/24", pg.Subnet)
		return netip.Prefix{}, false
	case !v.notMapped(p, ".subnet", subnet.Addr()):
		return netip.Prefix{}, false
	case subnet != subnet.Masked():
		v.errf(p+".subnet", "%s has host bits set: the subnet is %s", pg.Subnet, subnet.Masked())
		return netip.Prefix{}, false
	case subnet.Bits() == 0:
		v.errf(p+".subnet", "%s: a /0 subnet would take every address", pg.Subnet)
		return netip.Prefix{}, false
	}
	if pg.Gateway != "" {
		gw, err := netip.ParseAddr(pg.Gateway)
		switch {
		case err != nil:
			v.errf(p+".gateway", "%q is not an address (give it without a prefix length)", pg.Gateway)
		case !v.notMapped(p, ".gateway", gw):
		case !subnet.Contains(gw):
			v.errf(p+".gateway", "gateway %s is outside subnet %s", gw, subnet)
		case gw.Is4() && subnet.Bits() < 31 && (gw == subnet.Addr() || gw == lastAddr(subnet)):
			v.errf(p+".gateway", "gateway %s is the network or broadcast address of %s", gw, subnet)
		}
	}
	return subnet, true
}

// checkAttachIdentity checks what a container runtime wrote of itself into
// an attachment: the vNIC's name in its namespace, the container's ID and
// the CNI network. ifnames holds the names the VM's other vNICs take.
func (v *validator) checkAttachIdentity(np string, j int, n VNIC, ifnames map[string]string, container *string) {
	a := n.Attach
	if a.Ifname != "" {
		if a.Netns == "" {
			v.errf(np+".attach.ifname", "ifname names a vNIC inside a namespace; a TAP is named by tap:")
		} else {
			v.checkLinkName(np+".attach.ifname", a.Ifname, "a vNIC")
		}
	}
	if a.Netns != "" {
		v.unique(ifnames, n.LinkName(j), np+".attach.ifname", "vNIC name in the namespace")
	}
	if a.Container != "" {
		switch {
		case len(a.Container) > maxContainerID:
			v.errf(np+".attach.container", "a container ID is at most %d characters", maxContainerID)
		case !cniName.MatchString(a.Container):
			v.errf(np+".attach.container", "container ID %q: use letters, digits, _, . and -", a.Container)
		case *container == "":
			*container = a.Container
		case *container != a.Container:
			v.errf(np+".attach.container", "the VM's other vNICs are container %s's; one VM is one container", *container)
		}
	}
	if a.CNI != "" && (len(a.CNI) > maxContainerID || !cniName.MatchString(a.CNI)) {
		v.errf(np+".attach.cni", "CNI network name %q: use letters, digits, _, . and -", a.CNI)
	}
}

// checkVNICShaping checks a vNIC's own shaper.
func (v *validator) checkVNICShaping(path string, n VNIC) {
	if n.Shaping == nil {
		return
	}
	for _, d := range []struct {
		name string
		s    *Shaper
	}{{"egress", n.Shaping.Egress}, {"ingress", n.Shaping.Ingress}} {
		if d.s != nil {
			v.checkShaper(path+".shaping."+d.name, d.s)
		}
	}
}
