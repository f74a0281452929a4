package dataplane

import (
	"slices"
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
)

func TestSplitDeletes(t *testing.T) {
	del := func(r plan.Resource) plan.Action { return plan.Action{Op: plan.OpDelete, Old: &r} }
	host, other := "hostns", "otherns"
	actions := []plan.Action{
		del(plan.Resource{Kind: plan.KindPortSec, NS: host, Name: "vnet-a", Link: "t1"}),
		del(plan.Resource{Kind: plan.KindPortSec, NS: other, Name: "vnet-a", Link: "t2"}), // its firewall stays
		del(plan.Resource{Kind: plan.KindPortSec, NS: host, Name: "vnet-b", Link: "t3"}),  // another infrastructure's tables
		del(plan.Resource{Kind: plan.KindFirewall, NS: host, Name: "vnet-a"}),
		del(plan.Resource{Kind: plan.KindDevice, NS: host, Name: "t1"}),
		del(plan.Resource{Kind: plan.KindDevice, NS: other, Name: "t2"}),
		del(plan.Resource{Kind: plan.KindDevice, NS: host, Name: "t3"}),
		del(plan.Resource{Kind: plan.KindBridge, NS: host, Name: "nb1"}),
		del(plan.Resource{Kind: plan.KindAddr, NS: "vm1", Link: "eth0"}), // goes with its namespace
		del(plan.Resource{Kind: plan.KindCgroup, Name: "vm1"}),
		del(plan.Resource{Kind: plan.KindNetns, Name: "vm1"}),
		del(plan.Resource{Kind: plan.KindDevice, NS: "vm1", Name: "tap0"}), // a TAP moved in: given back before its namespace goes
	}
	p := splitDeletes(actions)
	subjects := func(as []plan.Action) []string {
		var out []string
		for _, a := range as {
			out = append(out, string(a.Old.Kind)+" "+a.Old.NS+"/"+a.Old.Name+"/"+a.Old.Link)
		}
		return out
	}
	check := func(what string, got []plan.Action, want ...string) {
		t.Helper()
		if g := subjects(got); !slices.Equal(g, want) {
			t.Errorf("%s: %q, want %q", what, g, want)
		}
	}
	check("with their firewall's tables", p.withTable, "portsec hostns/vnet-a/t1")
	check("one by one", p.before, "portsec otherns/vnet-a/t2", "portsec hostns/vnet-b/t3", "firewall hostns/vnet-a/", "bridge hostns/nb1/")
	check("devices of the host", p.devices[host], "device hostns/t1/", "device hostns/t3/")
	check("devices of the other", p.devices[other], "device otherns/t2/")
	check("devices of a namespace that goes", p.devices["vm1"], "device vm1/tap0/")
	if !slices.Equal(p.deviceNS, []string{host, other, "vm1"}) {
		t.Errorf("device namespaces %q, want %q", p.deviceNS, []string{host, other, "vm1"})
	}
	check("after", p.after, "cgroup /vm1/")
	check("namespaces", p.namespaces, "netns /vm1/")
}
