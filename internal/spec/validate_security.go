package spec

import (
	"fmt"
	"net/netip"
)

// checkSecurity validates every port group's and network's ACL: actions,
// directions, protocols, ports and peers.
func (v *validator) checkSecurity() {
	for i := range v.s.Switches {
		for j := range v.s.Switches[i].PortGroups {
			pg := &v.s.Switches[i].PortGroups[j]
			if pg.ACL != nil {
				v.checkACL(fmt.Sprintf("switches[%d].portgroups[%d].acl", i, j), pg.ACL)
			}
		}
	}
	for i := range v.s.Networks {
		if acl := v.s.Networks[i].ACL; acl != nil {
			v.checkACL(fmt.Sprintf("networks[%d].acl", i), acl)
		}
	}
}

func (v *validator) checkACL(p string, acl *ACL) {
	switch acl.Default {
	case "", ActionAllow, ActionDeny:
	default:
		v.errf(p+".default", "default %q: want allow or deny", acl.Default)
	}
	if len(acl.Rules) > MaxACLRules {
		v.errf(p+".rules", "an ACL has at most %d rules, got %d", MaxACLRules, len(acl.Rules))
		return
	}
	for k := range acl.Rules {
		v.checkACLRule(indexPath(p+".rules", k), &acl.Rules[k])
	}
}

func (v *validator) checkACLRule(p string, r *ACLRule) {
	switch r.Action {
	case ActionAllow, ActionDeny:
	case "":
		v.errf(p+".action", "a rule needs an action: allow or deny")
	default:
		v.errf(p+".action", "action %q: want allow or deny", r.Action)
	}
	switch r.Direction {
	case DirIngress, DirEgress:
	case "":
		v.errf(p+".direction", "a rule needs a direction: ingress (to the VM) or egress (from the VM)")
	default:
		v.errf(p+".direction", "direction %q: want ingress (to the VM) or egress (from the VM)", r.Direction)
	}
	family := 0 // 4 or 6 when the protocol or a peer fixes it
	switch r.Proto {
	case "", "tcp", "udp":
	case "icmp":
		family = 4
	case "icmpv6":
		family = 6
	default:
		v.errf(p+".proto", "proto %q: want tcp, udp, icmp or icmpv6 (or leave it out for any)", r.Proto)
	}
	for _, port := range []struct {
		name string
		n    int
	}{{"sport", r.SPort}, {"dport", r.DPort}} {
		switch {
		case port.n == 0:
		case port.n < 1 || port.n > 65535:
			v.errf(p+"."+port.name, "port %d is outside 1..65535", port.n)
		case r.Proto != "tcp" && r.Proto != "udp":
			v.errf(p+"."+port.name, "a port needs proto: tcp or udp")
		}
	}
	for _, peer := range []struct {
		name string
		p    *Peer
	}{{"from", r.From}, {"to", r.To}} {
		if peer.p != nil {
			family = v.checkPeer(p+"."+peer.name, peer.p, family)
		}
	}
}

// checkPeer validates one end of a rule. A prefix's family must agree with
// the rule's protocol and other end (family, 0 when not fixed yet); it
// returns the family the rule has after this end.
func (v *validator) checkPeer(p string, peer *Peer, family int) int {
	kinds := 0
	for _, set := range []bool{peer.CIDR != "", peer.PortGroup != "", peer.Network != ""} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		v.errf(p, "a peer is one of a prefix, {portgroup: NAME} or {network: NAME}")
	case peer.PortGroup != "":
		if _, _, ok := v.s.PortGroup(peer.PortGroup); !ok {
			v.errf(p+".portgroup", "unknown port group %q", peer.PortGroup)
		}
	case peer.Network != "":
		if _, ok := v.s.Network(peer.Network); !ok {
			v.errf(p+".network", "unknown network %q", peer.Network)
		}
	case peer.CIDR != "":
		pfx, err := peer.Prefix()
		if err != nil {
			v.errf(p, "%q is not a prefix or an address, e.g. 10.0.0.0/8 or {portgroup: pg-app}", peer.CIDR)
			return family
		}
		if !v.notMapped(p, "", pfx.Addr()) {
			return family
		}
		f := familyOf(pfx.Addr())
		if family != 0 && f != family {
			v.errf(p, "%s is IPv%d, but the rule is IPv%d (its proto or other end)", peer.CIDR, f, family)
		}
		return f
	default:
		v.errf(p, "a peer needs a prefix (e.g. 10.0.0.0/8), {portgroup: NAME} or {network: NAME}")
	}
	return family
}

func familyOf(a netip.Addr) int {
	if a.Is4() {
		return 4
	}
	return 6
}
