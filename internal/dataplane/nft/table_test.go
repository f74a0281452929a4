package nft

import (
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
)

func TestFirewallTables(t *testing.T) {
	cases := []struct {
		resource  string // a firewall resource's Name
		table     string
		isVnet    bool
		otherName string
		otherIs   bool
	}{
		{"", "vnet", true, "filter", false},
		{plan.FirewallTable("dc"), "vnet-dc", true, "vnetx", false},
		{plan.FirewallTable("a-b"), "vnet-a-b", true, "nat", false},
	}
	for _, c := range cases {
		if got := bridgeTableOf(c.resource).Name; got != c.table {
			t.Errorf("bridge table of %q: %s, want %s", c.resource, got, c.table)
		}
		if got := inetTableOf(c.resource).Name; got != c.table {
			t.Errorf("inet table of %q: %s, want %s", c.resource, got, c.table)
		}
		if isVnetTable(c.table) != c.isVnet || isVnetTable(c.otherName) != c.otherIs {
			t.Errorf("isVnetTable(%s) %v, isVnetTable(%s) %v", c.table, isVnetTable(c.table), c.otherName, isVnetTable(c.otherName))
		}
	}
}
