package netperf

import (
	"math"
	"sort"
	"time"
)

// Latency summarizes RR transaction times, in microseconds.
type Latency struct {
	Samples int64   `json:"samples"`
	Min     float64 `json:"min_us"`
	Mean    float64 `json:"mean_us"`
	P50     float64 `json:"p50_us"`
	P90     float64 `json:"p90_us"`
	P99     float64 `json:"p99_us"`
	P999    float64 `json:"p99_9_us"`
	Max     float64 `json:"max_us"`
	Stddev  float64 `json:"stddev_us"`
}

// Summarize computes the latency figures from every transaction's time.
// Percentiles are nearest-rank on the sorted samples: exact, not binned.
func Summarize(d []time.Duration) *Latency {
	if len(d) == 0 {
		return nil
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	us := func(x time.Duration) float64 { return float64(x) / 1e3 }
	var sum float64
	for _, x := range s {
		sum += us(x)
	}
	mean := sum / float64(len(s))
	var sq float64
	for _, x := range s {
		sq += (us(x) - mean) * (us(x) - mean)
	}
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(s))-1e-9)) - 1 // 99.9% of 1000 is 999, not 999.0000001
		return us(s[max(0, min(i, len(s)-1))])
	}
	return &Latency{Samples: int64(len(s)), Min: us(s[0]), Mean: mean, P50: rank(50), P90: rank(90),
		P99: rank(99), P999: rank(99.9), Max: us(s[len(s)-1]), Stddev: math.Sqrt(sq / float64(len(s)))}
}

// Confidence is the outcome of repeating a test until its mean is known
// well enough (netperf's -I and -i).
type Confidence struct {
	Level      int       `json:"level"`
	Target     float64   `json:"target_width_percent"`
	Width      float64   `json:"width_percent"` // full interval width as % of the mean
	Iterations int       `json:"iterations"`
	Achieved   bool      `json:"achieved"`
	Values     []float64 `json:"values"`
	Mean       float64   `json:"mean"`
}

// IntervalWidth returns the full width of the two-sided Student-t
// confidence interval of the mean, as a percentage of the mean.
func IntervalWidth(values []float64, level int) float64 {
	n := len(values)
	if n < 2 {
		return math.Inf(1)
	}
	var sum float64
	for _, v := range values {
		sum += v
	}
	mean := sum / float64(n)
	var sq float64
	for _, v := range values {
		sq += (v - mean) * (v - mean)
	}
	sd := math.Sqrt(sq / float64(n-1))
	if mean == 0 {
		return math.Inf(1)
	}
	return 100 * 2 * studentT(level, n-1) * sd / math.Sqrt(float64(n)) / math.Abs(mean)
}

// Two-sided critical values of Student's t for 1..30 degrees of freedom.
var tTable = map[int][]float64{
	95: {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
		2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042},
	99: {63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012, 2.977, 2.947,
		2.921, 2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750},
}

func studentT(level, df int) float64 {
	t := tTable[level]
	if t == nil {
		t = tTable[99]
	}
	if df >= 1 && df <= len(t) {
		return t[df-1]
	}
	if level == 95 {
		return 1.960
	}
	return 2.576
}
