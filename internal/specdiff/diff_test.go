package specdiff

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vnet-project/vnet/internal/spec"
)

func load(t *testing.T, src string) *spec.Spec {
	t.Helper()
	doc, err := spec.Load("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	return doc.Spec
}

func baseSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/base.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// edit replaces each old text of the base spec by its new one; every old
// text must be there exactly once, so that a table row cannot go stale
// silently.
func edit(t *testing.T, src string, edits [][2]string) string {
	t.Helper()
	for _, e := range edits {
		if n := strings.Count(src, e[0]); n != 1 {
			t.Fatalf("edit %q: found %d times in the base spec, want once", e[0], n)
		}
		src = strings.Replace(src, e[0], e[1], 1)
	}
	return src
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name    string
		edits   [][2]string
		text    string
		summary string
	}{
		{
			name:    "equal, however written",
			edits:   [][2]string{{"{name: pg-mgmt}", "\n        name: pg-mgmt # the same, in block form"}},
			summary: "no change",
		},
		{
			name:    "a rate changes, printed as written",
			edits:   [][2]string{{"average: 100Mbit", "average: 200Mbit"}},
			text:    "~ portgroup pg-web: shaping.egress.average 100Mbit -> 200Mbit\n",
			summary: "~1 port group (shaping)",
		},
		{
			name:    "a size changes",
			edits:   [][2]string{{"burst: 64KiB", "burst: 1MiB"}},
			text:    "~ portgroup pg-web: shaping.egress.burst 64KiB -> 1MiB\n",
			summary: "~1 port group (shaping)",
		},
		{
			name: "a VM added with its vNIC",
			edits: [][2]string{{"  - name: app1\n", "  - name: web3\n    host: hv2\n    cpus: 0.5\n    nics:\n" +
				"      - {portgroup: pg-web, ip: 192.168.50.13/24}\n  - name: app1\n"}},
			text: "+ vm web3 (host hv2, cpus 0.5)\n" +
				"+ vnic eth0 of vm web3 (portgroup pg-web, ip 192.168.50.13/24)\n",
			summary: "+1 VM",
		},
		{
			name:  "a network removed, with the vNIC on it",
			edits: [][2]string{{"  - {name: green, vni: 4243, subnet: 10.2.0.0/24, gateway: 10.2.0.1, router: r1}\n", ""}, {"      - {network: green, ip: 10.2.0.11/24}\n", ""}},
			text: "- network green (vni 4243, subnet 10.2.0.0/24, gateway 10.2.0.1, router r1)\n" +
				"~ router r1: networks [blue, green] -> [blue]\n" +
				"- vnic eth1 of vm app1 (network green, ip 10.2.0.11/24)\n",
			summary: "~1 router (networks), -1 network, -1 vNIC",
		},
		{
			name:    "a default written out is a change",
			edits:   [][2]string{{"{name: pg-mgmt}", "{name: pg-mgmt, pool: vm}"}},
			text:    "~ portgroup pg-mgmt: pool (unset) -> vm\n",
			summary: "~1 port group (pool)",
		},
		{
			name:    "a pointer set to its zero value is a change",
			edits:   [][2]string{{"{forgedTransmits: false}", "{forgedTransmits: false, promiscuous: false}"}},
			text:    "~ portgroup pg-web: security.promiscuous (unset) -> false\n",
			summary: "~1 port group (security)",
		},
		{
			name:  "several fields of one object",
			edits: [][2]string{{"  - name: web2\n    host: hv2\n", "  - name: web2\n    host: hv1\n    cpus: 2\n"}},
			text: "~ vm web2:\n" +
				"    host hv2 -> hv1\n" +
				"    cpus (unset) -> 2\n",
			summary: "~1 VM (host, cpus)",
		},
		{
			name:    "a rule inserted at the top is one rule added",
			edits:   [][2]string{{"          rules:\n", "          rules:\n            - {action: deny, direction: ingress, from: 10.9.0.0/16}\n"}},
			text:    "+ acl-rule 0 of portgroup pg-web (action deny, direction ingress, from 10.9.0.0/16)\n",
			summary: "+1 ACL rule",
		},
		{
			name:    "a rule changed in place",
			edits:   [][2]string{{"dport: 443}", "dport: 8443}"}},
			text:    "~ acl-rule 1 of portgroup pg-web: dport 443 -> 8443\n",
			summary: "~1 ACL rule (dport)",
		},
		{
			name:    "a rule removed from the middle",
			edits:   [][2]string{{"            - {action: allow, direction: ingress, proto: tcp, dport: 443}\n", ""}},
			text:    "- acl-rule 1 of portgroup pg-web (action allow, direction ingress, proto tcp, dport 443)\n",
			summary: "-1 ACL rule",
		},
		{
			name:    "a pool's limit",
			edits:   [][2]string{{"{shares: low, limit: 200Mbit}", "{shares: low, limit: 300Mbit, reservation: 50Mbit}"}},
			text:    "~ pool backup of switch dvs0:\n    limit 200Mbit -> 300Mbit\n    reservation (unset) -> 50Mbit\n",
			summary: "~1 pool (limit, reservation)",
		},
		{
			name: "a host added with its NIC and an uplink",
			edits: [][2]string{
				{"  - {name: hv2, underlay: 192.0.2.12, nics: [{name: vmnic0, speed: 1Gbit}]}\n",
					"  - {name: hv2, underlay: 192.0.2.12, nics: [{name: vmnic0, speed: 1Gbit}]}\n  - {name: hv10, underlay: 192.0.2.20, nics: [{name: vmnic0, speed: 10Gbit}]}\n"},
				{"{hv1: vmnic0, hv2: vmnic0}", "{hv1: vmnic0, hv2: vmnic0, hv10: vmnic0}"},
			},
			text: "+ host hv10 (underlay 192.0.2.20)\n" +
				"+ nic vmnic0 of host hv10 (speed 10Gbit)\n" +
				"~ uplink up0 of switch dvs0: nics.hv10 (unset) -> vmnic0\n",
			summary: "+1 host, ~1 uplink (nics)",
		},
		{
			name:    "a port group moves to another switch",
			edits:   [][2]string{{"      - {name: pg-mgmt}\n", "  - {name: vs1, hosts: [hv1, hv2], portgroups: [{name: pg-mgmt}]}\n"}},
			text:    "+ switch vs1 (hosts [hv1, hv2])\n~ portgroup pg-mgmt: switch dvs0 -> vs1\n",
			summary: "+1 switch, ~1 port group (switch)",
		},
		{
			name:    "a host port's default name is its identity",
			edits:   [][2]string{{"{host: hv2, portgroup: pg-mgmt, ip: 192.168.60.2/24}", "{host: hv2, portgroup: pg-mgmt, ip: 192.168.60.2/24, name: vmk0}"}},
			summary: "no change",
		},
		{
			name:    "a vNIC disconnected",
			edits:   [][2]string{{"{portgroup: pg-web, ip: 192.168.50.12/24}", "{portgroup: pg-web, ip: 192.168.50.12/24, connected: false}"}},
			text:    "~ vnic eth0 of vm web2: connected (unset) -> false\n",
			summary: "~1 vNIC (connected)",
		},
		{
			name:    "the infrastructure renamed",
			edits:   [][2]string{{"name: shop\n", "name: shop2\n"}},
			text:    "~ infrastructure shop2: name shop -> shop2\n",
			summary: "~1 infrastructure (name)",
		},
		{
			name:  "a port group removed with its rules",
			edits: [][2]string{{"      - {name: pg-mgmt}\n", ""}, {"  - {host: hv1, portgroup: pg-mgmt, ip: 192.168.60.1/24}\n  - {host: hv2, portgroup: pg-mgmt, ip: 192.168.60.2/24}\n", ""}},
			text: "- hostport vmk0 of host hv1 (portgroup pg-mgmt, ip 192.168.60.1/24)\n" +
				"- hostport vmk0 of host hv2 (portgroup pg-mgmt, ip 192.168.60.2/24)\n" +
				"- portgroup pg-mgmt (switch dvs0)\n",
			summary: "-2 host ports, -1 port group",
		},
	}
	base := baseSource(t)
	old := load(t, base)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := load(t, edit(t, base, tt.edits))
			d := Compare(old, next)
			if whole := compareSkipping(old, next, vmSkip{}); !reflect.DeepEqual(d, whole) {
				t.Errorf("leaving the VMs alike out changed the diff:\n%s\nwant:\n%s", d, whole)
			}
			if got := d.String(); got != tt.text {
				t.Errorf("text:\n%s\nwant:\n%s", got, tt.text)
			}
			if got := d.Summary(); got != tt.summary {
				t.Errorf("summary %q, want %q", got, tt.summary)
			}
			if d.Equal() != (tt.text == "") || d.ExitCode() != map[bool]int{true: 0, false: 1}[tt.text == ""] {
				t.Errorf("Equal %v, ExitCode %d, for a diff of %d changes", d.Equal(), d.ExitCode(), len(d.Changes))
			}
		})
	}
}

// A removed object's children go with it, and a summary counts only the
// object.
func TestRemovedParentImpliesChildren(t *testing.T) {
	base := baseSource(t)
	src := edit(t, base, [][2]string{{"  - name: app1\n    host: hv1\n    nics:\n      - {network: blue, ip: 10.1.0.11/24}\n      - {network: green, ip: 10.2.0.11/24}\n", ""}})
	d := Compare(load(t, base), load(t, src))
	want := "- vm app1 (host hv1)\n" +
		"- vnic eth0 of vm app1 (network blue, ip 10.1.0.11/24)\n" +
		"- vnic eth1 of vm app1 (network green, ip 10.2.0.11/24)\n"
	if got := d.String(); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	if got := d.Summary(); got != "-1 VM" {
		t.Errorf("summary %q", got)
	}
	for _, c := range d.Changes {
		if c.Kind == KindVNIC && !c.Implied {
			t.Errorf("%s is not implied by its VM's removal", c.Ref())
		}
	}
}

func TestNothingBeforeOrAfter(t *testing.T) {
	s := load(t, baseSource(t))
	first := Compare(nil, s)
	if got := first.Summary(); got != "+2 hosts, +1 switch, +2 networks, +1 router, +3 VMs" {
		t.Errorf("first apply: %q", got)
	}
	for _, c := range first.Changes {
		if c.Op != Added {
			t.Errorf("first apply: %s %s", c.Op, c.Ref())
		}
	}
	gone := Compare(s, nil)
	if got := gone.Summary(); got != "-2 hosts, -1 switch, -2 networks, -1 router, -3 VMs" {
		t.Errorf("destroy: %q", got)
	}
	if len(first.Changes) != len(gone.Changes) {
		t.Errorf("%d changes from nothing, %d to nothing", len(first.Changes), len(gone.Changes))
	}
	if !Compare(nil, nil).Equal() || !Compare(s, s).Equal() {
		t.Error("a spec differs from itself")
	}
}

// The order of a diff is the same however the spec orders its objects,
// and numbers in names sort as numbers.
func TestOrderIsStable(t *testing.T) {
	a := load(t, "name: x\nhosts: [{name: h}]\nswitches: [{name: s, hosts: [h], portgroups: [{name: p}]}]\nvms: []\n")
	var vms, rev strings.Builder
	names := []string{"vm2", "vm10", "vm1", "db"}
	for i := range names {
		vms.WriteString("  - {name: " + names[i] + ", host: h, nics: [{portgroup: p}]}\n")
		rev.WriteString("  - {name: " + names[len(names)-1-i] + ", host: h, nics: [{portgroup: p}]}\n")
	}
	b := load(t, strings.Replace("name: x\nhosts: [{name: h}]\nswitches: [{name: s, hosts: [h], portgroups: [{name: p}]}]\nvms:\nVMS", "VMS", vms.String(), 1))
	c := load(t, strings.Replace("name: x\nhosts: [{name: h}]\nswitches: [{name: s, hosts: [h], portgroups: [{name: p}]}]\nvms:\nVMS", "VMS", rev.String(), 1))
	d1, d2 := Compare(a, b).String(), Compare(a, c).String()
	if d1 != d2 {
		t.Errorf("order depends on the spec's:\n%s\n%s", d1, d2)
	}
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(d1), "\n") {
		if strings.HasPrefix(line, "+ vm ") {
			order = append(order, strings.Fields(line)[2])
		}
	}
	if got := strings.Join(order, " "); got != "db vm1 vm2 vm10" {
		t.Errorf("VMs in order %s", got)
	}
}

func TestNaturalCompare(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"web2", "web10", -1}, {"web10", "web2", 1}, {"web02", "web2", 0}, {"a", "b", -1},
		{"eth9", "eth10", -1}, {"", "a", -1}, {"x1y", "x1z", -1}, {"7", "07", 0},
	} {
		got := naturalCompare(tt.a, tt.b)
		if (got < 0) != (tt.want < 0) || (got > 0) != (tt.want > 0) {
			t.Errorf("naturalCompare(%q, %q) = %d, want sign of %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestAlign(t *testing.T) {
	for _, tt := range []struct {
		a, b string // one letter a rule
		want string // the pairs, "ij" with - for none
	}{
		{"abc", "abc", "00 11 22"},
		{"abc", "xabc", "-0 01 12 23"},
		{"abc", "ac", "00 1- 21"},
		{"abc", "axc", "00 11 22"},
		{"abcd", "bxd", "0- 10 21 32"},
		{"", "ab", "-0 -1"},
		{"ab", "", "0- 1-"},
		{"abc", "cab", "-0 01 12 2-"},
	} {
		var got []string
		for _, p := range align(letters(tt.a), letters(tt.b)) {
			got = append(got, pos(p.old)+pos(p.new))
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("align(%q, %q) = %s, want %s", tt.a, tt.b, g, tt.want)
		}
	}
}

func TestEncodings(t *testing.T) {
	base := baseSource(t)
	d := Compare(load(t, base), load(t, edit(t, base, [][2]string{{"dport: 443}", "dport: 8443}"}})))
	j, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"changes":[{"op":"change","kind":"acl-rule","name":"1","of":{"kind":"portgroup","name":"pg-web"},"fields":[{"path":"dport","from":"443","to":"8443"}]}]}`
	if string(j) != want {
		t.Errorf("JSON:\n%s\nwant:\n%s", j, want)
	}
	var back Diff
	if err := json.Unmarshal(j, &back); err != nil || back.Summary() != d.Summary() {
		t.Errorf("JSON round trip: %v, %q", err, back.Summary())
	}
	y, err := yaml.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var fromYAML Diff
	if err := yaml.Unmarshal(y, &fromYAML); err != nil || fromYAML.String() != d.String() {
		t.Errorf("YAML round trip: %v\n%s", err, y)
	}
	if e, _ := json.Marshal(Compare(nil, nil)); string(e) != `{"changes":[]}` {
		t.Errorf("an equal diff is %s", e)
	}
}

// A VM left out of a diff because both specs hold it alike changes
// nothing the diff says, whatever else changes around it: a VM of a
// repeated name is compared as before (the first of the name stands for
// it, with the vNICs of the others the first lacks).
func TestVMsAlikeLeftOut(t *testing.T) {
	base := baseSource(t)
	vm := "  - name: web2\n    host: hv2\n    nics:\n      - {portgroup: pg-web, ip: 192.168.50.12/24}\n"
	twice := "  - name: web2\n    host: hv1\n    nics:\n      - {portgroup: pg-web, ip: 192.168.50.12/24}\n" +
		"      - {portgroup: pg-web, ip: 192.168.50.13/24}\n"
	tests := []struct {
		name     string
		old, new string
	}{
		{"a VM added", base, strings.Replace(base, vm, vm+strings.ReplaceAll(vm, "web2", "web3"), 1)},
		{"a VM removed", base, strings.Replace(base, vm, "", 1)},
		{"an address changed", base, strings.Replace(base, "192.168.50.12/24", "192.168.50.22/24", 1)},
		{"a VM renamed", base, strings.Replace(base, "name: web2", "name: web9", 1)},
		{"the infrastructure renamed", base, strings.Replace(base, "name: "+load(t, base).Name, "name: other", 1)},
		{"a name repeated after", base, strings.Replace(base, vm, vm+twice, 1)},
		{"a name repeated before", strings.Replace(base, vm, vm+twice, 1), base},
		{"a name repeated on both sides", strings.Replace(base, vm, vm+twice, 1), strings.Replace(base, vm, vm+twice, 1)},
	}
	for _, tt := range tests {
		old, next := unchecked(t, tt.old), unchecked(t, tt.new)
		if got, want := Compare(old, next), compareSkipping(old, next, vmSkip{}); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n%s\nwant:\n%s", tt.name, got, want)
		}
	}
}

// unchecked is a spec as written, valid or not (a repeated name).
func unchecked(t *testing.T, src string) *spec.Spec {
	t.Helper()
	var s spec.Spec
	if err := yaml.Unmarshal([]byte(src), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// BenchmarkCompareOneVMOf1000 is a change of one VM's address among
// 1,000: the diff a history entry of such an apply makes.
func BenchmarkCompareOneVMOf1000(b *testing.B) {
	old, next := &spec.Spec{Name: "big"}, &spec.Spec{Name: "big"}
	for i := range 1000 {
		vm := spec.VM{Name: fmt.Sprintf("vm%d", i), Host: "h1", NICs: []spec.VNIC{{PortGroup: "pg", IP: fmt.Sprintf("10.%d.%d.1/8", i/256, i%256)}}}
		old.VMs = append(old.VMs, vm)
		vm.NICs = slices.Clone(vm.NICs)
		if i == 500 {
			vm.NICs[0].IP = "10.255.255.1/8"
		}
		next.VMs = append(next.VMs, vm)
	}
	b.ReportAllocs()
	for b.Loop() {
		if d := Compare(old, next); len(d.Changes) != 1 {
			b.Fatalf("%d changes", len(d.Changes))
		}
	}
}
