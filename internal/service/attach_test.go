package service

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

func TestContainerVMName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	long := strings.Repeat("a", 253)
	tests := []struct{ id, ns, pod, prefix string }{
		{id: "3f1b2c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b", prefix: "c-3f1b2c4d5e6f7-"},
		{id: "x", ns: "default", pod: "web-0", prefix: "p-default-web-0-"},
		{id: "x", ns: "kube-system", pod: long, prefix: "p-kube-system-"},
		{id: "Ctr_1.A", prefix: "c-ctr-1-a-"},
		{id: "___", prefix: "c-"},
		{id: "y", ns: "a-b", pod: "c", prefix: "p-a-b-c-"},
		{id: "y", ns: "a", pod: "b-c", prefix: "p-a-b-c-"},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		name := ContainerVMName(tt.id, tt.ns, tt.pod)
		if len(name) > vmNameLen || !valid.MatchString(name) {
			t.Errorf("%q %q/%q: %q is not a valid VM name", tt.id, tt.ns, tt.pod, name)
		}
		if !strings.HasPrefix(name, tt.prefix) {
			t.Errorf("%q %q/%q: %q, want it to start with %q", tt.id, tt.ns, tt.pod, name, tt.prefix)
		}
		if again := ContainerVMName(tt.id, tt.ns, tt.pod); again != name {
			t.Errorf("%q, then %q", name, again)
		}
		whole := tt.id + "|" + tt.ns + "/" + tt.pod
		if prev, dup := seen[name]; dup {
			t.Errorf("%s and %s both make %s", prev, whole, name)
		}
		seen[name] = whole
	}
	// A pod keeps its name whatever its sandbox's ID.
	if ContainerVMName("a", "ns", "p") != ContainerVMName("b", "ns", "p") {
		t.Error("a pod's VM name depends on its sandbox's ID")
	}
}

const attachBase = `name: cn
hosts:
  - {name: hv1, nics: [{name: vmnic0, speed: 1Gbit}]}
  - {name: hv2, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: vmnic0, hv2: vmnic0}}]
    portgroups:
      - {name: pg, subnet: 10.5.0.0/29, gateway: 10.5.0.1}
      - {name: bare}
  - name: priv
    hosts: [hv2]
    portgroups: [{name: pg-priv, subnet: "fd00:5::/64"}]
networks:
  - {name: net1, subnet: 10.6.0.0/24, subnet6: "fd00:6::/64"}
vms:
  - {name: web1, host: hv1, nics: [{portgroup: pg, ip: 10.5.0.2/29}]}
`

func loadAttachBase(t *testing.T, src string) *spec.Document {
	t.Helper()
	doc, err := spec.Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// vnet's addresses: the lowest free ones of the subnet, skipping the
// gateway and what VMs hold, until there are none.
func TestPlanAttachAllocates(t *testing.T) {
	doc := loadAttachBase(t, attachBase)
	var got []string
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		next, res, err := planAttach(doc, AttachRequest{Container: id, Ifname: "eth0", Netns: "ns-" + id, PortGroup: "pg", Host: "hv1", Allocate: true, CNI: "n"})
		if i == 4 {
			if err == nil || !strings.Contains(err.Error(), "no free address left in 10.5.0.0/29") {
				t.Fatalf("a sixth address of a /29: %v", err)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if res.VM != ContainerVMName(id, "", "") || len(res.Gateways) != 1 || res.Gateways[0] != "10.5.0.1" {
			t.Errorf("result %+v", res)
		}
		got = append(got, res.IPs...)
		doc = next
	}
	if want := "10.5.0.3/29 10.5.0.4/29 10.5.0.5/29 10.5.0.6/29"; strings.Join(got, " ") != want {
		t.Errorf("allocated %v, want %s", got, want)
	}
	// A gap left by a container that went is the next one's.
	next, _, err := planDetach(doc, DetachRequest{Container: "b", Ifname: "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	_, res, err := planAttach(next, AttachRequest{Container: "f", Ifname: "eth0", Netns: "ns-f", PortGroup: "pg", Host: "hv1", Allocate: true})
	if err != nil || res.IPs[0] != "10.5.0.4/29" {
		t.Errorf("after b went, got %v (%v)", res, err)
	}
}

func TestPlanAttach(t *testing.T) {
	doc := loadAttachBase(t, attachBase)
	// A second vNIC of one container, on a network: one address of each family.
	one, res1, err := planAttach(doc, AttachRequest{Container: "k", PodNamespace: "default", PodName: "web", Ifname: "eth0", Netns: "cni-k", PortGroup: "pg", Host: "hv1", Allocate: true})
	if err != nil {
		t.Fatal(err)
	}
	two, res2, err := planAttach(one, AttachRequest{Container: "k", Ifname: "net1", Netns: "cni-k", Network: "net1", Host: "hv1", Allocate: true})
	if err != nil {
		t.Fatal(err)
	}
	if res2.VM != res1.VM || res2.NIC != 1 || strings.Join(res2.IPs, " ") != "10.6.0.1/24 fd00:6::1/64" {
		t.Errorf("second vNIC %+v", res2)
	}
	if res1.MAC == res2.MAC || res1.MAC != ContainerMAC("cn", "k", "eth0") {
		t.Errorf("MACs %s, %s", res1.MAC, res2.MAC)
	}
	// The same again changes nothing.
	again, res, err := planAttach(two, AttachRequest{Container: "k", Ifname: "net1", Netns: "cni-k", Network: "net1", Host: "hv1", Allocate: true})
	if err != nil || again != nil || !res.Existed || res.NIC != 1 {
		t.Errorf("again: %v %+v %v", again, res, err)
	}
	// The pod's sandbox made again: its VM is the new container's.
	three, res3, err := planAttach(two, AttachRequest{Container: "k2", PodNamespace: "default", PodName: "web", Ifname: "eth0", Netns: "cni-k2", PortGroup: "pg", Host: "hv1", Allocate: true})
	if err != nil {
		t.Fatal(err)
	}
	if vm, _ := three.Spec.VM(res3.VM); res3.VM != res1.VM || len(vm.NICs) != 1 || vm.ContainerOf() != "k2" {
		t.Errorf("the remade sandbox's VM: %+v", vm)
	}
	// The old sandbox's late DEL leaves the new one alone.
	if next, res, err := planDetach(three, DetachRequest{Container: "k", Ifname: "eth0"}); next != nil || res.Removed || err != nil {
		t.Errorf("late DEL of the old sandbox: %v %+v %v", next, res, err)
	}
	// Removing the VM's last vNIC removes the VM.
	four, res4, err := planDetach(three, DetachRequest{Container: "k2", Ifname: "eth0"})
	if err != nil || !res4.Removed {
		t.Fatalf("%+v %v", res4, err)
	}
	if _, ok := four.Spec.VM(res3.VM); ok {
		t.Error("the VM stayed without vNICs")
	}

	for _, tt := range []struct {
		name string
		r    AttachRequest
		want string
	}{
		{"no host", AttachRequest{Container: "x", Ifname: "eth0", Netns: "n", PortGroup: "pg"}, "pg of cn is on hosts hv1, hv2: say which one"},
		{"wrong host", AttachRequest{Container: "x", Ifname: "eth0", Netns: "n", PortGroup: "pg-priv", Host: "hv1"}, `host "hv1" of cn does not carry pg-priv`},
		{"unknown port group", AttachRequest{Container: "x", Ifname: "eth0", Netns: "n", PortGroup: "nope"}, `cn has no port group "nope"`},
		{"no subnet", AttachRequest{Container: "x", Ifname: "eth0", Netns: "n", PortGroup: "bare", Host: "hv1", Allocate: true}, "bare has no subnet to allocate addresses from"},
		{"an address taken", AttachRequest{Container: "x", Ifname: "eth0", Netns: "n", PortGroup: "pg", Host: "hv1", IPs: []string{"10.5.0.2/29"}}, "address 10.5.0.2 is already used"},
		{"two addresses on a port group", AttachRequest{Container: "x", Ifname: "eth0", Netns: "n", PortGroup: "pg", Host: "hv1", IPs: []string{"10.5.0.5/29", "10.5.0.6/29"}}, "one address"},
		{"a VM of the spec's own", AttachRequest{Container: "x", Ifname: "eth0", Netns: "n", PortGroup: "pg", Host: "hv1"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := attachBase
			if tt.name == "a VM of the spec's own" {
				src += "  - {name: " + ContainerVMName("x", "", "") + ", host: hv1, nics: [{portgroup: pg}]}\n"
				tt.want = "which no container attached"
			}
			_, _, err := planAttach(loadAttachBase(t, src), tt.r)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPlanCollect(t *testing.T) {
	doc := loadAttachBase(t, attachBase)
	for _, c := range []struct{ id, cni string }{{"a", "n1"}, {"b", "n1"}, {"c", "n2"}} {
		next, _, err := planAttach(doc, AttachRequest{Container: c.id, Ifname: "eth0", Netns: "ns-" + c.id, PortGroup: "pg", Host: "hv1", Allocate: true, CNI: c.cni})
		if err != nil {
			t.Fatal(err)
		}
		doc = next
	}
	next, res, err := planCollect(doc, CollectRequest{CNI: "n1", Keep: []AttachmentKey{{"a", "eth0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 1 || res.Removed[0].VM != ContainerVMName("b", "", "") {
		t.Errorf("collected %+v", res.Removed)
	}
	var left []string
	for _, vm := range next.Spec.VMs {
		left = append(left, vm.Name)
	}
	if want := []string{"web1", ContainerVMName("a", "", ""), ContainerVMName("c", "", "")}; strings.Join(left, " ") != strings.Join(want, " ") {
		t.Errorf("left %v, want %v", left, want)
	}
	if again, _, _ := planCollect(next, CollectRequest{CNI: "n1", Keep: []AttachmentKey{{"a", "eth0"}}}); again != nil {
		t.Error("a second collection changes the spec again")
	}
}

// A guest's TAP: the VM is named after the domain, the vNIC is the TAP
// with the guest's MAC and no address of vnet's; a second TAP of the same
// domain joins its VM; the same TAP again changes nothing; detaching by the
// TAP's name takes it out; a TAP and a namespace do not mix.
func TestPlanAttachTap(t *testing.T) {
	doc := loadAttachBase(t, attachBase)
	const id = "0c1d2e3f-0000-4000-8000-000000000001"
	r := AttachRequest{Container: id, Guest: "Guest1", Tap: "tap-g1", PortGroup: "pg", Host: "hv1", MAC: "52:54:00:44:00:0A"}
	next, res, err := planAttach(doc, r)
	if err != nil {
		t.Fatal(err)
	}
	vm, ok := next.Spec.VM(GuestVMName("Guest1"))
	if !ok || !strings.HasPrefix(vm.Name, "g-guest1-") || res.VM != vm.Name {
		t.Fatalf("VM %+v (%v), result %+v", vm, ok, res)
	}
	n := vm.NICs[0]
	if n.TapName() != "tap-g1" || n.NetnsName() != "" || n.Attach.Ifname != "" || n.MAC != "52:54:00:44:00:0a" || n.IP != "" || res.Ifname != "tap-g1" {
		t.Errorf("vNIC %+v attach %+v, result %+v", n, n.Attach, res)
	}
	r2 := r
	r2.Tap, r2.MAC = "tap-g1b", "52:54:00:44:00:0b"
	next2, res2, err := planAttach(next, r2)
	if err != nil || res2.NIC != 1 {
		t.Fatalf("second TAP: %+v, %v", res2, err)
	}
	if again, res, err := planAttach(next2, r); err != nil || again != nil || !res.Existed {
		t.Errorf("the same TAP again: %v, %+v, %v", again, res, err)
	}
	box := AttachRequest{Container: id, Guest: "Guest1", Netns: "box", Ifname: "eth0", PortGroup: "pg", Host: "hv1"}
	if _, _, err := planAttach(next2, box); err == nil || !strings.Contains(err.Error(), "all TAPs or all in one namespace") {
		t.Errorf("a namespace vNIC for a guest of TAPs: %v", err)
	}
	both := r
	both.Netns = "box"
	if _, _, err := planAttach(doc, both); err == nil {
		t.Error("a TAP in a namespace: no error")
	}
	gone, dres, err := planDetach(next2, DetachRequest{Container: id, Ifname: "tap-g1"})
	if err != nil || !dres.Removed {
		t.Fatalf("detach: %+v, %v", dres, err)
	}
	if vm, _ := gone.Spec.VM(res.VM); len(vm.NICs) != 1 || vm.NICs[0].TapName() != "tap-g1b" {
		t.Errorf("after detaching tap-g1: %+v", vm)
	}
}

// A DEL, GC or CHECK for a state directory that holds no store (one never
// made, or removed before a runtime's late cleanup ran the plugin) finds
// nothing attached and leaves the directory as it was: absent.
func TestAttachmentsWithoutStoreMakeNone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l := NewLocal(dir, "")
	ctx := context.Background()
	del := DetachRequest{Infra: "lab", Container: "c1", Ifname: "eth0", CNI: "net"}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"detach", func() error { _, err := l.Detach(ctx, del); return err }},
		{"collect", func() error {
			_, err := l.CollectAttachments(ctx, CollectRequest{Infra: "lab", CNI: "net"})
			return err
		}},
		{"attachment", func() error { _, err := l.Attachment(ctx, del); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, ErrNotFound) {
				t.Fatalf("got %v, want ErrNotFound", err)
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the state directory was made: %v", err)
			}
		})
	}
}
