package spec

import (
	"errors"
	"net/netip"
	"strings"
)

// Security is a port group's security policy, as on a vSphere distributed
// port group. Each field says whether the behaviour is accepted; an unset
// field takes vSphere's default: promiscuous mode, MAC address changes and
// forged transmits are rejected, IP spoofing is accepted (vSphere has no
// such check of its own). Router advertisements are rejected: a VM is not
// a router unless its port group says so.
type Security struct {
	Promiscuous     *bool `yaml:"promiscuous"`     // false: a vNIC gets only unicast for its MAC, broadcast and multicast
	MACChanges      *bool `yaml:"macChanges"`      // false: a VM that changes its MAC stops receiving
	ForgedTransmits *bool `yaml:"forgedTransmits"` // false: frames from another source MAC are dropped
	IPSpoofing      *bool `yaml:"ipSpoofing"`      // false: IP sources and ARP/ND claims other than the vNIC's are dropped
	// false: IPv6 router advertisements and redirects from the vNIC are dropped
	RouterAdvertisements *bool `yaml:"routerAdvertisements"`
}

// SecurityPolicy is a port group's security with the defaults applied;
// true means accepted.
type SecurityPolicy struct {
	Promiscuous, MACChanges, ForgedTransmits, IPSpoofing, RouterAdvertisements bool
}

// EffectiveSecurity resolves the port group's security policy.
func (pg *PortGroup) EffectiveSecurity() SecurityPolicy { return pg.Security.Effective() }

// Effective is the policy with the defaults applied; a nil Security is all
// defaults.
func (s *Security) Effective() SecurityPolicy {
	p := SecurityPolicy{IPSpoofing: true}
	if s != nil {
		set := func(dst *bool, v *bool) {
			if v != nil {
				*dst = *v
			}
		}
		set(&p.Promiscuous, s.Promiscuous)
		set(&p.MACChanges, s.MACChanges)
		set(&p.ForgedTransmits, s.ForgedTransmits)
		set(&p.IPSpoofing, s.IPSpoofing)
		set(&p.RouterAdvertisements, s.RouterAdvertisements)
	}
	return p
}

// ACL filters the IP traffic of a port group's ports. Rules are tried in
// order and the first that matches decides; traffic no rule matches gets
// Default. Replies to allowed connections pass in both directions.
type ACL struct {
	Default string    `yaml:"default"` // allow (the default) or deny
	Rules   []ACLRule `yaml:"rules"`
}

// The ACL actions and directions.
const (
	ActionAllow = "allow"
	ActionDeny  = "deny"
	DirIngress  = "ingress" // to the port's VM
	DirEgress   = "egress"  // from the port's VM
)

// MaxACLRules is how many rules one port group's ACL may have.
const MaxACLRules = 4096

// ACLRule matches IP traffic to (ingress) or from (egress) a port.
type ACLRule struct {
	Action    string `yaml:"action"`    // allow or deny
	Direction string `yaml:"direction"` // ingress or egress
	Proto     string `yaml:"proto"`     // tcp, udp, icmp, icmpv6; unset: any
	SPort     int    `yaml:"sport"`     // tcp and udp only
	DPort     int    `yaml:"dport"`
	From      *Peer  `yaml:"from"` // the source; unset: any
	To        *Peer  `yaml:"to"`   // the destination; unset: any
}

// Peer is one end of the traffic an ACL rule matches: a prefix
// (from: 10.0.0.0/8, or an address), the members of a port group
// (from: {portgroup: pg-app}), which follow its vNICs and host ports, or
// the vNICs of a virtual network (from: {network: a-web}).
type Peer struct {
	CIDR      string `yaml:"-"`
	PortGroup string `yaml:"portgroup"`
	Network   string `yaml:"network"`
}

// UnmarshalText takes the scalar form, a prefix or an address. Empty text
// is none: a rule that means any peer leaves from or to out.
func (p *Peer) UnmarshalText(b []byte) error {
	p.CIDR = strings.TrimSpace(string(b))
	if p.CIDR == "" {
		return errors.New("a peer needs a prefix (e.g. 10.0.0.0/8), {portgroup: NAME} or {network: NAME}; for any peer leave the field out")
	}
	return nil
}

// Prefix is the peer's prefix, an address alone standing for itself.
func (p *Peer) Prefix() (netip.Prefix, error) {
	if pfx, err := netip.ParsePrefix(p.CIDR); err == nil {
		return pfx.Masked(), nil
	}
	a, err := netip.ParseAddr(p.CIDR)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// HasACL reports whether the port group filters traffic by an ACL.
func (pg *PortGroup) HasACL() bool { return pg.ACL.Filters() }

// Filters reports whether the ACL filters anything: it has rules or denies
// by default. A nil ACL filters nothing.
func (acl *ACL) Filters() bool {
	return acl != nil && (len(acl.Rules) > 0 || acl.Default == ActionDeny)
}

// PortGroupMembers returns the addresses (without prefix length) of every
// vNIC and host port on the port group, in spec order.
func (s *Spec) PortGroupMembers(pg string) []netip.Addr {
	var out []netip.Addr
	add := func(cidr string) {
		if p, err := netip.ParsePrefix(cidr); err == nil {
			out = append(out, p.Addr())
		}
	}
	for _, vm := range s.VMs {
		for _, n := range vm.NICs {
			if n.PortGroup == pg && n.IP != "" {
				add(n.IP)
			}
		}
	}
	for _, hp := range s.HostPorts {
		if hp.PortGroup == pg {
			add(hp.IP)
		}
	}
	return out
}
