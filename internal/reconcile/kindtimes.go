package reconcile

import (
	"sort"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
)

// kindTimes adds up, when the engine traces, how long the steps of each
// operation and kind took, so that a trace says where an execution's time
// went. Without a trace it costs nothing.
type kindTimes struct {
	on    bool
	spent map[string]*kindTime
}

type kindTime struct {
	steps int
	took  time.Duration
}

func (e *Engine) kindTimes() *kindTimes {
	return &kindTimes{on: e.Trace != nil, spent: map[string]*kindTime{}}
}

func (k *kindTimes) begin() time.Time {
	if !k.on {
		return time.Time{}
	}
	return time.Now()
}

// end adds the time since began to n steps of a's operation and kind.
func (k *kindTimes) end(a plan.Action, n int, began time.Time) {
	if !k.on {
		return
	}
	key := string(a.Op) + " " + string(a.Subject().Kind)
	t := k.spent[key]
	if t == nil {
		t = &kindTime{}
		k.spent[key] = t
	}
	t.steps += n
	t.took += time.Since(began)
}

// trace prints the totals, the dearest first.
func (k *kindTimes) trace(printf func(format string, args ...any)) {
	if !k.on {
		return
	}
	keys := make([]string, 0, len(k.spent))
	for key := range k.spent {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return k.spent[keys[i]].took > k.spent[keys[j]].took })
	for _, key := range keys {
		t := k.spent[key]
		printf("           %8.1f ms  %s (%d, %.2f ms each)\n", float64(t.took.Microseconds())/1000, key, t.steps,
			float64(t.took.Microseconds())/1000/float64(t.steps))
	}
}
