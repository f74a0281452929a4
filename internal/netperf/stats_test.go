package netperf

import (
	"math"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 1000; i++ {
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	l := Summarize(d)
	if l.Min != 1 || l.Max != 1000 || l.P50 != 500 || l.P90 != 900 || l.P99 != 990 || l.P999 != 999 || l.Mean != 500.5 {
		t.Errorf("%+v", l)
	}
	if math.Abs(l.Stddev-288.675) > 0.01 {
		t.Errorf("stddev %v", l.Stddev)
	}
	if Summarize(nil) != nil {
		t.Error("empty summary not nil")
	}
	one := Summarize([]time.Duration{7 * time.Microsecond})
	if one.P999 != 7 || one.Stddev != 0 {
		t.Errorf("%+v", one)
	}
}

func TestIntervalWidth(t *testing.T) {
	// mean 100, sd 1, n 4: half width = 3.182 * 1 / 2 at 95%.
	w := IntervalWidth([]float64{99, 101, 99, 101}, 95)
	sd := math.Sqrt(4.0 / 3)
	want := 100 * 2 * 3.182 * sd / 2 / 100
	if math.Abs(w-want) > 1e-9 {
		t.Errorf("width %v, want %v", w, want)
	}
	if !math.IsInf(IntervalWidth([]float64{1}, 99), 1) {
		t.Error("one value has a finite interval")
	}
	if IntervalWidth([]float64{5, 5, 5}, 99) != 0 {
		t.Error("identical values have a non-zero interval")
	}
	if studentT(99, 100) != 2.576 || studentT(95, 1) != 12.706 {
		t.Error("t table")
	}
}
