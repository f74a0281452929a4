package service

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// An index moved on from change to change says what one made of the
// spec each change left says, and the changes make what they make
// without it: the same specs, the same addresses.
func TestAttachIndexCarried(t *testing.T) {
	doc := loadAttachBase(t, attachIndexBase)
	carried := newAttachIndex(doc).build()
	rnd := rand.New(rand.NewPCG(1, 2))
	var live []string
	for step := range 400 {
		before := carried.doc
		var next, want *spec.Document
		var err, wantErr error
		switch op := rnd.IntN(10); {
		case op < 6 || len(live) == 0:
			id := fmt.Sprintf("c%d", step)
			r := AttachRequest{Container: id, Ifname: "eth0", Netns: "ns-" + id, PortGroup: "pg", Allocate: true, CNI: "n"}
			if rnd.IntN(4) == 0 && len(live) > 0 { // a second vNIC of a container, on the network
				id = live[rnd.IntN(len(live))]
				r = AttachRequest{Container: id, Ifname: "net1", Netns: "ns-" + id, Network: "net1", Allocate: true, CNI: "n"}
			}
			var res, wantRes *AttachResult
			want, wantRes, wantErr = planAttach(before, r)
			next, res, err = carried.attach(r)
			if err == nil && wantErr == nil && !slices.Equal(res.IPs, wantRes.IPs) {
				t.Fatalf("step %d: attached %s with %v, without the index %v", step, id, res.IPs, wantRes.IPs)
			}
			if err == nil && next != nil && !slices.Contains(live, id) {
				live = append(live, id)
			}
		case op < 9:
			k := rnd.IntN(len(live))
			r := DetachRequest{Container: live[k], Ifname: "eth0"}
			want, _, wantErr = planDetach(before, r)
			next, _, err = carried.detach(r)
			live = slices.Delete(live, k, k+1)
		default:
			keep := []AttachmentKey{}
			for _, id := range live[:len(live)/2] {
				keep = append(keep, AttachmentKey{id, "eth0"}, AttachmentKey{id, "net1"})
			}
			r := CollectRequest{CNI: "n", Keep: keep}
			want, _, wantErr = planCollect(before, r)
			next, _, err = carried.collect(r)
			live = live[:len(live)/2]
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("step %d: %v, without the index %v", step, err, wantErr)
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if (next == nil) != (want == nil) || next != nil && string(next.Source) != string(want.Source) {
			t.Fatalf("step %d: the index made another spec than a change without it", step)
		}
		if next != nil && carried.doc != next || next == nil && carried.doc != before {
			t.Fatalf("step %d: the index is not of the spec the change made", step)
		}
		sameIndex(t, step, carried, newAttachIndex(carried.doc).build())
	}
}

func sameIndex(t *testing.T, step int, got, want *attachIndex) {
	t.Helper()
	if !maps.Equal(got.byContainer, want.byContainer) || !maps.Equal(got.used, want.used) {
		t.Fatalf("step %d: containers %v and addresses %v, want %v and %v", step, got.byContainer, got.used, want.byContainer, want.used)
	}
	if len(got.vmAt) != len(want.vmAt) {
		t.Fatalf("step %d: %d VMs indexed, want %d", step, len(got.vmAt), len(want.vmAt))
	}
	for name := range want.vmAt {
		vm, ok := got.vm(name)
		if !ok || vm != &got.doc.Spec.VMs[want.vmAt[name]] {
			t.Fatalf("step %d: VM %s not found where it is", step, name)
		}
	}
	for sub, low := range got.low {
		for a := sub.Addr().Next(); a.Less(low); a = a.Next() {
			if want.used[a] == 0 {
				t.Fatalf("step %d: %s is free, below where %s's scan starts (%s)", step, a, sub, low)
			}
		}
	}
}

const attachIndexBase = `name: cx
hosts:
  - {name: hv1, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: vmnic0}}]
    portgroups:
      - {name: pg, subnet: 10.5.0.0/24, gateway: 10.5.0.1}
networks:
  - {name: net1, subnet: 10.6.0.0/24, subnet6: "fd00:6::/64"}
vms:
  - {name: web1, host: hv1, nics: [{portgroup: pg, ip: 10.5.0.3/24}]}
`

// An ADD through a kept index costs no more allocations at 3,000
// containers than at 100, but for a few of maps grown: it looks up only
// what the container's vNIC touches.
func TestAttachIndexAllocsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("attaches 3,000 containers")
	}
	allocs := func(n int) float64 {
		x := containersIndexed(t, n)
		return testing.AllocsPerRun(20, func() {
			if _, _, err := x.attach(benchAttach(n)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := x.detach(DetachRequest{Container: benchContainer(n), Ifname: "eth0"}); err != nil {
				t.Fatal(err)
			}
		})
	}
	few, many := allocs(100), allocs(3000)
	if many > few+32 {
		t.Errorf("an ADD and a DEL at 3,000 containers make %.0f allocations, at 100 %.0f", many, few)
	}
}
