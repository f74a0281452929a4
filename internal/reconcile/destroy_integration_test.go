package reconcile_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/store"
)

// destroyGroup is the link group a destroy puts the links it deletes in
// (dataplane's deleteGroup).
const destroyGroup = 0x766e6574

// tapNetworks is n networks with a guest on a TAP (t0, t1, ...) of hv1 and
// a VM on hv2 each, with the networks' default port security.
func tapNetworks(infra string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nhosts:\n  - {name: hv1, underlay: 192.0.2.11}\n  - {name: hv2, underlay: 192.0.2.12}\nnetworks:\n", infra)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {name: n%d, subnet: 10.%d.%d.0/24}\n", i, i/256, i%256)
	}
	b.WriteString("vms:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {name: g%d, host: hv1, nics: [{network: n%d, ip: 10.%d.%d.10/24, attach: {tap: t%d}, mac: \"52:54:00:00:%02x:%02x\"}]}\n",
			i, i, i/256, i%256, i, i>>8&0xff, i&0xff)
		fmt.Fprintf(&b, "  - {name: v%d, host: hv2, nics: [{network: n%d, ip: 10.%d.%d.11/24}]}\n", i, i, i/256, i%256)
	}
	return b.String()
}

// A hypervisor's destroy of many networks whose guests are on TAPs, as its
// agent does it: every TAP is given back as found, the firewall's tables
// go with the port policies in them, the bridges and tunnels go a group
// of links at a time (more than one group here), links of the
// infrastructure that a killed destroy left in the group go with them, as
// does a TAP it took out of its bridge but did not give back, and the
// machine's own links stay, also one in that group.
func TestDestroyManyNetworksOnTaps(t *testing.T) {
	const n = 140 // 280 links of vnet's on hv1: two groups
	machine := nstest.Machine(t, "hvd")
	taps := make([]string, n)
	for i := range taps {
		taps[i] = fmt.Sprintf("t%d", i)
		nstest.AddTap(t, machine, taps[i])
	}
	nstest.AddTap(t, machine, "own0") // the machine's, not vnet's
	state := func() []string {
		var out []string
		for _, name := range append(slices.Clone(taps), "own0") {
			out = append(out, nstest.LinkState(t, machine, name)...)
		}
		return out
	}
	before := state()
	st, err := store.OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	records := t.TempDir()
	engine := func() *reconcile.Engine {
		dp, err := dataplane.New()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(dp.Close)
		dp.HostNS, dp.DeviceStateDir = machine, records
		return &reconcile.Engine{DP: dp, Store: st, Host: "hv1", HostNS: machine}
	}
	infra := nstest.Infra("tapdestroy")
	doc := loadSpec(t, tapNetworks(infra, n))
	setGroup := func(name string, group uint32) {
		t.Helper()
		err := nstest.Do(t, machine, func() error {
			link, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			return netlink.LinkSetGroup(link, int(group))
		})
		if err != nil {
			t.Fatalf("group of %s: %v", name, err)
		}
	}
	vnetLinks := func() []string {
		var out []string
		nstest.Do(t, machine, func() error {
			links, err := netlink.LinkList()
			for _, l := range links {
				if strings.HasPrefix(l.Attrs().Alias, "vnet:") {
					out = append(out, l.Attrs().Name)
				}
			}
			return err
		})
		return out
	}
	for _, c := range []struct {
		name string
		// before the destroy, in the machine: links of vnet's and of its
		// own put in the group
		ours, own bool
	}{
		{name: "links of a killed destroy in the group", ours: true},
		{name: "a link of the machine's in the group", own: true},
	} {
		eng := engine()
		if _, err := eng.Apply(doc); err != nil {
			t.Fatalf("%s: apply: %v", c.name, err)
		}
		if got := len(vnetLinks()); got != 3*n {
			t.Fatalf("%s: %d links of vnet's after the apply, want %d", c.name, got, 3*n)
		}
		if c.ours {
			setGroup(plan.NetBridgeName(infra, "n0"), destroyGroup)
			setGroup(plan.NetBridgeName(infra, fmt.Sprintf("n%d", n-1)), destroyGroup)
			// and a TAP taken out of its bridge, still marked as vnet's
			err := nstest.Do(t, machine, func() error {
				link, err := netlink.LinkByName("t1")
				if err != nil {
					return err
				}
				return netlink.LinkSetNoMaster(link)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if c.own {
			setGroup("own0", destroyGroup)
		}
		p, err := engine().Destroy(infra)
		if err != nil {
			t.Fatalf("%s: destroy: %v", c.name, err)
		}
		if len(p.Actions) == 0 {
			t.Fatalf("%s: destroy did nothing", c.name)
		}
		if left := vnetLinks(); len(left) > 0 {
			t.Errorf("%s: links left after destroy: %v", c.name, left)
		}
		if c.own {
			setGroup("own0", 0)
		}
		if got := state(); !slices.Equal(got, before) {
			t.Errorf("%s: destroy did not give the TAPs back as found:\n%s\nwas\n%s", c.name, strings.Join(got, "\n"), strings.Join(before, "\n"))
		}
		left, err := engine().DP.Observe(infra, nil)
		if err != nil {
			t.Fatalf("%s: observe after destroy: %v", c.name, err)
		}
		for _, r := range left {
			t.Errorf("%s: left after destroy: %s", c.name, r)
		}
	}
}
