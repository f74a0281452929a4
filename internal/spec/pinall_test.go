package spec

import (
	"strings"
	"testing"
)

func TestPinAllocations(t *testing.T) {
	src := `name: p1
hosts:
  - {name: h1, underlay: 192.0.2.1}
  - {name: h2, underlay: 192.0.2.2}
switches:
  - name: sw
    hosts: [h1, h2]
    portgroups: [{name: pg}]
  - name: given
    hosts: [h1]
    vni: 77
    portgroups: [{name: pg2}]
networks:
  - {name: blue, subnet: 10.1.0.0/24}
vms:
  - name: a
    host: h1
    nics:
      - portgroup: pg   # a comment that stays
        ip: 10.0.0.1/24
      - {network: blue, ip: 10.1.0.1/24, mac: "02:00:00:00:00:0a"}
`
	doc, err := Load("p1.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	pins := Pins{
		MACs:        map[string][]string{"a": {"02:00:00:00:00:01", "02:00:00:00:00:02"}},
		SwitchVNIs:  map[string]int{"sw": 5001, "given": 99},
		NetworkVNIs: map[string]int{"blue": 4242},
	}
	got, err := PinAllocations(doc, pins)
	if err != nil {
		t.Fatal(err)
	}
	s := got.Spec
	if s.Switches[0].VNI != 5001 || s.Switches[1].VNI != 77 || s.Networks[0].VNI != 4242 {
		t.Errorf("VNIs: %d %d %d; want 5001, the given 77, 4242", s.Switches[0].VNI, s.Switches[1].VNI, s.Networks[0].VNI)
	}
	if s.VMs[0].NICs[0].MAC != "02:00:00:00:00:01" || s.VMs[0].NICs[1].MAC != "02:00:00:00:00:0a" {
		t.Errorf("MACs: %q %q; want the pinned one and the given one", s.VMs[0].NICs[0].MAC, s.VMs[0].NICs[1].MAC)
	}
	if !strings.Contains(string(got.Source), "# a comment that stays") {
		t.Errorf("the comment went:\n%s", got.Source)
	}
	// Pinned once, nothing more to write: the document comes back as is.
	if again, err := PinAllocations(got, pins); err != nil || again != got {
		t.Errorf("pinning a pinned spec: %v, same document %v", err, again == got)
	}
	// A pin that makes the spec invalid is refused, as any spec is.
	if _, err := PinAllocations(doc, Pins{NetworkVNIs: map[string]int{"blue": 77}}); err == nil {
		t.Error("a VNI two objects share was pinned")
	}
}
