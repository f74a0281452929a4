package service

import (
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

func TestSpecJSON(t *testing.T) {
	src := "# c\nname: j1\nhosts:\n  - {name: h1, native: true, nics: [{name: eth0, speed: 1Gbit, mtu: 9000}]}\nz: null\nf: 1.5\nq: '007'\n"
	got, err := SpecJSON([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "name": "j1",
  "hosts": [
    {
      "name": "h1",
      "native": true,
      "nics": [
        {
          "name": "eth0",
          "speed": "1Gbit",
          "mtu": 9000
        }
      ]
    }
  ],
  "z": null,
  "f": 1.5,
  "q": "007"
}
`
	if string(got) != want {
		t.Errorf("JSON:\n%s\nwant:\n%s", got, want)
	}
	if _, err := SpecJSON([]byte("a: [")); err == nil {
		t.Error("bad YAML converted")
	}
}

// Every allocation is pinned but a TAP's MAC, which its guest chooses.
func TestPinnedLeavesTAPsMACs(t *testing.T) {
	src := `name: t1
hosts:
  - {name: h1, underlay: 192.0.2.1}
switches:
  - name: sw
    hosts: [h1]
    portgroups: [{name: pg}]
vms:
  - {name: q1, host: h1, nics: [{portgroup: pg, attach: {tap: tap0}}]}
  - {name: v1, host: h1, nics: [{portgroup: pg}]}
`
	doc, err := spec.Load("t1.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out, alloc, err := pinned(doc)
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.VMs[0].NICs[0].MAC != "" || out.Spec.VMs[1].NICs[0].MAC == "" || len(alloc.MACs) != 1 {
		t.Errorf("MACs %q %q, allocations %v", out.Spec.VMs[0].NICs[0].MAC, out.Spec.VMs[1].NICs[0].MAC, alloc.MACs)
	}
	if len(alloc.VNIs) != 0 || strings.Contains(string(out.Source), "vni") {
		t.Errorf("a switch on one host got a VNI: %v\n%s", alloc.VNIs, out.Source)
	}
}

func TestObjectYAML(t *testing.T) {
	src := []byte("name: o1\nswitches:\n  - name: sw\n    portgroups: [{name: pg, shaping: {egress: {average: 10Mbit}}}]\nvms:\n  - {name: v1, host: h1}\n")
	if got := objectYAML(src, DescribePortGroup, "pg"); got != "name: pg\nshaping:\n  egress:\n    average: 10Mbit\n" {
		t.Errorf("port group:\n%s", got)
	}
	if got := objectYAML(src, DescribeVM, "v1"); got != "name: v1\nhost: h1\n" {
		t.Errorf("vm:\n%s", got)
	}
	if got := objectYAML(src, DescribeNetwork, "v1"); got != "" {
		t.Errorf("a network that is not there:\n%s", got)
	}
	for _, k := range []string{"VM", "vms", "pg", "net", "network"} {
		if _, err := DescribeKind(k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	if _, err := DescribeKind("switch"); err == nil {
		t.Error("switch is a kind describe shows")
	}
}
