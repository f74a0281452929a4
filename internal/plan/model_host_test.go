package plan

import (
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

func loadSpec(t *testing.T, path string) *spec.Spec {
	t.Helper()
	doc, err := spec.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return doc.Spec
}

func TestHostModelOfClusterSpec(t *testing.T) {
	s := loadSpec(t, "../../examples/cluster/three-hosts.yaml")
	got := Model(s, Options{Host: "hv1"})
	br, vtep := HostBridgeName("dc", "dvs"), VTEPName("dc", "dvs")
	web2MAC := StableMAC("dc", "vnic/web2/0")
	db1MAC := StableMAC("dc", "vnic/db1/0")
	want := map[string]bool{
		"netns/vnet.dc.web1":                                           true,
		"link/" + CurrentNS + "/" + br:                                 true,
		"link/vnet.dc.web1/eth0":                                       true,
		"addr/vnet.dc.web1/eth0/172.16.0.1/24":                         true,
		"link/" + CurrentNS + "/" + vtep:                               true,
		"fdb/" + CurrentNS + "/" + vtep + "/" + ZeroMAC + "/10.0.0.12": true,
		"fdb/" + CurrentNS + "/" + vtep + "/" + ZeroMAC + "/10.0.0.13": true,
		"fdb/" + CurrentNS + "/" + vtep + "/" + web2MAC + "/10.0.0.12": true,
		"fdb/" + CurrentNS + "/" + vtep + "/" + db1MAC + "/10.0.0.13":  true,
		// the port group's default security, on the VM's port
		"firewall/" + CurrentNS + "/" + FirewallTable("dc"):          true,
		"portsec/" + CurrentNS + "/" + VNICPortName("dc", "web1", 0): true,
	}
	for _, r := range got {
		if !want[r.Key()] {
			t.Errorf("unexpected %s (%s)", r.Key(), r)
		}
		delete(want, r.Key())
		switch r.Kind {
		case KindVeth:
			if r.B.NS != CurrentNS || r.B.Master != br {
				t.Errorf("vNIC port %+v: want it in %s on bridge %s", r.B, CurrentNS, br)
			}
		case KindVxlan:
			if r.VNI != 5001 || r.Local != "10.0.0.11" || r.Port != VXLANPort || r.Link != br || r.MTU != 1450 {
				t.Errorf("tunnel endpoint %s", r)
			}
		case KindBridge:
			if !OwnedBy(AliasPrefix+r.Owner, "dc") {
				t.Errorf("bridge owner %q does not name the infrastructure", r.Owner)
			}
		}
	}
	for k := range want {
		t.Errorf("missing %s", k)
	}
}

// The lab model stays what it was when no host is given, and a named host
// namespace takes the place of the current one.
func TestHostModelOptions(t *testing.T) {
	s := loadSpec(t, "../../examples/cluster/three-hosts.yaml")
	for _, r := range Model(s, Options{}) {
		if r.NS == CurrentNS || r.Kind == KindVxlan || r.Kind == KindFDB {
			t.Errorf("lab model has %s", r)
		}
	}
	for _, r := range Model(s, Options{Host: "hv2", HostNS: "machine2"}) {
		if r.Kind == KindBridge && r.NS != "machine2" {
			t.Errorf("bridge in %s, want machine2", r.NS)
		}
	}
	if got := Model(s, Options{Host: "nohost"}); len(got) != 0 {
		t.Errorf("a host the spec does not name gets %d resources", len(got))
	}
}

// On a lab spec the host model keeps switches and VMs and leaves out the
// emulated physical network.
func TestHostModelDropsEmulatedNetwork(t *testing.T) {
	s := loadSpec(t, "../../examples/demo.yaml")
	got := Model(s, Options{Host: "esx1"})
	if len(got) == 0 {
		t.Fatal("empty model")
	}
	for _, r := range got {
		switch {
		case r.Kind == KindLineRate || r.Kind == KindPool || r.Kind == KindFilter || r.Kind == KindSteer:
			t.Errorf("kept %s", r)
		case strings.Contains(r.Key(), PhysSwitch) || strings.Contains(r.Key(), "vnet.demo.esx1/"):
			t.Errorf("kept %s", r)
		case r.Kind == KindVxlan:
			t.Errorf("a spec without underlay addresses got %s", r)
		}
	}
}

func TestSwitchVNI(t *testing.T) {
	a := SwitchVNI("dc", &spec.Switch{Name: "dvs"})
	if a == 0 || a > spec.MaxVNI || a != SwitchVNI("dc", &spec.Switch{Name: "dvs"}) {
		t.Errorf("derived vni %d: want a stable one in 1..%d", a, spec.MaxVNI)
	}
	if b := SwitchVNI("dc", &spec.Switch{Name: "other"}); a == b {
		t.Errorf("two switches share vni %d", a)
	}
	if v := SwitchVNI("dc", &spec.Switch{Name: "dvs", VNI: 7}); v != 7 {
		t.Errorf("spec's vni 7 became %d", v)
	}
}

func TestCheckHostMTU(t *testing.T) {
	s := loadSpec(t, "../../examples/cluster/three-hosts.yaml")
	tests := []struct {
		underlay int
		want     string
	}{
		{1500, ""},
		{9000, ""},
		{0, ""},
		{1499, "switches[0].mtu: switch dvs's MTU 1450 needs 1500 on the underlay"},
	}
	for _, tt := range tests {
		err := CheckHostMTU(s, "hv1", tt.underlay)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("underlay %d: %v", tt.underlay, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("underlay %d: error %v, want %q", tt.underlay, err, tt.want)
		}
	}
}

func TestOwnedBy(t *testing.T) {
	tests := []struct {
		alias string
		want  bool
	}{
		{AliasPrefix + HostOwner("dc", "switch dvs on hv1"), true},
		{AliasPrefix + HostOwner("dc2", "switch dvs on hv1"), false},
		{AliasPrefix + "peer=vnet.dc.web1/eth0", true},
		{AliasPrefix + "peer=vnet.dc2.web1/eth0", false},
		{AliasPrefix + "switch dvs on hv1", false},
		{"dc: something", false},
	}
	for _, tt := range tests {
		if got := OwnedBy(tt.alias, "dc"); got != tt.want {
			t.Errorf("OwnedBy(%q) = %v", tt.alias, got)
		}
	}
}
