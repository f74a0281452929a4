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
	bySwitch := map[*Switch]*switchSubnets{}
	switches := map[string]*Switch{} // port group -> its switch, nil for none
	add := func(pg, cidr string, where portAt) {
		pfx, err := netip.ParsePrefix(cidr)
		if err != nil {
			return
		}
		sw, known := switches[pg]
		if !known {
			sw, _ = s.PortGroupSwitch(pg)
			switches[pg] = sw
		}
		if sw == nil {
			return
		}
		ss := bySwitch[sw]
		if ss == nil {
			ss = &switchSubnets{first: map[netip.Prefix]portAt{}}
			bySwitch[sw] = ss
		}
		if _, seen := ss.first[pfx.Masked()]; !seen {
			ss.first[pfx.Masked()] = where
			ss.subnets = append(ss.subnets, pfx.Masked())
		}
	}
	for i, vm := range s.VMs {
		for j, n := range vm.NICs {
			if n.PortGroup != "" && n.IP != "" {
				add(n.PortGroup, n.IP, portAt{vm: i, nic: j, hostPort: -1})
			}
		}
	}
	for i, hp := range s.HostPorts {
		add(hp.PortGroup, hp.IP, portAt{hostPort: i})
	}
	var out Errors
	for i := range s.Switches {
		ss := bySwitch[&s.Switches[i]]
		if ss == nil {
			continue
		}
		subnets := ss.subnets
		for a := 1; a < len(subnets); a++ {
			for b := 0; b < a; b++ {
				if subnets[a].Overlaps(subnets[b]) {
					out = append(out, doc.Errorf(ss.first[subnets[a]].path(), "subnet %s overlaps %s (%s) on switch %s: the two disagree on which addresses are on the link, so some of their traffic would not cross the switch",
						subnets[a], subnets[b], ss.first[subnets[b]].path(), s.Switches[i].Name))
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pos.Line < out[j].Pos.Line })
	return out
}

// switchSubnets are the subnets of a switch's ports, each once, in the
// order of the ports, and where each is first.
type switchSubnets struct {
	subnets []netip.Prefix
	first   map[netip.Prefix]portAt
}

// portAt is where a port is in the spec: a vNIC, vms[vm].nics[nic], or
// when hostPort is not -1 hostports[hostPort]. Its path is made only for
// a warning: a large spec has thousands of ports.
type portAt struct{ vm, nic, hostPort int }

func (p portAt) path() string {
	if p.hostPort >= 0 {
		return indexPath("hostports", p.hostPort) + ".ip"
	}
	return indexPath(indexPath("vms", p.vm)+".nics", p.nic) + ".ip"
}
