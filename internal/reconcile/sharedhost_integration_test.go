package reconcile_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// sharedHostSpec is an infrastructure of one real host with a switch and
// two VMs on it, named as any other infrastructure of the host may name
// its own, and with box a third VM, a container's namespace of that name.
func sharedHostSpec(infra, box string) string {
	src := fmt.Sprintf(`name: %s
hosts:
  - name: hv1
switches:
  - {name: sw, hosts: [hv1], portgroups: [{name: pg}]}
vms:
  - {name: web1, host: hv1, nics: [{portgroup: pg, ip: 10.31.0.1/24}]}
  - {name: web2, host: hv1, nics: [{portgroup: pg, ip: 10.31.0.2/24}]}
`, infra)
	if box != "" {
		src += fmt.Sprintf("  - {name: box, host: hv1, nics: [{portgroup: pg, attach: {netns: %s}, ip: 10.31.0.3/24}]}\n", box)
	}
	return src
}

// sharedHost is a namespace standing in for a real hypervisor whose agent
// applies every infrastructure of one store there.
type sharedHost struct {
	machine string
	eng     *reconcile.Engine
}

func newSharedHost(t *testing.T, base string) *sharedHost {
	t.Helper()
	machine := nstest.Machine(t, base)
	st, err := store.OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	dp.HostNS, dp.DeviceStateDir = machine, t.TempDir()
	h := &sharedHost{machine: machine, eng: &reconcile.Engine{DP: dp, Store: st, Host: "hv1", HostNS: machine}}
	t.Cleanup(func() {
		recs, _ := st.List()
		for _, r := range recs {
			if _, err := h.eng.Destroy(r.Name); err != nil {
				t.Errorf("cleanup: %v", err)
			}
			nstest.AssertGone(t, r.Name)
		}
		st.Close()
		dp.Close()
	})
	return h
}

func (h *sharedHost) apply(t *testing.T, infra string) reconcile.Result {
	t.Helper()
	return h.applySpec(t, sharedHostSpec(infra, ""))
}

func (h *sharedHost) applySpec(t *testing.T, src string) reconcile.Result {
	t.Helper()
	doc, err := spec.Load("shared.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.eng.Apply(doc)
	if err != nil {
		t.Fatalf("apply %s: %v", doc.Spec.Name, err)
	}
	return res
}

// links are the names of the links in the machine's namespace.
func (h *sharedHost) links(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	nstest.InNS(t, h.machine, func(nh *netlink.Handle) error {
		ls, err := nh.LinkList()
		for _, l := range ls {
			out[l.Attrs().Name] = true
		}
		return err
	})
	return out
}

// reaches says whether web1 of infra opens a TCP connection to web2.
func reaches(t *testing.T, infra string, port int) error {
	t.Helper()
	return answers(t, infra, nstest.NSName(infra, "web2"), fmt.Sprintf("10.31.0.2:%d", port))
}

// answers says whether web1 of infra opens a TCP connection to addr, on
// which a listener in namespace ns answers with infra's name.
func answers(t *testing.T, infra, ns, addr string) error {
	t.Helper()
	l := nstest.Listen(t, ns, addr)
	go func() {
		if c, err := l.Accept(); err == nil {
			io.WriteString(c, infra)
			c.Close()
		}
	}()
	c, err := nstest.Dial(t, nstest.NSName(infra, "web1"), addr, net.Dialer{Timeout: 3 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(b) != infra {
		return fmt.Errorf("web1 of %s reached %q", infra, b)
	}
	return nil
}

// Two infrastructures with the same VMs, applied by one agent on one
// host, get a port each for web1's eth0 in the machine's namespace; both
// work, and destroying one leaves the other as it was.
func TestTwoInfrastructuresOfOneHostNameTheSameVM(t *testing.T) {
	h := newSharedHost(t, "two")
	blue, green := nstest.Infra("blue"), nstest.Infra("green")
	h.apply(t, blue)
	h.apply(t, green)
	bluePort, greenPort := plan.VNICPortName(blue, "web1", 0), plan.VNICPortName(green, "web1", 0)
	links := h.links(t)
	if !links[bluePort] || !links[greenPort] {
		t.Fatalf("web1's ports %s (%s) and %s (%s) are not both in the machine: %v", bluePort, blue, greenPort, green, links)
	}
	for _, infra := range []string{blue, green} {
		if err := reaches(t, infra, 7101); err != nil {
			t.Errorf("%s: web1 does not reach web2: %v", infra, err)
		}
		if res := h.apply(t, infra); !res.Plan.Empty() {
			t.Errorf("a second apply of %s changes:\n%s", infra, res.Plan)
		}
	}
	before := nstest.LinkState(t, h.machine, greenPort)
	if _, err := h.eng.Destroy(blue); err != nil {
		t.Fatal(err)
	}
	nstest.AssertGone(t, blue)
	links = h.links(t)
	if links[bluePort] || !links[greenPort] {
		t.Errorf("after destroying %s: its port there %v, %s's %v", blue, links[bluePort], green, links[greenPort])
	}
	if after := nstest.LinkState(t, h.machine, greenPort); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("destroying %s changed %s's port:\nbefore %v\nafter  %v", blue, green, before, after)
	}
	if err := reaches(t, green, 7102); err != nil {
		t.Errorf("%s after destroying %s: web1 does not reach web2: %v", green, blue, err)
	}
	if res := h.apply(t, green); !res.Plan.Empty() {
		t.Errorf("an apply of %s after destroying %s changes:\n%s", green, blue, res.Plan)
	}
}

// legacyPortName is a vNIC's port as builds before plan.ModelRevision 2
// named it: by the VM and index alone.
func legacyPortName(vm string, idx int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", vm, idx)))
	return fmt.Sprintf("vn%x", sum[:4])
}

// oldBuildLeft makes the host and the record of infra as a build before
// plan.ModelRevision 2 left them: its ports named by the VM alone, and a
// record made by that build. It returns each port's name now by its old
// one.
func (h *sharedHost) oldBuildLeft(t *testing.T, infra string, vms ...string) map[string]string {
	t.Helper()
	renamed := map[string]string{}
	for _, vm := range vms {
		now, old := plan.VNICPortName(infra, vm, 0), legacyPortName(vm, 0)
		renamed[old] = now
		renameLink(t, h.machine, now, old)
	}
	h.oldRecord(t, infra, renamed)
	return renamed
}

// oldRecord makes infra's record one an older build made, whose links had
// the old names of renamed (the new names by the old).
func (h *sharedHost) oldRecord(t *testing.T, infra string, renamed map[string]string) {
	t.Helper()
	rec, err := h.eng.Store.Get(infra)
	if err != nil {
		t.Fatal(err)
	}
	rec.Engine = "(devel)" // an older build's, without the model's revision
	b, err := json.Marshal(rec.Realized)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for old, now := range renamed {
		text = strings.ReplaceAll(text, now, old)
	}
	rec.Realized = nil
	if err := json.Unmarshal([]byte(text), &rec.Realized); err != nil {
		t.Fatal(err)
	}
	if err := h.eng.Store.Put(rec); err != nil {
		t.Fatal(err)
	}
}

// A host that an older build applied has ports named by the VM alone (a
// VM's of vnet's and a container's), and a record saying so. The first
// apply of this build replaces them with ports named by the infrastructure
// too, the VMs reach each other again, and the next apply changes nothing;
// or a destroy finds them and leaves nothing.
func TestPortsOfTheOldNamesAreReplacedOrDestroyed(t *testing.T) {
	for _, destroy := range []bool{false, true} {
		name := "apply"
		if destroy {
			name = "destroy"
		}
		t.Run(name, func(t *testing.T) {
			h := newSharedHost(t, "upg")
			box := nstest.Machine(t, "upgbox")
			infra := nstest.Infra("upg" + name[:1])
			src := sharedHostSpec(infra, box)
			h.applySpec(t, src)
			renamed := h.oldBuildLeft(t, infra, "web1", "web2", "box")
			if destroy {
				if _, err := h.eng.Destroy(infra); err != nil {
					t.Fatal(err)
				}
				nstest.AssertGone(t, infra)
				for port := range h.links(t) {
					if plan.IsVNICPortName(port) {
						t.Errorf("port %s left in the machine after destroy", port)
					}
				}
				nstest.InNS(t, box, func(nh *netlink.Handle) error {
					ls, err := nh.LinkList()
					for _, l := range ls {
						if l.Attrs().Name != "lo" {
							t.Errorf("link %s left in the container after destroy", l.Attrs().Name)
						}
					}
					return err
				})
				return
			}
			if res := h.applySpec(t, src); res.Plan.Empty() {
				t.Errorf("the first apply of this build leaves the ports of the old names")
			}
			links := h.links(t)
			for old, now := range renamed {
				if links[old] || !links[now] {
					t.Errorf("after the apply: old port %s there %v, new %s there %v", old, links[old], now, links[now])
				}
			}
			if err := reaches(t, infra, 7103); err != nil {
				t.Errorf("after the apply web1 does not reach web2: %v", err)
			}
			if res := h.applySpec(t, src); !res.Plan.Empty() {
				t.Errorf("a second apply changes:\n%s", res.Plan)
			}
		})
	}
}
