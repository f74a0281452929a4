package spec

import (
	"strings"
	"testing"
)

const editSrc = `# a comment that must survive
name: e
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: sw0
    uplinks: [{name: u1, nics: {esx1: vmnic0}}]
    portgroups: [{name: pg-a}, {name: pg-b}]
vms:
  - name: vm1
    host: esx1
    nics:
      - {portgroup: pg-a, ip: 10.0.0.1/24}
      - {portgroup: pg-a, ip: 10.0.1.1/24}
`

func TestSetVNIC(t *testing.T) {
	doc, err := Load("e.yaml", []byte(editSrc))
	if err != nil {
		t.Fatal(err)
	}
	moved, err := SetVNIC(doc, "vm1", "eth1", "pg-b", true)
	if err != nil {
		t.Fatal(err)
	}
	if got := moved.Spec.VMs[0].NICs[1].PortGroup; got != "pg-b" {
		t.Errorf("eth1 on %s, want pg-b", got)
	}
	if moved.Spec.VMs[0].NICs[0].PortGroup != "pg-a" || !strings.Contains(string(moved.Source), "# a comment that must survive") {
		t.Errorf("the rest of the spec changed:\n%s", moved.Source)
	}
	cut, err := SetVNIC(moved, "vm1", "1", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if n := cut.Spec.VMs[0].NICs[1]; n.IsConnected() || n.PortGroup != "pg-b" {
		t.Errorf("after unlink: %+v", n)
	}
	back, err := SetVNIC(cut, "vm1", "eth1", "", true)
	if err != nil || !back.Spec.VMs[0].NICs[1].IsConnected() || strings.Contains(string(back.Source), "connected") {
		t.Errorf("relink: %v\n%s", err, back.Source)
	}
	for _, bad := range []struct{ vm, nic, pg, want string }{
		{"vm9", "eth0", "pg-b", `no VM "vm9"`},
		{"vm1", "eth5", "pg-b", "VM vm1 has 2 vNICs"},
		{"vm1", "wlan0", "pg-b", "want eth0, eth1"},
		{"vm1", "eth0", "pg-zzz", `unknown port group "pg-zzz"`},
	} {
		if _, err := SetVNIC(doc, bad.vm, bad.nic, bad.pg, true); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("SetVNIC(%s %s %s) = %v, want %q", bad.vm, bad.nic, bad.pg, err, bad.want)
		}
	}
}
