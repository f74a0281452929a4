package plan

import (
	"slices"
	"sync"
)

// Room is the free capacity past the end of a spliced model, which the
// splice of a change that only adds at the model's end (a VM added on a
// port group) fills in place instead of copying the model: at thousands
// of VMs the copy costs more CPU, and gives the collector more to do,
// than the rest of the change's planning.
//
// The models spliced from one another this way share one array, each
// seeing its own length of it: a model's resources are never written
// again once it is made, and what one model adds lies past the end of
// every model that was made before it. So the last model stays whole
// while it is the record's Realized, a dry run's input or the state a
// failed apply rolls back to. Only the longest model of the array may
// grow (end says which): a model spliced from an earlier one, say after
// an apply that added and then failed, is copied, as any other change
// is. Every model a Room hands out has no capacity past its length, so
// an append of anyone else's copies it rather than write into the room.
//
// A Room is safe for concurrent use: a dry run may splice from the model
// an apply splices from at the same time.
type Room struct {
	mu    sync.Mutex
	model []Resource // the shared array, up to end
	keys  []string   // the keys of model's resources
	end   int        // the length of the longest model made of the array
}

// roomAfter is how much room a model of n resources is made with: a few
// VMs' worth and a little more at scale, so that a model copied for one
// change has room for the next VMs added.
func roomAfter(n int) int { return 64 + n/64 }

// withRoom gives sp's model, freshly made, a Room of its own: what its
// arrays hold past its length becomes the room.
func withRoom(sp Splice) Splice {
	r := &Room{model: sp.Model, keys: sp.Keys, end: len(sp.Model)}
	sp.Model, sp.Keys, sp.Room = slices.Clip(sp.Model), slices.Clip(sp.Keys), r
	return sp
}

// extend splices a change that only adds resources at the end of model
// (keys: its resources' keys): one whose after holds each of before as it
// is (the switch a VM added is on, say) and more, where neither part
// makes a host firewall (which a splice works out again from the whole
// model). It appends in place when model is the longest of the Room's
// array and the room is large enough; false: the caller copies. What it
// makes is what splice makes of the same parts.
func (r *Room) extend(model []Resource, keys []string, before, after []Resource) (Splice, bool) {
	if r == nil || len(model) == 0 || len(keys) != len(model) ||
		HasKind(before, KindFirewall) || HasKind(after, KindFirewall) {
		return Splice{}, false
	}
	added, ok := onlyAdded(before, after)
	if !ok {
		return Splice{}, false
	}
	kept, ok := heldIn(model, keys, before)
	if !ok {
		return Splice{}, false // model was made of more than before's spec
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.end != len(model) || &r.model[0] != &model[0] || cap(r.model)-r.end < len(added) ||
		cap(r.keys)-r.end < len(added) {
		return Splice{}, false
	}
	r.model = append(r.model[:r.end], added...)
	r.keys = r.keys[:r.end]
	for i := range added {
		r.keys = append(r.keys, added[i].Key())
	}
	r.end = len(r.model)
	return Splice{Model: slices.Clip(r.model), Keys: slices.Clip(r.keys), Before: kept, After: slices.Clone(after), Room: r}, true
}

// onlyAdded returns what after holds that before does not, when after
// holds each of before as it is and more; false otherwise.
func onlyAdded(before, after []Resource) ([]Resource, bool) {
	if len(after) <= len(before) {
		return nil, false
	}
	inBefore := make(map[string]int, len(before))
	for i := range before {
		inBefore[before[i].Key()] = i
	}
	var added []Resource
	same := 0
	for i := range after {
		j, ok := inBefore[after[i].Key()]
		switch {
		case !ok:
			added = append(added, after[i])
		case after[i] != before[j]:
			return nil, false
		default:
			same++
		}
	}
	return added, same == len(before)
}

// heldIn returns model's resources of part's keys, in model's order, when
// model (keys: its resources' keys) holds each of part as it is.
func heldIn(model []Resource, keys []string, part []Resource) ([]Resource, bool) {
	if len(part) == 0 {
		return nil, true
	}
	want := make(map[string]int, len(part))
	for i := range part {
		want[part[i].Key()] = i
	}
	var found []Resource
	for i, k := range keys {
		if j, ok := want[k]; ok {
			if model[i] != part[j] {
				return nil, false
			}
			found = append(found, model[i])
		}
	}
	return found, len(found) == len(want)
}
