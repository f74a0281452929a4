package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Op is what an action does to a resource.
type Op string

// The operations.
const (
	OpCreate  Op = "create"
	OpModify  Op = "change"
	OpReplace Op = "replace" // delete and create again: the change cannot be made in place
	OpDelete  Op = "delete"
)

// Action is one step of a plan. Old is the observed state (nil for a
// create), New the desired one (nil for a delete).
type Action struct {
	Op  Op        `json:"op"`
	Old *Resource `json:"old,omitempty"`
	New *Resource `json:"new,omitempty"`
}

// Subject is the resource the action is about.
func (a Action) Subject() Resource {
	if a.New != nil {
		return *a.New
	}
	return *a.Old
}

func (a Action) String() string {
	sym := map[Op]string{OpCreate: "+", OpModify: "~", OpReplace: "-/+", OpDelete: "-"}[a.Op]
	s := fmt.Sprintf("%s %s %s", sym, a.Op, a.Subject())
	if a.Op == OpModify || a.Op == OpReplace {
		if d := describeChange(*a.Old, *a.New); d != "" {
			s += ": " + d
		}
	}
	return s
}

// Plan is the ordered list of actions that takes observed state to desired.
type Plan struct {
	Actions []Action `json:"actions"`
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.Actions) == 0 }

func (p Plan) String() string {
	if p.Empty() {
		return "no changes: the host already matches the spec\n"
	}
	var b strings.Builder
	for _, a := range p.Actions {
		b.WriteString(a.String() + "\n")
	}
	return b.String()
}

// Diff compares desired and observed resources. Creates, changes and
// replacements come first, parents before children; deletes come last,
// children before parents. A delete whose object holds a link name that a
// create or replacement needs (a vNIC renamed behind vnet's back still
// holds its switch port's name) comes first instead, with what sits on
// that object, and what sat on its links is made again.
func Diff(desired, observed []Resource) Plan {
	obs := indexByKey(observed)
	want := indexByKey(desired)

	var ups, downs []Action
	needed := map[string]bool{} // link names creates and replacements make
	replacedLinks := map[string]bool{}
	for _, d := range desired {
		o, exists := obs[d.Key()]
		switch {
		case !exists:
			ups = append(ups, Action{Op: OpCreate, New: ptr(d)})
			markAll(needed, d.links())
		case Same(o, d):
		case modifiable(o, d):
			ups = append(ups, Action{Op: OpModify, Old: ptr(o), New: ptr(d)})
		default:
			ups = append(ups, Action{Op: OpReplace, Old: ptr(o), New: ptr(d)})
			markAll(replacedLinks, o.links())
			for _, l := range d.links() {
				if !slices.Contains(o.links(), l) {
					needed[l] = true
				}
			}
		}
	}
	for _, o := range observed {
		if _, ok := want[o.Key()]; !ok {
			downs = append(downs, Action{Op: OpDelete, Old: ptr(o)})
		}
	}
	first, downs := namesHeld(downs, needed)
	for _, a := range first {
		markAll(replacedLinks, a.Old.links())
	}
	// What sits on a replaced link disappears with it and must be made again;
	// so must what was read on a link name a create makes: it was read on
	// another device of that name, one on its way out.
	markAll(replacedLinks, slices.Collect(maps.Keys(needed)))
	if len(replacedLinks) > 0 {
		for _, d := range desired {
			if o, exists := obs[d.Key()]; exists && Same(o, d) && (replacedLinks[d.onLink()] || anyOf(replacedLinks, d.refs())) {
				ups = append(ups, Action{Op: OpCreate, New: ptr(d)})
			}
		}
	}
	byRankDown := func(as []Action) {
		sort.SliceStable(as, func(i, j int) bool { return rank[as[i].Subject().Kind] > rank[as[j].Subject().Kind] })
	}
	byRankDown(first)
	sort.SliceStable(ups, func(i, j int) bool { return rank[ups[i].Subject().Kind] < rank[ups[j].Subject().Kind] })
	byRankDown(downs)
	return Plan{Actions: append(append(first, ups...), downs...)}
}

// namesHeld splits deletes into those that must come before the creates,
// because their object holds a link name in needed (together with the
// deletes of what sits on that object's links), and the rest.
func namesHeld(downs []Action, needed map[string]bool) (first, rest []Action) {
	freed := map[string]bool{}
	for _, a := range downs {
		if anyOf(needed, a.Old.links()) {
			markAll(freed, a.Old.links())
		}
	}
	if len(freed) == 0 {
		return nil, downs
	}
	for _, a := range downs {
		o := *a.Old
		if anyOf(freed, o.links()) || freed[o.onLink()] || anyOf(freed, o.refs()) {
			first = append(first, a)
		} else {
			rest = append(rest, a)
		}
	}
	return first, rest
}

func markAll(set map[string]bool, keys []string) {
	for _, k := range keys {
		set[k] = true
	}
}

// modifiable reports whether the kernel can take o to d without recreating it.
func modifiable(o, d Resource) bool {
	switch d.Kind {
	case KindVeth:
		// A pair is named by both ends; moving an end to another namespace
		// or renaming it is a new pair.
		return o.A.NS == d.A.NS && o.A.Name == d.A.Name && o.B.NS == d.B.NS && o.B.Name == d.B.Name
	case KindNetns, KindBridge, KindLineRate, KindOffloads, KindCgroup, KindPool, KindShaper, KindSteer,
		KindFirewall, KindPortSec, KindPortBPF, KindDevice, KindLB:
		return true
	}
	return false
}

func describeChange(o, d Resource) string {
	var parts []string
	add := func(what string, from, to any) {
		if fmt.Sprint(from) != fmt.Sprint(to) {
			parts = append(parts, fmt.Sprintf("%s %v -> %v", what, orNone(from), orNone(to)))
		}
	}
	add("mark", o.Mark, d.Mark)
	add("mtu", o.MTU, d.MTU)
	add("mac", o.MAC, d.MAC)
	for _, e := range []struct {
		name string
		o, d End
	}{{"a", o.A, d.A}, {"b", o.B, d.B}} {
		add(e.name+" ns", e.o.NS, e.d.NS)
		add(e.name+" name", e.o.Name, e.d.Name)
		add(e.name+" mtu", e.o.MTU, e.d.MTU)
		add(e.name+" mac", e.o.MAC, e.d.MAC)
		add(e.name+" master", e.o.Master, e.d.Master)
		add(e.name+" isolated", e.o.Isolated, e.d.Isolated)
		add(e.name+" down", e.o.Down, e.d.Down)
	}
	add("isolate", o.Isolate, d.Isolate)
	add("rate", o.Rate, d.Rate)
	add("leaf rate", o.LeafRate, d.LeafRate)
	add("ceil", o.Ceil, d.Ceil)
	add("quantum", o.Quantum, d.Quantum)
	add("burst", o.Burst, d.Burst)
	add("match", shortMatch(o), shortMatch(d))
	add("class", o.Class, d.Class)
	add("gro", o.GRO, d.GRO)
	add("tso", o.TSO, d.TSO)
	add("cpu milli", o.CPUMilli, d.CPUMilli)
	add("cpuset", o.CPUs, d.CPUs)
	if d.Kind == KindLB {
		add("down", o.Why, d.Why)
	} else {
		add("uplink", o.Why, d.Why)
	}
	add("vni", o.VNI, d.VNI)
	add("local", o.Local, d.Local)
	add("port", o.Port, d.Port)
	add("bridge", o.Link, d.Link)
	parts = append(parts, sysctlChanges(o.Sysctls, d.Sysctls)...)
	return strings.Join(parts, ", ")
}

func orNone(v any) any {
	if s, ok := v.(string); ok && s == "" {
		return "none"
	}
	return v
}

func indexByKey(rs []Resource) map[string]Resource {
	m := make(map[string]Resource, len(rs))
	for _, r := range rs {
		m[r.Key()] = r
	}
	return m
}

func ptr(r Resource) *Resource { return &r }

func anyOf(set map[string]bool, keys []string) bool {
	for _, k := range keys {
		if set[k] {
			return true
		}
	}
	return false
}
