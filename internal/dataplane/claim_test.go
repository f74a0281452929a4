package dataplane

import (
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
)

// An existing link of a name vnet would make is taken over only when it is
// provably the infrastructure's: in a namespace vnet made, or, in one
// shared with the machine, by its alias.
func TestMayAdopt(t *testing.T) {
	blue := plan.HostOwner("blue", "hostport hv1/nfs1044 on pg")
	for _, c := range []struct {
		name, ns, have, owner string
		want                  bool
	}{
		{"in a namespace vnet made", "vnet.blue.web1", "", "vm web1 eth0", true},
		{"its own alias", "", ownerAlias(blue), blue, true},
		{"another object of the infrastructure", "", ownerAlias(plan.HostOwner("blue", "hostport hv1/nfs1044 on pg2")), blue, true},
		{"another infrastructure's", "", ownerAlias(plan.HostOwner("green", "hostport hv1/nfs1044 on pg")), blue, false},
		{"another infrastructure's whose name begins alike", "", ownerAlias(plan.HostOwner("blue2", "x")), blue, false},
		{"the machine's own, without alias", "", "", blue, false},
		{"the machine's own, with an alias", "", "uplink to storage", blue, false},
		{"a label without an infrastructure, its own", "machine", ownerAlias("physical switch"), "physical switch", true},
		{"a label without an infrastructure, another's", "machine", ownerAlias("other"), "physical switch", false},
	} {
		if got := mayAdopt(c.ns, c.have, c.owner); got != c.want {
			t.Errorf("%s: mayAdopt(%q, %q, %q) = %v, want %v", c.name, c.ns, c.have, c.owner, got, c.want)
		}
	}
}
