package spec

import (
	"net/netip"
	"sort"
)

// Warnings returns what a spec may mean other than it seems, though it is
// valid: ports of one switch, a single segment, whose subnets overlap
// without being the same (10.0.0.5/16 beside 10.0.1.7/24). Each side then
// takes a different part of the other's addresses to be on the link, so
// some of their traffic goes to a gateway, or nowhere, instead of across
// the switch. The faces show these beside a valid spec; they change
// nothing.
func Warnings(doc *Document) Errors {
	s := doc.Spec
	type port struct {
		subnet netip.Prefix
		path   string
	}
	bySwitch := map[*Switch][]port{}
	add := func(pg, cidr, path string) {
		pfx, err := netip.ParsePrefix(cidr)
		if err != nil {
			return
		}
		if sw, ok := s.PortGroupSwitch(pg); ok {
			bySwitch[sw] = append(bySwitch[sw], port{pfx.Masked(), path})
		}
	}
	for i, vm := range s.VMs {
		for j, n := range vm.NICs {
			if n.PortGroup != "" && n.IP != "" {
				add(n.PortGroup, n.IP, indexPath(indexPath("vms", i)+".nics", j)+".ip")
			}
		}
	}
	for i, hp := range s.HostPorts {
		add(hp.PortGroup, hp.IP, indexPath("hostports", i)+".ip")
	}
	var out Errors
	for i := range s.Switches {
		ports := bySwitch[&s.Switches[i]]
		first := map[netip.Prefix]string{} // each subnet, at its first port
		var subnets []netip.Prefix
		for _, p := range ports {
			if _, seen := first[p.subnet]; !seen {
				first[p.subnet] = p.path
				subnets = append(subnets, p.subnet)
			}
		}
		for a := 1; a < len(subnets); a++ {
			for b := 0; b < a; b++ {
				if subnets[a].Overlaps(subnets[b]) {
					out = append(out, doc.Errorf(first[subnets[a]], "subnet %s overlaps %s (%s) on switch %s: the two disagree on which addresses are on the link, so some of their traffic would not cross the switch",
						subnets[a], subnets[b], first[subnets[b]], s.Switches[i].Name))
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pos.Line < out[j].Pos.Line })
	return out
}
