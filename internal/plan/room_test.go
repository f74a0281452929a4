package plan

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// roomSpec is a host with VMs of the given numbers on one port group, each
// with its port policy (which vnet's port programs enforce).
func roomSpec(t *testing.T, vms ...int) *spec.Spec {
	t.Helper()
	return load(t, roomSource(vms...))
}

func roomSource(vms ...int) string {
	var b strings.Builder
	b.WriteString("name: room\nhosts:\n  - name: h1\nswitches:\n  - name: sw0\n    hosts: [h1]\n" +
		"    portgroups: [{name: pg, security: {macChanges: false, forgedTransmits: false}}]\nvms:\n")
	for _, i := range vms {
		fmt.Fprintf(&b, "  - {name: vm%d, host: h1, nics: [{portgroup: pg, ip: 10.100.0.%d/16}]}\n", i, i)
	}
	return b.String()
}

func numbers(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

var roomOptions = Options{Host: "h1", NumCPU: 2, PortPrograms: true}

// A model copied by a splice has room, which the splice of a VM added
// next fills in place: the same splice as a copy makes, sharing the
// array, and the model it grew from stays as it was.
func TestRoomAddsInPlace(t *testing.T) {
	full, fewer := roomSpec(t, numbers(1, 40)...), roomSpec(t, numbers(1, 39)...)
	removed, ok := SpliceModel(full, fewer, Model(full, roomOptions), nil, nil, roomOptions)
	if !ok || removed.Room == nil {
		t.Fatalf("a VM removed: spliced %v, room %v", ok, removed.Room != nil)
	}
	if cap(removed.Model) != len(removed.Model) || cap(removed.Keys) != len(removed.Keys) {
		t.Fatal("a model handed out with capacity past its end: an append would write into the room")
	}
	was := slices.Clone(removed.Model)

	added, ok := SpliceModel(fewer, full, removed.Model, removed.Keys, removed.Room, roomOptions)
	if !ok || &added.Model[0] != &removed.Model[0] {
		t.Fatalf("a VM added: spliced %v, in place %v", ok, ok && &added.Model[0] == &removed.Model[0])
	}
	copied, ok := SpliceModel(fewer, full, removed.Model, removed.Keys, nil, roomOptions)
	if !ok {
		t.Fatal("a VM added, without room: not spliced")
	}
	copied.Room = added.Room
	if !reflect.DeepEqual(added, copied) {
		t.Errorf("spliced in place:\n%+v\nwant what a copy makes:\n%+v", added, copied)
	}
	if !slices.Equal(sortedKeys(added.Model), sortedKeys(Model(full, roomOptions))) {
		t.Error("spliced in place: not the model of the spec made whole")
	}
	if !slices.Equal(removed.Model, was) {
		t.Error("the model grown from changed")
	}
}

// Only the longest model of an array grows in place: another VM added to
// the same earlier model (an add that failed, then another) is copied,
// and leaves the first add's model as it was.
func TestRoomGrowsOnlyTheLongest(t *testing.T) {
	full, fewer := roomSpec(t, numbers(1, 40)...), roomSpec(t, numbers(1, 39)...)
	other := roomSpec(t, append(numbers(1, 39), 77)...)
	removed, _ := SpliceModel(full, fewer, Model(full, roomOptions), nil, nil, roomOptions)
	first, ok := SpliceModel(fewer, full, removed.Model, removed.Keys, removed.Room, roomOptions)
	if !ok || &first.Model[0] != &removed.Model[0] {
		t.Fatal("the first add: not in place")
	}
	firstWas := slices.Clone(first.Model)
	second, ok := SpliceModel(fewer, other, removed.Model, removed.Keys, removed.Room, roomOptions)
	if !ok || &second.Model[0] == &removed.Model[0] {
		t.Fatalf("the second add from the same model: spliced %v, in place %v", ok, ok && &second.Model[0] == &removed.Model[0])
	}
	if !slices.Equal(first.Model, firstWas) {
		t.Error("the second add wrote over the first add's model")
	}
	if !slices.Equal(sortedKeys(second.Model), sortedKeys(Model(other, roomOptions))) {
		t.Error("the second add: not the model of its spec made whole")
	}
	// The copy has a room of its own, which the next add fills.
	third, ok := SpliceModel(other, roomSpec(t, append(numbers(1, 39), 77, 78)...), second.Model, second.Keys, second.Room, roomOptions)
	if !ok || &third.Model[0] != &second.Model[0] {
		t.Error("an add after the copy: not in place")
	}
}

// Splices from one model at once (a dry run beside an apply) grow it in
// place at most once, and each makes its own spec's model.
func TestRoomConcurrentAdds(t *testing.T) {
	full, fewer := roomSpec(t, numbers(1, 40)...), roomSpec(t, numbers(1, 39)...)
	removed, _ := SpliceModel(full, fewer, Model(full, roomOptions), nil, nil, roomOptions)
	const n = 4
	var wg sync.WaitGroup
	got := make([]Splice, n)
	specs := make([]*spec.Spec, n)
	for i := range n {
		specs[i] = roomSpec(t, append(numbers(1, 39), 100+i)...)
	}
	for i := range n {
		wg.Go(func() {
			got[i], _ = SpliceModel(fewer, specs[i], removed.Model, removed.Keys, removed.Room, roomOptions)
		})
	}
	wg.Wait()
	inPlace := 0
	for i, sp := range got {
		if &sp.Model[0] == &removed.Model[0] {
			inPlace++
		}
		if !slices.Equal(sortedKeys(sp.Model), sortedKeys(Model(specs[i], roomOptions))) {
			t.Errorf("add %d: not the model of its spec made whole", i)
		}
	}
	if inPlace > 1 {
		t.Errorf("%d splices grew one model in place", inPlace)
	}
}

// A change that drops or changes what the model holds is copied, as
// before, and leaves the model it came from as it was.
func TestRoomCopiesOtherChanges(t *testing.T) {
	full, fewer := roomSpec(t, numbers(1, 40)...), roomSpec(t, numbers(1, 39)...)
	removed, _ := SpliceModel(full, fewer, Model(full, roomOptions), nil, nil, roomOptions)
	was := slices.Clone(removed.Model)
	moved := load(t, strings.Replace(roomSource(numbers(1, 39)...), "ip: 10.100.0.7/16", "ip: 10.100.1.7/16", 1))
	changed, ok := SpliceModel(fewer, moved, removed.Model, removed.Keys, removed.Room, roomOptions)
	if !ok || &changed.Model[0] == &removed.Model[0] {
		t.Fatalf("an address changed: spliced %v, in place %v", ok, ok && &changed.Model[0] == &removed.Model[0])
	}
	if !slices.Equal(removed.Model, was) {
		t.Error("the model changed from changed")
	}
}
