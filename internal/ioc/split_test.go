package ioc

import (
	"math"
	"testing"
)

func sum(xs []uint64) uint64 {
	var s uint64
	for _, x := range xs {
		s += x
	}
	return s
}

func TestEqualSplit(t *testing.T) {
	for _, tt := range []struct {
		limit uint64
		n     int
	}{{300e6, 2}, {100e6, 3}, {7, 2}, {1e9, 1}} {
		got := EqualSplit(tt.limit, tt.n)
		if sum(got) != tt.limit {
			t.Errorf("EqualSplit(%d, %d) = %v: sums to %d", tt.limit, tt.n, got, sum(got))
		}
	}
}

// converge runs the split loop with a demand model: each uplink's pool
// traffic makes min(demand, ceiling).
func converge(limit uint64, demand []float64, rounds int) []uint64 {
	ceils := EqualSplit(limit, len(demand))
	for r := 0; r < rounds; r++ {
		rates := make([]float64, len(demand))
		for i := range demand {
			rates[i] = math.Min(demand[i], float64(ceils[i]))
		}
		if next := SplitLimit(limit, ceils, rates); next != nil {
			ceils = next
		}
	}
	return ceils
}

func TestSplitLimit(t *testing.T) {
	const limit = 300e6
	tests := []struct {
		name   string
		demand []float64
		check  func(t *testing.T, ceils []uint64)
	}{
		{"traffic on one uplink gets nearly the whole limit", []float64{1e9, 0}, func(t *testing.T, c []uint64) {
			if float64(c[0]) < 0.97*limit {
				t.Errorf("busy uplink's ceiling %d, want at least 97%% of the limit", c[0])
			}
		}},
		{"two saturating uplinks share it evenly", []float64{1e9, 1e9}, func(t *testing.T, c []uint64) {
			if c[0] != c[1] && math.Abs(float64(c[0])-float64(c[1])) > 0.05*limit {
				t.Errorf("ceilings %v, want about even", c)
			}
		}},
		{"a light uplink keeps what it uses, the busy one the rest", []float64{50e6, 1e9}, func(t *testing.T, c []uint64) {
			if float64(c[0]) < 50e6 || float64(c[1]) < 0.75*limit {
				t.Errorf("ceilings %v: the light uplink needs 50M, the busy one the rest", c)
			}
		}},
		{"no demand at all leaves an even split", []float64{0, 0, 0}, func(t *testing.T, c []uint64) {
			if float64(c[0]) < 0.3*limit || float64(c[2]) < 0.3*limit {
				t.Errorf("ceilings %v, want about a third each", c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := converge(limit, tt.demand, 40)
			if sum(c) != limit {
				t.Fatalf("ceilings %v sum to %d, not the limit", c, sum(c))
			}
			tt.check(t, c)
		})
	}
	if SplitLimit(limit, []uint64{150e6, 150e6}, []float64{149e6, 149e6}) != nil {
		t.Error("a balanced split was churned")
	}
	if SplitLimit(limit, []uint64{limit}, []float64{1}) != nil {
		t.Error("a single uplink has nothing to split")
	}
}
