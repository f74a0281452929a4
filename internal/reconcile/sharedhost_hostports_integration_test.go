package reconcile_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// hostPortSpec is an infrastructure of one real host with a VM and two
// host ports on one switch: vmk0 by default and nfs0 by name. Each
// infrastructure of a machine has a subnet of its own (net, e.g. "10.41"),
// since the machine routes to every host port's subnet.
func hostPortSpec(infra, net string) string {
	return fmt.Sprintf(`name: %[1]s
hosts:
  - name: hv1
switches:
  - {name: sw, hosts: [hv1], portgroups: [{name: pg}]}
vms:
  - {name: web1, host: hv1, nics: [{portgroup: pg, ip: %[2]s.0.1/24}]}
hostports:
  - {host: hv1, portgroup: pg, ip: %[2]s.0.11/24}
  - {host: hv1, portgroup: pg, ip: %[2]s.1.11/24, name: nfs%[3]s}
`, infra, net, strings.ReplaceAll(net, ".", ""))
}

// hostPortLinks are the names on the machine of infra's host ports' ends
// and switch ports, as the spec src models them.
func hostPortLinks(t *testing.T, src string) []string {
	t.Helper()
	doc, err := spec.Load("shared.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, hp := range doc.Spec.HostPorts {
		out = append(out, plan.HostPortLink(doc.Spec, i), plan.HostPortSwitchPortOnHost(doc.Spec.Name, hp.Host, doc.Spec.HostPortName(i)))
	}
	return out
}

// reachesHostPort says whether web1 of infra opens a TCP connection to the
// machine at addr, its host port's address.
func (h *sharedHost) reachesHostPort(t *testing.T, infra, addr string) error {
	t.Helper()
	return answers(t, infra, h.machine, addr)
}

// Two infrastructures, each with a host port vmk0 (the default name) on
// one machine, get each their own host port and switch port there; both
// carry their VM's traffic, and destroying one leaves the other as it was.
func TestTwoInfrastructuresOfOneHostHaveHostPortsOfOneName(t *testing.T) {
	h := newSharedHost(t, "hp")
	blue, green := nstest.Infra("hpblue"), nstest.Infra("hpgreen")
	blueSrc, greenSrc := hostPortSpec(blue, "10.41"), hostPortSpec(green, "10.42")
	h.applySpec(t, blueSrc)
	h.applySpec(t, greenSrc)
	blueLinks, greenLinks := hostPortLinks(t, blueSrc), hostPortLinks(t, greenSrc)
	links := h.links(t)
	for _, l := range append(append([]string{}, blueLinks...), greenLinks...) {
		if !links[l] {
			t.Errorf("host port link %s is not in the machine: %v", l, links)
		}
	}
	for _, c := range []struct{ infra, src, addr string }{{blue, blueSrc, "10.41.0.11:7111"}, {green, greenSrc, "10.42.0.11:7112"}} {
		if err := h.reachesHostPort(t, c.infra, c.addr); err != nil {
			t.Errorf("%s: web1 does not reach its vmk0: %v", c.infra, err)
		}
		if res := h.applySpec(t, c.src); !res.Plan.Empty() {
			t.Errorf("a second apply of %s changes:\n%s", c.infra, res.Plan)
		}
	}
	before := map[string][]string{}
	for _, l := range greenLinks {
		before[l] = nstest.LinkState(t, h.machine, l)
	}
	if _, err := h.eng.Destroy(blue); err != nil {
		t.Fatal(err)
	}
	nstest.AssertGone(t, blue)
	links = h.links(t)
	for _, l := range blueLinks {
		if links[l] {
			t.Errorf("%s's host port link %s left after its destroy", blue, l)
		}
	}
	for _, l := range greenLinks {
		if after := nstest.LinkState(t, h.machine, l); strings.Join(after, "\n") != strings.Join(before[l], "\n") {
			t.Errorf("destroying %s changed %s's %s:\nbefore %v\nafter  %v", blue, green, l, before[l], after)
		}
	}
	if err := h.reachesHostPort(t, green, "10.42.0.11:7113"); err != nil {
		t.Errorf("%s after destroying %s: web1 does not reach its vmk0: %v", green, blue, err)
	}
	if res := h.applySpec(t, greenSrc); !res.Plan.Empty() {
		t.Errorf("an apply of %s after destroying %s changes:\n%s", green, blue, res.Plan)
	}
}

// A machine that an older build applied has its host ports named as the
// lab names them: vmk0 for one without a name, and each switch port by
// the host port's name alone. The first apply of this build replaces them
// with the new names, the host port carries traffic again, and the next
// apply changes nothing.
func TestHostPortsOfTheOldNamesAreReplaced(t *testing.T) {
	h := newSharedHost(t, "hpupg")
	infra := nstest.Infra("hpupg")
	src := hostPortSpec(infra, "10.43")
	h.applySpec(t, src)
	links := hostPortLinks(t, src)
	// Those builds named a switch port on the machine as the lab does.
	old := map[string]string{ // the new names by the old
		"vmk0":                             links[0],
		plan.HostPortSwitchPort("vmk0"):    links[1],
		plan.HostPortSwitchPort("nfs1043"): links[3],
	}
	// The end's new name is in its switch port's alias: an older build
	// wrote the old one there.
	var peerAlias string
	nstest.InNS(t, h.machine, func(nh *netlink.Handle) error {
		l, err := nh.LinkByName(links[1])
		if err == nil {
			peerAlias = l.Attrs().Alias
		}
		return err
	})
	setLinkAlias(t, h.machine, links[1], strings.Replace(peerAlias, links[0], "vmk0", 1))
	for o, n := range old {
		renameLink(t, h.machine, n, o)
	}
	h.oldRecord(t, infra, old)
	if res := h.applySpec(t, src); res.Plan.Empty() {
		t.Errorf("the first apply of this build leaves the host ports of the old names")
	}
	now := h.links(t)
	for o, n := range old {
		if now[o] || !now[n] {
			t.Errorf("after the apply: old link %s there %v, new %s there %v", o, now[o], n, now[n])
		}
	}
	if err := h.reachesHostPort(t, infra, "10.43.0.11:7114"); err != nil {
		t.Errorf("after the apply web1 does not reach vmk0: %v", err)
	}
	if res := h.applySpec(t, src); !res.Plan.Empty() {
		t.Errorf("a second apply changes:\n%s", res.Plan)
	}
}
