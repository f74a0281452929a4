package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// vnet status --etcd lists, under each host, the VMs the spec places there
// with their vNICs, as status on one machine does, each port in its
// host's standing; with the MACs vnet get writes in.
func TestStatusOverEtcdListsVMsPerHost(t *testing.T) {
	ep := startServer(t)
	dir := t.TempDir()
	f := filepath.Join(dir, "vms.yaml")
	os.WriteFile(f, []byte(`name: vmsph
hosts:
  - {name: hv1, underlay: 192.0.2.1, nics: [{name: eth0, speed: 1Gbit}]}
  - {name: hv2, underlay: 192.0.2.2, nics: [{name: eth0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: eth0, hv2: eth0}}]
    portgroups: [{name: pg-vm}]
vms:
  - {name: web1, host: hv1, cpus: 0.5, nics: [{portgroup: pg-vm, ip: 10.20.0.1/24}]}
  - {name: db1, host: hv2, nics: [{portgroup: pg-vm, ip: 10.20.0.2/24, mac: "02:00:00:00:00:02"}]}
`), 0o644)
	if out, code := run(t, dir, "apply", f, "--etcd", ep); code != 0 {
		t.Fatalf("apply: exit %d %s", code, out)
	}
	out, code := run(t, dir, "status", "vmsph", "--etcd", ep)
	got, _ := run(t, dir, "get", "vmsph", "--etcd", ep)
	mac := regexp.MustCompile(`name: web1.*mac: ['"]?([0-9a-f:]{17})`).FindStringSubmatch(got)
	if code != 0 || mac == nil {
		t.Fatalf("status: exit %d\n%s\nget:\n%s", code, out, got)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^VMS ON hv1 \(gone\)\nVM +CPUS +VNIC +PORT GROUP +MAC +IP +STATE\nweb1 +0\.5 +eth0 +pg-vm +` + mac[1] + ` +10\.20\.0\.1/24 +host gone$`),
		regexp.MustCompile(`(?m)^VMS ON hv2 \(gone\)\nVM +CPUS +VNIC +PORT GROUP +MAC +IP +STATE\ndb1 +- +eth0 +pg-vm +02:00:00:00:00:02 +10\.20\.0\.2/24 +host gone$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("status --etcd does not match %s:\n%s", want, out)
		}
	}
	js, _ := run(t, dir, "status", "vmsph", "--etcd", ep, "-o", "json")
	if !strings.Contains(js, `"vms": [`) || !strings.Contains(js, `"name": "db1"`) {
		t.Errorf("status --etcd -o json has no VMs:\n%s", js)
	}
}
