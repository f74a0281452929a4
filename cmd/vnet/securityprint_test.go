package main

import (
	"bytes"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

func TestPrintSecurity(t *testing.T) {
	var b bytes.Buffer
	printSecurity(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no protected ports, yet: %q", b.String())
	}
	printSecurity(&b, []status.PortSecurity{
		{Port: "web eth0", PortGroup: "pg-web", Policy: "mac, unicast, acl(2 rules, default deny)", Counters: map[string]uint64{"acl[1]": 3, "acl-default": 7}},
		{Port: "app eth0", PortGroup: "pg-app", Policy: "mac, unicast"},
	})
	out := b.String()
	for _, want := range []string{"SECURITY PORT", "web eth0", "acl-default 7, acl[1] 3", "app eth0  "} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// Over etcd, each host's ports are shown in the single machine's form,
// under the host they are on; a host without counters shows none.
func TestPrintClusterSecurity(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 10, 0, 0, time.UTC)
	web := []status.PortSecurity{{Port: "web1 eth0", PortGroup: "pg-web", Policy: "mac, ra, unicast, acl(2 rules, default deny)",
		Counters: map[string]uint64{"acl[0]": 4, "acl-default": 6}}}
	app := []status.PortSecurity{{Port: "app1 eth0", PortGroup: "pg-app", Policy: "mac, ip, ra, unicast",
		Counters: map[string]uint64{"forged-mac": 3}}}
	cs := clusterStatus{Name: "dc", SpecFile: "dc.yaml", Generation: 2, AppliedAt: now, Hosts: []etcdstore.HostView{
		{Host: "hv1", State: etcdstore.HostCurrent, Report: &etcdstore.Report{Host: "hv1", Generation: 2, Resources: 9, At: now, Security: web}},
		{Host: "hv2", State: etcdstore.HostCurrent, Report: &etcdstore.Report{Host: "hv2", Generation: 2, Resources: 9, At: now, Security: app, SecurityOmitted: 2}},
		{Host: "hv3", State: etcdstore.HostCurrent, Report: &etcdstore.Report{Host: "hv3", Generation: 2, Resources: 4, At: now}},
		{Host: "hv4", State: etcdstore.HostGone},
	}}
	var b bytes.Buffer
	printClusterStatus(&b, cs, now)
	out := b.String()
	var single bytes.Buffer
	printSecurity(&single, web)
	for _, want := range []string{"4 hosts: 3 current, 1 gone\n\nSECURITY PORT ON hv1", "acl(2 rules, default deny)  acl-default 6, acl[0] 4\n\nSECURITY PORT ON hv2",
		"app1 eth0", "forged-mac 3\n(and 2 ports with a policy, not reported)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	// The same row as on one machine.
	row := strings.Fields(strings.Split(strings.TrimSpace(single.String()), "\n")[1])
	found := false
	for _, line := range strings.Split(out, "\n") {
		found = found || reflect.DeepEqual(strings.Fields(line), row)
	}
	if !found {
		t.Errorf("hv1's row differs from one machine's %q:\n%s", row, out)
	}
	for _, unwanted := range []string{"ON hv3", "ON hv4"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("%q in:\n%s", unwanted, out)
		}
	}
}

// An infrastructure destroyed while a host still reports it says so, and
// shows the host whose removal failed as failed, with its error.
func TestPrintRemovedClusterStatus(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 10, 0, 0, time.UTC)
	cs := clusterStatus{Name: "dc", Removed: true, Hosts: []etcdstore.HostView{
		{Host: "hv2", State: etcdstore.HostFailed, Report: &etcdstore.Report{Host: "hv2", Generation: 2, Resources: 9, At: now,
			Removing: true, Errors: []string{"destroy dc: veth vn1: busy"}}},
		{Host: "hv3", State: etcdstore.HostUnexpected, Report: &etcdstore.Report{Host: "hv3", Generation: 2, Resources: 4, At: now}},
	}}
	var b bytes.Buffer
	printClusterStatus(&b, cs, now)
	out := b.String()
	for _, want := range []string{"infra dc (destroyed: no longer in etcd, but hosts still report it)", "destroy dc: veth vn1: busy",
		"2 hosts: 1 failed, 1 unexpected"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`hv2 +failed +2 +9`).MatchString(out) {
		t.Errorf("hv2 not shown failed:\n%s", out)
	}
}
