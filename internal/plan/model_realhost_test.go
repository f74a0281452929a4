package plan

import (
	"os"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

func loadDoc(t *testing.T, path string) *spec.Document {
	t.Helper()
	doc, err := spec.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// A real NIC is its device in the host's namespace, a port of the switch's
// bridge with the line rate and IOC the lab gives the emulated NIC; a TAP
// is the switch port itself; a container's vNIC is a veth whose VM end is
// in the container's namespace and whose port names the pair.
func TestHostModelRealDevices(t *testing.T) {
	s := loadDoc(t, "../../examples/hosts/real-host.yaml").Spec
	got := Model(s, Options{Host: "hv1", HostNS: "machine", DeviceSpeeds: map[string]uint64{"eth1": 10e9}})
	br := HostBridgeName("rh", "dvs0")
	byKey := map[string]Resource{}
	for _, r := range got {
		byKey[r.Key()] = r
		if r.NS == NSName("rh", "hv1") || r.NS == NSName("rh", PhysSwitch) {
			t.Errorf("emulated physical network in a host model: %s", r)
		}
		if r.Kind == KindNetns && (r.Name == NSName("rh", "guest1") || r.Name == NSName("rh", "box1") || r.Name == "box1") {
			t.Errorf("namespace made for an attached VM: %s", r)
		}
	}
	dev, ok := byKey["device/machine/eth1"]
	if !ok || dev.Link != br || dev.MTU != 0 || !IsDeviceAlias(AliasPrefix+dev.Owner) || !OwnedBy(AliasPrefix+dev.Owner, "rh") {
		t.Errorf("eth1: %+v (ok %v), want a port of %s with its MTU left alone, marked as rh's device", dev, ok, br)
	}
	if lr, ok := byKey["linerate/machine/eth1"]; !ok || lr.Rate != 10e9 {
		t.Errorf("eth1's line rate: %+v, want the device's 10 Gbit/s", lr)
	}
	pools := 0
	for _, r := range got {
		if r.Kind == KindPool && r.NS == "machine" && r.Link == "eth1" {
			pools++
		}
	}
	if pools == 0 {
		t.Error("no IOC pool classes on eth1")
	}
	tap, ok := byKey["device/machine/tap-guest1"]
	if !ok || tap.Link != br || tap.MTU != 1500 {
		t.Errorf("tap-guest1: %+v (ok %v), want a port of %s with the switch's MTU", tap, ok, br)
	}
	if sh, ok := byKey["shaper/machine/tap-guest1"]; !ok || sh.Rate != 500e6 {
		t.Errorf("the port group's shaper on the TAP: %+v (ok %v)", sh, ok)
	}
	var box Resource
	for _, r := range got {
		if r.Kind == KindVeth && r.B.NS == "box1" {
			box = r
		}
	}
	if box.A.NS != "machine" || box.A.Master != br || box.B.Name != "eth0" || !OwnedBy(AliasPrefix+box.Owner, "rh") {
		t.Errorf("box1's vNIC: %+v, want its port in machine on %s and eth0 in box1", box, br)
	}
	if _, ok := byKey["addr/box1/eth0/10.10.0.2/24"]; !ok {
		t.Error("box1's address is not on its eth0 in its own namespace")
	}
	if _, ok := byKey["addr/"+NSName("rh", "guest1")+"/eth0/10.10.0.1/24"]; ok {
		t.Error("an address for a TAP guest: the guest owns its addresses")
	}
	if _, ok := byKey["netns/"+NSName("rh", "web1")]; !ok {
		t.Error("web1, a VM of vnet's own, has no namespace")
	}
}

func TestCheckHostFacts(t *testing.T) {
	doc := loadDoc(t, "../../examples/hosts/real-host.yaml")
	good := HostFacts{
		Links: map[string]LinkFacts{
			"eth1":       {Type: "device", Speed: 25e9},
			"tap-guest1": {Type: "tuntap", Tap: true},
		},
		Netns: map[string]bool{"box1": true},
	}
	speeds, err := CheckHostFacts(doc, "hv1", good, AllVMs)
	if err != nil || speeds["eth1"] != 25e9 {
		t.Fatalf("good facts: speeds %v, err %v", speeds, err)
	}
	for _, tc := range []struct {
		name string
		edit func(f *HostFacts)
		want string
	}{
		{"no device", func(f *HostFacts) { delete(f.Links, "eth1") }, `hosts[0].nics[0].device: device "eth1" does not exist on host hv1`},
		{"no speed", func(f *HostFacts) { f.Links["eth1"] = LinkFacts{Type: "veth"} }, "hosts[0].nics[0].speed: device eth1 reports no speed"},
		{"enslaved", func(f *HostFacts) { f.Links["eth1"] = LinkFacts{Type: "device", Speed: 1e9, Master: "br0"} }, "is a port of br0 already"},
		{"ours", func(f *HostFacts) {
			f.Links["eth1"] = LinkFacts{Type: "device", Speed: 1e9, Master: "vs1", MasterAlias: AliasPrefix + HostOwner("rh", "switch")}
		}, ""},
		{"other infra", func(f *HostFacts) {
			f.Links["eth1"] = LinkFacts{Type: "device", Speed: 1e9, Alias: AliasPrefix + DeviceOwner("other", "nic")}
		}, "used by another infrastructure"},
		{"underlay", func(f *HostFacts) { f.UnderlayLink = "eth1" }, "carries host hv1's underlay address"},
		{"default route", func(f *HostFacts) { f.Links["eth1"] = LinkFacts{Type: "device", Speed: 1e9, DefaultRoute: true} },
			"hosts[0].nics[0].device: device eth1 carries this machine's own traffic (the default route), which would stop once it is a switch's uplink: give the switch another NIC, or set shared: true"},
		{"addresses", func(f *HostFacts) {
			f.Links["eth1"] = LinkFacts{Type: "device", Speed: 1e9, Addresses: []string{"192.0.2.5/24", "2001:db8::5/64"}}
		}, "device eth1 carries this machine's own traffic (the addresses 192.0.2.5/24, 2001:db8::5/64)"},
		{"tun", func(f *HostFacts) { f.Links["tap-guest1"] = LinkFacts{Type: "tuntap"} }, "is a tuntap, not a TAP device"},
		{"no tap", func(f *HostFacts) { delete(f.Links, "tap-guest1") }, `vms[0].nics[0].attach.tap: TAP device "tap-guest1" does not exist`},
		{"no netns", func(f *HostFacts) { f.Netns = nil }, `vms[1].nics[0].attach.netns: namespace "box1" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := HostFacts{Links: map[string]LinkFacts{}, Netns: map[string]bool{}}
			for k, v := range good.Links {
				f.Links[k] = v
			}
			for k, v := range good.Netns {
				f.Netns[k] = v
			}
			tc.edit(&f)
			_, err := CheckHostFacts(doc, "hv1", f, AllVMs)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// A device that carries the machine's own traffic is taken only with
// shared: true, which says the spec means it.
func TestCheckHostFactsSharedDevice(t *testing.T) {
	src, err := os.ReadFile("../../examples/hosts/real-host.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shared := strings.Replace(string(src), "{name: vmnic0, device: eth1}", "{name: vmnic0, device: eth1, shared: true}", 1)
	doc, err := spec.Load("real-host.yaml", []byte(shared))
	if err != nil {
		t.Fatal(err)
	}
	f := HostFacts{
		Links: map[string]LinkFacts{"eth1": {Type: "device", Speed: 1e9, DefaultRoute: true, Addresses: []string{"192.0.2.5/24"}},
			"tap-guest1": {Type: "tuntap", Tap: true}},
		Netns: map[string]bool{"box1": true},
	}
	if _, err := CheckHostFacts(doc, "hv1", f, AllVMs); err != nil {
		t.Errorf("shared: true: %v", err)
	}
}
