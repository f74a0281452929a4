package reconcile_test

import (
	"bytes"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// attachedSpec is one host of the lab with a VM of vnet's own and, when
// boxes are given, containers whose namespaces the test made, each with
// one vNIC named net1 on the port group.
func attachedSpec(infra string, boxes ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `name: %s
hosts:
  - name: hv1
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: vmnic0}}]
    portgroups:
      - name: pg
        subnet: 10.30.0.0/24
        shaping: {ingress: {average: 200Mbit, burst: 256KiB}}
vms:
  - {name: web1, host: hv1, nics: [{portgroup: pg, ip: 10.30.0.1/24}]}
`, infra)
	for i, box := range boxes {
		fmt.Fprintf(&b, "  - {name: c%d, host: hv1, nics: [{portgroup: pg, ip: 10.30.0.%d/24, attach: {netns: %s, ifname: net1, container: id%d, cni: test}}]}\n",
			i, 10+i, box, i)
	}
	return b.String()
}

// On one machine, without etcd, a vNIC goes into a namespace the test made
// (as a container runtime does): its switch port is in the lab host's
// namespace with the port group's shaping, TCP crosses to a VM of vnet's
// own, a second apply changes nothing, a second container is added
// without touching the first, a vNIC moves from one container to another
// and destroy takes the vNICs out and leaves the namespaces.
// otherVM finds, in an action, the VMs a container's addition must not
// touch, by owner or namespace: not a MAC that happens to end in c0.
var otherVM = regexp.MustCompile(`\bvm (c0|web1)\b|\.(c0|web1)\b`)

func TestAttachNamespaceOnOneMachine(t *testing.T) {
	eng := nstest.Engine(t)
	infra := nstest.Infra("attach")
	box0, box1 := nstest.Machine(t, "box0"), nstest.Machine(t, "box1")
	var trace bytes.Buffer
	eng.Trace = &trace

	nstest.Apply(t, eng, attachedSpec(infra, box0))
	var mac string
	nstest.InNS(t, box0, func(h *netlink.Handle) error {
		l, err := h.LinkByName("net1")
		if err != nil {
			return err
		}
		mac = l.Attrs().HardwareAddr.String()
		return nil
	})
	if want := plan.StableMAC(infra, "vnic/c0/0"); mac != want {
		t.Errorf("net1 in the container has MAC %s, want %s", mac, want)
	}
	l := nstest.Listen(t, box0, "10.30.0.10:5001")
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	c, err := nstest.Dial(t, nstest.NSName(infra, "web1"), "10.30.0.10:5001", net.Dialer{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("web1 -> container: %v", err)
	}
	buf := make([]byte, 5)
	if _, err := c.Read(buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read from the container: %q, %v", buf, err)
	}
	c.Close()

	doc, err := spec.Load("t.yaml", []byte(attachedSpec(infra, box0)))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := eng.Plan(doc); err != nil || !p.Empty() {
		t.Fatalf("second apply plans:\n%s (%v)", p, err)
	}
	st, err := eng.Status(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, vm := range st.VMs {
		if vm.Name == "c0" && (vm.Namespace != box0 || vm.NICs[0].State != "up" || vm.NICs[0].MAC != mac) {
			t.Errorf("status of the container: %+v", vm)
		}
	}

	before := nstest.Ifindexes(t, infra)
	trace.Reset()
	_, res := nstest.Apply(t, eng, attachedSpec(infra, box0, box1))
	if !strings.Contains(trace.String(), "scoped observation") {
		t.Errorf("adding a container read everything:\n%s", trace.String())
	}
	for _, a := range res.Plan.Actions {
		if otherVM.MatchString(a.String()) {
			t.Errorf("adding c1 touched another VM: %s", a)
		}
	}
	after := nstest.Ifindexes(t, infra)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s was made again (ifindex %d -> %d)", k, v, after[k])
		}
	}
	// c1 goes, and c0 moves from box0 to box1, taking the name net1
	// that c1 leaves there.
	trace.Reset()
	nstest.Apply(t, eng, attachedSpec(infra, box1))
	if !strings.Contains(trace.String(), "scoped observation") {
		t.Errorf("removing a container read everything:\n%s", trace.String())
	}
	nstest.InNS(t, box1, func(h *netlink.Handle) error {
		l, err := h.LinkByName("net1")
		if err == nil && l.Attrs().HardwareAddr.String() != mac {
			err = fmt.Errorf("net1 in %s has MAC %s, want c0's %s", box1, l.Attrs().HardwareAddr, mac)
		}
		return err
	})
	nstest.InNS(t, box0, func(h *netlink.Handle) error {
		if _, err := h.LinkByName("net1"); err == nil {
			return fmt.Errorf("net1 is still in %s after its VM left the spec", box0)
		}
		return nil
	})

	if _, err := eng.Destroy(infra); err != nil {
		t.Fatal(err)
	}
	nstest.AssertGone(t, infra)
	for _, box := range []string{box0, box1} {
		if !nstest.Exists(box) {
			t.Errorf("destroy deleted the container's namespace %s", box)
		}
		nstest.InNS(t, box, func(h *netlink.Handle) error {
			links, err := h.LinkList()
			for _, l := range links {
				if l.Attrs().Name != "lo" {
					t.Errorf("%s left in %s", l.Attrs().Name, box)
				}
			}
			return err
		})
	}
}
