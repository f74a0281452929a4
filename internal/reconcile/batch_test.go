package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
)

// batchDP records how steps reach it: alone (Execute) or together
// (ExecuteBatch), batching the port policies of one namespace.
type batchDP struct {
	calls  []string
	failAt string // the subject of a step that fails
}

func (d *batchDP) Observe(string, []plan.Resource) ([]plan.Resource, error) { return nil, nil }
func (d *batchDP) Probe([]plan.Resource) error                              { return nil }

func (d *batchDP) Execute(a plan.Action) error {
	d.calls = append(d.calls, a.New.Link)
	if a.New.Link == d.failAt {
		return errors.New("failed")
	}
	return nil
}

func (d *batchDP) BatchKey(a plan.Action) string {
	if a.New.Kind == plan.KindPortSec {
		return a.New.NS
	}
	return ""
}

func (d *batchDP) MaxBatch() int { return 3 }

func (d *batchDP) ExecuteBatch(actions []plan.Action) (int, error) {
	var links []string
	for i, a := range actions {
		if a.New.Link == d.failAt {
			d.calls = append(d.calls, fmt.Sprint(links))
			return i, errors.New("failed")
		}
		links = append(links, a.New.Link)
	}
	d.calls = append(d.calls, fmt.Sprint(links))
	return len(actions), nil
}

func TestStepsInBatches(t *testing.T) {
	step := func(kind plan.Kind, ns, link string) plan.Action {
		return plan.Action{Op: plan.OpCreate, New: &plan.Resource{Kind: kind, NS: ns, Link: link}}
	}
	actions := []plan.Action{
		step(plan.KindBridge, "h", "br"),
		step(plan.KindPortSec, "h", "p1"), step(plan.KindPortSec, "h", "p2"), step(plan.KindPortSec, "h", "p3"),
		step(plan.KindPortSec, "h", "p4"), step(plan.KindPortSec, "g", "q1"), step(plan.KindCgroup, "h", "cg"),
	}
	run := func(dp *batchDP, failBefore int) (int, error) {
		e := &Engine{DP: dp}
		if failBefore >= 0 {
			e.FailBefore = func(i int, _ plan.Action) error {
				if i == failBefore {
					return errors.New("fail before")
				}
				return nil
			}
		}
		executed := 0
		for i := 0; i < len(actions); {
			steps := actions[i : i+e.batchLen(actions[i:])]
			done, err := e.steps(i, steps)
			executed += done
			if err != nil {
				return executed, err
			}
			i += len(steps)
		}
		return executed, nil
	}
	for _, tc := range []struct {
		name       string
		failAt     string
		failBefore int
		calls      []string
		executed   int
	}{
		{"all", "", -1, []string{"br", "[p1 p2 p3]", "p4", "q1", "cg"}, 7},
		{"a batched step fails", "p2", -1, []string{"br", "[p1]"}, 2},
		{"fail before a batched step", "", 3, []string{"br", "[p1 p2]"}, 3},
		{"fail before a batch", "", 1, []string{"br"}, 1},
	} {
		dp := &batchDP{failAt: tc.failAt}
		executed, err := run(dp, tc.failBefore)
		if !slices.Equal(dp.calls, tc.calls) || executed != tc.executed || (err != nil) != (tc.failAt != "" || tc.failBefore >= 0) {
			t.Errorf("%s: calls %v, %d executed, error %v; want %v, %d", tc.name, dp.calls, executed, err, tc.calls, tc.executed)
		}
	}
}
