package hostagent

import (
	"errors"
	"testing"
	"time"
)

// A backend's state follows its probes: the first decides, then rise
// successes in a row bring it up and fall failures in a row take it down.
func TestProbeState(t *testing.T) {
	fail := errors.New("refused")
	cases := []struct {
		name       string
		rise, fall int
		probes     []bool // true: the probe succeeded
		want       []bool // the state after each
		changes    []int  // after which probes it changed
	}{
		{"first up", 2, 2, []bool{true, true}, []bool{true, true}, []int{0}},
		{"first down", 2, 2, []bool{false, true, true}, []bool{false, false, true}, []int{0, 2}},
		{"fall 2", 2, 2, []bool{true, false, true, false, false}, []bool{true, true, true, true, false}, []int{0, 4}},
		{"fall 1", 1, 1, []bool{true, false, true}, []bool{true, false, true}, []int{0, 1, 2}},
		{"rise 3", 3, 1, []bool{false, true, true, false, true, true, true}, []bool{false, false, false, false, false, false, true}, []int{0, 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var st probeState
			var changes []int
			for i, ok := range c.probes {
				var err error
				if !ok {
					err = fail
				}
				if st.record(err, c.rise, c.fall, time.Unix(int64(i), 0)) {
					changes = append(changes, i)
				}
				if st.up != c.want[i] {
					t.Errorf("after probe %d: up %v, want %v", i, st.up, c.want[i])
				}
				if !st.up && st.err != "refused" || st.up && st.err != "" {
					t.Errorf("after probe %d: error %q", i, st.err)
				}
			}
			if len(changes) != len(c.changes) {
				t.Fatalf("changes %v, want %v", changes, c.changes)
			}
			for i := range changes {
				if changes[i] != c.changes[i] {
					t.Errorf("changes %v, want %v", changes, c.changes)
				}
			}
			if last := c.changes[len(c.changes)-1]; st.since != time.Unix(int64(last), 0) {
				t.Errorf("since %v, want the last change's", st.since)
			}
		})
	}
}
