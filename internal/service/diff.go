package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/vnet-project/vnet/internal/history"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/specdiff"
	"github.com/vnet-project/vnet/internal/store"
)

// DiffRequest says what a diff compares: a spec (Source) with the applied
// one, or two generations from the history (From, To; 0 is the one in
// force).
type DiffRequest struct {
	Source *Source
	From   int
	To     int
	// Plan adds what applying the new side would change in the kernel.
	Plan bool
}

// DiffResult is a spec-level diff, and with Plan the kernel's plan.
type DiffResult struct {
	Infra string `json:"infra"`
	// From and To say what the sides are: "generation 3 (in force)",
	// "file web.yaml".
	From string         `json:"from"`
	To   string         `json:"to"`
	Diff *specdiff.Diff `json:"diff"`
	// Summary says the diff in one line, as a history entry does.
	Summary string `json:"summary"`
	// Plans, with Plan, is what applying the new side changes, per host
	// over etcd, each with what it was worked out against.
	Plans []HostPlan `json:"plans,omitempty"`
	// Attached is, for a file or from the generation in force back to an
	// earlier one, what an apply or a rollback does with the VMs runtimes
	// attached: the new side is the file's or the earlier spec with those
	// attached now kept, as the apply or the rollback applies it. Those in
	// the way (Attached.InTheWay) make it refuse unless asked to drop
	// them; the new side leaves them out, as it then would.
	Attached *Attached `json:"attached,omitempty"`
	// Pauses, between two generations, are the pauses and resumes the
	// history holds between them, oldest first: what is paused is kept
	// beside the spec, not in it, so the diff and its exit status leave it
	// out, and a rollback keeps what is paused as it is.
	Pauses []history.Entry `json:"pauses,omitempty"`
}

// Equal says the two sides say the same.
func (r *DiffResult) Equal() bool { return r.Diff.Equal() }

// Diff compares a spec, or an earlier generation, with what is applied on
// this machine.
func (l *Local) Diff(ctx context.Context, name string, r DiffRequest) (*DiffResult, error) {
	return diffOf(ctx, l, name, r)
}

// Diff compares a spec, or an earlier generation, with what etcd holds.
func (c *Cluster) Diff(ctx context.Context, name string, r DiffRequest) (*DiffResult, error) {
	return diffOf(ctx, c, name, r)
}

// side is one side of a diff: a spec and what it is.
type side struct {
	doc  *spec.Document // nil: nothing
	what string
	// seq is the Seq of the history entry of the side's spec, now for the
	// generation in force (the newest Seq there is), 0 for a file; heads
	// is the history it is in.
	seq   int
	heads []history.Entry
}

// now is the seq of the side that is the infrastructure as it is now.
const now = math.MaxInt

// betweenSides are the pauses and resumes between two generations (none
// when a side is a file).
func betweenSides(a, b side) []history.Entry {
	if a.seq == 0 || b.seq == 0 {
		return nil
	}
	return history.Heads(history.Pauses(a.heads, a.seq, b.seq))
}

func diffOf(ctx context.Context, b historian, name string, r DiffRequest) (*DiffResult, error) {
	if r.From < 0 || r.To < 0 {
		return nil, Invalid("--from and --to: want generations, 1 or more")
	}
	if r.Source != nil && r.From > 0 {
		return nil, Invalid("a diff compares a file with what is applied, or two generations: not a file and --from")
	}
	old, next, current, err := diffSides(b, name, r)
	if err != nil {
		return nil, err
	}
	res := &DiffResult{Infra: name, From: old.what, To: next.what, Pauses: betweenSides(old, next)}
	if (r.Source != nil || old.seq == now && next.seq != now) && next.doc != nil {
		// A file, or from the spec in force back to an earlier generation:
		// what an apply or a rollback would apply, with the VMs runtimes
		// attach now.
		if next.doc, res.Attached, err = attachedSide(name, next, old, r.Source != nil); err != nil {
			return nil, err
		}
	}
	res.Diff = specdiff.Compare(specOf(old.doc), specOf(next.doc))
	res.Summary = res.Diff.Summary()
	if !r.Plan {
		return res, nil
	}
	if next.doc == nil {
		return nil, Invalid("--plan: the new side is nothing applied: vnet destroy --dry-run says what it removes")
	}
	// From what is in force, the plan is an apply's dry run: on this
	// machine read from the kernel, over etcd per host by its report.
	// Between two other generations it is modelled from the two specs.
	if r.Source != nil || r.From == 0 || r.From == current {
		ar, err := b.Apply(ctx, Source{Doc: next.doc}, ApplyOptions{DryRun: true, Detail: true, DropAttached: true})
		if err != nil {
			return nil, err
		}
		res.Plans = ar.Hosts
		if res.Plans == nil {
			res.Plans = []HostPlan{{Basis: "this machine's kernel, read now", Actions: ar.Plan}}
		}
		return res, nil
	}
	res.Plans = b.modelled(specOf(old.doc), next.doc.Spec,
		fmt.Sprintf("modelled from %s to %s: what an apply going from one to the other changes, no kernel read", old.what, next.what))
	return res, nil
}

// diffSides reads the two sides of a diff, and the generation in force
// (0: none).
func diffSides(b historian, name string, r DiffRequest) (old, next side, current int, err error) {
	k, done, err := b.keeper()
	if err != nil {
		return old, next, 0, err
	}
	defer done()
	heads, current, err := headsOf(k, name)
	switch {
	case errors.Is(err, ErrNotFound) && r.Source != nil:
		// A file compared with nothing: everything in it is new.
	case err != nil:
		return old, next, 0, err
	}
	var inForce *store.Record
	if current > 0 {
		if inForce, err = k.head(name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return old, next, 0, err
		}
	}
	at := func(gen int) (side, error) {
		if gen == 0 || gen == current {
			if inForce == nil {
				return side{what: "nothing applied", seq: now, heads: heads}, nil
			}
			doc, err := b.docOf(inForce)
			return side{doc, fmt.Sprintf("generation %d (in force)", inForce.Generation), now, heads}, err
		}
		e, err := entryWithSpec(k, name, heads, gen)
		if err != nil {
			return side{}, err
		}
		doc, err := b.Load(e.SpecFile, e.Spec)
		return side{doc, fmt.Sprintf("generation %d", gen), e.Seq, heads}, err
	}
	if old, err = at(r.From); err != nil {
		return old, next, 0, err
	}
	if r.Source == nil {
		next, err = at(r.To)
		return old, next, current, err
	}
	next, err = fileSide(b, name, *r.Source, old.doc)
	return old, next, current, err
}

// attachedSide is a file's spec, or an earlier generation's, as an apply
// or a rollback from the spec in force (now) applies it, and what becomes
// of the VMs runtimes attached; nil when there are none.
func attachedSide(name string, next, now side, applying bool) (*spec.Document, *Attached, error) {
	doc, att, err := keepAttached(name, next.what, next.doc, now.doc, true, applying)
	if att.Empty() {
		att = nil
	}
	return doc, att, err
}

// fileSide loads a spec to compare with old (nil: none), its networks'
// VNIs pinned against it as an apply would store them.
func fileSide(b historian, name string, src Source, old *spec.Document) (side, error) {
	doc := src.Doc
	if doc == nil {
		var err error
		if doc, err = b.LoadFile(src.File); err != nil {
			return side{}, err
		}
	}
	if doc.Spec.Name != name {
		return side{}, Invalid(fmt.Sprintf("%s names infrastructure %q, not %q", doc.File, doc.Spec.Name, name))
	}
	pinned, err := spec.PinVNIs(doc, specOf(old))
	if err != nil {
		return side{}, err
	}
	return side{doc: pinned, what: "file " + doc.File}, nil
}

func specOf(doc *spec.Document) *spec.Spec {
	if doc == nil {
		return nil
	}
	return doc.Spec
}

// modelled is, on this machine, the plan from one spec's model to the
// other's (old may be nil).
func (l *Local) modelled(old, next *spec.Spec, basis string) []HostPlan {
	opt := plan.Options{NumCPU: runtime.NumCPU()}
	var now []plan.Resource
	if old != nil {
		now = plan.Model(old, opt)
	}
	return []HostPlan{{Basis: basis, Actions: Actions(plan.Diff(plan.Model(next, opt), now))}}
}

// modelled is, over etcd, the plan from one spec's model to the other's,
// host by host.
func (c *Cluster) modelled(old, next *spec.Spec, basis string) []HostPlan {
	var out []HostPlan
	for _, h := range hostsOf(next, old) {
		out = append(out, HostPlan{Host: h, Basis: basis, Actions: Actions(hostDiff(next, old, h))})
	}
	return out
}
