package dataplane

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/plan"
)

func TestIsNetworkOwner(t *testing.T) {
	cases := []struct {
		owner string
		want  bool
	}{
		{plan.HostOwner("dc", "network a-web on hv1"), true},
		{plan.HostOwner("dc", "network a-web on hv1: tunnel"), true},
		{plan.HostOwner("dc", "switch dvs on hv1"), false},
		{"switch dvs on hv1", false},
		{"network a-web", false}, // no infrastructure: not a host model's
	}
	for _, c := range cases {
		if got := isNetworkOwner(c.owner); got != c.want {
			t.Errorf("isNetworkOwner(%q) = %v, want %v", c.owner, got, c.want)
		}
	}
}

func TestIsBridgeStatic(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:12")
	cases := []struct {
		name string
		n    netlink.Neigh
		want bool
	}{
		{"static, from the bridge", netlink.Neigh{MasterIndex: 3, State: netlink.NUD_NOARP, HardwareAddr: mac}, true},
		{"the port's own address", netlink.Neigh{MasterIndex: 3, State: netlink.NUD_PERMANENT | netlink.NUD_NOARP, HardwareAddr: mac}, false},
		{"learned", netlink.Neigh{MasterIndex: 3, State: netlink.NUD_REACHABLE, HardwareAddr: mac}, false},
		{"the tunnel's own", netlink.Neigh{Flags: netlink.NTF_SELF, State: netlink.NUD_NOARP | netlink.NUD_PERMANENT, IP: net.ParseIP("10.0.0.12"), HardwareAddr: mac}, false},
		{"on a VLAN", netlink.Neigh{MasterIndex: 3, State: netlink.NUD_NOARP, Vlan: 10, HardwareAddr: mac}, false},
	}
	for _, c := range cases {
		if got := isBridgeStatic(c.n); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
