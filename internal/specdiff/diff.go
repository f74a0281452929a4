package specdiff

import (
	"reflect"
	"slices"
	"strconv"

	"github.com/vnet-project/vnet/internal/spec"
)

// Op is what happens to an object.
type Op string

// The operations, in the order a summary lists them.
const (
	Added   Op = "add"
	Changed Op = "change"
	Removed Op = "remove"
)

// Sign is the operation's mark in a diff: +, ~ or -.
func (op Op) Sign() string {
	switch op {
	case Added:
		return "+"
	case Removed:
		return "-"
	}
	return "~"
}

// Change is one object added, removed or changed. An added object's Fields
// are the fields it sets (From empty), a removed one's the fields it set
// (To empty), a changed one's the fields that differ.
type Change struct {
	Op     Op      `json:"op" yaml:"op"`
	Kind   Kind    `json:"kind" yaml:"kind"`
	Name   string  `json:"name" yaml:"name"`
	Of     *Ref    `json:"of,omitempty" yaml:"of,omitempty"`
	Fields []Field `json:"fields,omitempty" yaml:"fields,omitempty"`
	// Implied is set on an object that comes or goes with the one it
	// belongs to (the vNICs of a VM added): a summary counts only the VM.
	Implied bool `json:"implied,omitempty" yaml:"implied,omitempty"`

	order []orderPart
}

// Ref is the object the change is about.
func (c *Change) Ref() Ref { return Ref{Kind: c.Kind, Name: c.Name, Of: c.Of} }

// Diff is every change from one spec to another, ordered as the objects
// stand in a spec: hosts with their NICs and host ports, switches with
// their uplinks, pools and port groups (each with its rules), networks
// with their rules, routers, VMs with their vNICs; each kind by name
// (numbers within names compared as numbers), rules in list order.
type Diff struct {
	Changes []Change `json:"changes" yaml:"changes"`
}

// Equal reports whether the specs say the same: the exit code of a diff
// is 0 when they do and 1 when they do not (ExitCode).
func (d *Diff) Equal() bool { return len(d.Changes) == 0 }

// ExitCode is what `diff` and `kubectl diff` exit with: 0 equal, 1 not.
func (d *Diff) ExitCode() int {
	if d.Equal() {
		return 0
	}
	return 1
}

// Compare lists what changes from old to new. Either may be nil: nothing
// applied before, or nothing after (a destroy); the infrastructure itself
// shows only as a change of its name.
func Compare(old, new *spec.Spec) *Diff { return compareSkipping(old, new, sameVMs(old, new)) }

// compareSkipping is Compare that leaves out the VMs named in skip, which
// both specs hold alike (sameVMs).
func compareSkipping(old, new *spec.Spec, skip vmSkip) *Diff {
	a, b := objects(old, skip), objects(new, skip)
	d := &Diff{Changes: []Change{}}
	for id, o := range a {
		if _, kept := b[id]; !kept && o.ref.Kind != KindInfrastructure {
			d.gone(o, Removed, b)
		}
	}
	for id, o := range b {
		before, kept := a[id]
		switch {
		case !kept && o.ref.Kind != KindInfrastructure:
			d.gone(o, Added, a)
		case kept:
			d.compare(before, o)
		}
	}
	slices.SortStableFunc(d.Changes, func(x, y Change) int {
		if c := compareOrder(x.order, y.order); c != 0 {
			return c
		}
		return opRank(x.Op) - opRank(y.Op)
	})
	return d
}

// gone records an object present on one side only (Added: new; Removed:
// old), with its rules; other is the side it is not on.
func (d *Diff) gone(o *object, op Op, other map[string]*object) {
	_, parentStays := other[o.parent]
	implied := o.parent != "" && !parentStays
	var fields []Field
	if op == Added {
		fields = append(fields, o.extra...)
		fields = append(fields, fieldDiffs(reflect.Value{}, o.val)...)
	} else {
		for _, f := range o.extra {
			fields = append(fields, Field{Path: f.Path, From: f.To})
		}
		fields = append(fields, fieldDiffs(o.val, reflect.Value{})...)
	}
	d.add(Change{Op: op, Kind: o.ref.Kind, Name: o.ref.Name, Of: o.ref.Of, Fields: fields, Implied: implied, order: o.order})
	for _, l := range o.rules {
		for i := 0; i < length(l.items); i++ {
			var from, to reflect.Value
			if op == Added {
				to = l.items.Index(i)
			} else {
				from = l.items.Index(i)
			}
			d.rule(o, l, i, i, from, to, true)
		}
	}
}

// compare records how an object in both specs changed, and its rules.
func (d *Diff) compare(old, new *object) {
	if same(old, new) {
		return
	}
	var fields []Field
	for i, f := range new.extra {
		if from := old.extra[i].To; from != f.To {
			fields = append(fields, Field{Path: f.Path, From: from, To: f.To})
		}
	}
	fields = append(fields, fieldDiffs(old.val, new.val)...)
	if len(fields) > 0 {
		d.add(Change{Op: Changed, Kind: new.ref.Kind, Name: new.ref.Name, Of: new.ref.Of, Fields: fields, order: new.order})
	}
	for k, l := range new.rules {
		before := old.rules[k].items
		for seq, p := range align(before, l.items) {
			d.rule(new, l, seq, p.index(), index(before, p.old), index(l.items, p.new), false)
		}
	}
}

// same reports whether an object in both specs is deeply equal, with its
// rules: one check instead of a walk of its fields that would find
// nothing, as for all but a few objects of a large spec that changed one
// VM. Values it calls different may still hold no difference a diff
// shows (a nil list and an empty one): the walk decides.
func same(old, new *object) bool {
	if !slices.Equal(old.extra, new.extra) || len(old.rules) != len(new.rules) {
		return false
	}
	for k, l := range new.rules {
		if !equalValues(old.rules[k].items, l.items) {
			return false
		}
	}
	return equalValues(old.val, new.val)
}

// equalValues is reflect.DeepEqual of two values, either of which may be
// invalid (absent).
func equalValues(a, b reflect.Value) bool {
	if !a.IsValid() || !b.IsValid() {
		return a.IsValid() == b.IsValid()
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// rule records one rule of an owner's list: added (from invalid), removed
// (to invalid) or changed; an equal pair records nothing. seq orders it
// among the list's rules, and i is its position in the list it is in.
func (d *Diff) rule(owner *object, l ruleList, seq, i int, from, to reflect.Value, implied bool) {
	fields := fieldDiffs(from, to)
	if len(fields) == 0 && from.IsValid() && to.IsValid() {
		return
	}
	op := Changed
	switch {
	case !from.IsValid():
		op = Added
	case !to.IsValid():
		op = Removed
	}
	of := owner.ref
	d.add(Change{Op: op, Kind: l.kind, Name: strconv.Itoa(i), Of: &of, Fields: fields, Implied: implied,
		order: append(child(owner, 3+l.rank, ""), orderPart{seq, ""})})
}

func (d *Diff) add(c Change) {
	if c.Fields == nil {
		c.Fields = []Field{}
	}
	d.Changes = append(d.Changes, c)
}

func opRank(op Op) int {
	switch op {
	case Removed:
		return 0
	case Changed:
		return 1
	}
	return 2
}

func compareOrder(x, y []orderPart) int {
	for i := 0; i < min(len(x), len(y)); i++ {
		if x[i].rank != y[i].rank {
			return x[i].rank - y[i].rank
		}
		if c := naturalCompare(x[i].name, y[i].name); c != 0 {
			return c
		}
	}
	return len(x) - len(y)
}

// naturalCompare orders names as people number them: web2 before web10.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := trimZeros(a[:da]), trimZeros(b[:db])
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
