package cpustat

import (
	"strings"
	"testing"
	"time"
)

const stat1 = `cpu  100 0 100 800 0 0 0 0 0 0
cpu0 50 0 50 400 0 0 0 0 0 0
cpu1 50 0 50 400 0 0 0 0 0 0
intr 1 2 3
`

const stat2 = `cpu  300 0 200 1300 0 0 0 0 0 0
cpu0 150 0 100 450 0 0 0 0 0 0
cpu1 50 0 50 800 0 0 0 0 0 0
`

// Each kind of time, as netperf's CPU breakdown counts it.
const stat3 = `cpu0 90 10 70 400 20 5 5 0 0 0
cpu1 50 0 50 400 0 0 0 0 0 0
`

func TestBetween(t *testing.T) {
	a, err := Parse(strings.NewReader(stat1))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Parse(strings.NewReader(stat2))
	now := time.Now()
	u := Between(Sample{At: now, CPUs: a}, Sample{At: now.Add(time.Second), CPUs: b, ProcUser: time.Second / 2})
	// cpu0: busy 150 of 200 ticks; cpu1: 0 of 400.
	if u.NumCPU != 2 || u.PerCPU[0] != 75 || u.PerCPU[1] != 0 {
		t.Errorf("per CPU = %v", u.PerCPU)
	}
	if u.Util != 25 || u.Cores != 0.5 || u.Process != 0.5 {
		t.Errorf("util %.1f cores %.2f process %.2f", u.Util, u.Cores, u.Process)
	}
}

// The breakdown is each kind's share of each CPU's ticks, averaged over
// the CPUs, as netperf's /proc/stat method computes it; nice is in the
// utilization but in no kind.
func TestBreakdown(t *testing.T) {
	a, _ := Parse(strings.NewReader(stat1))
	b, _ := Parse(strings.NewReader(stat3))
	u := Between(Sample{CPUs: a}, Sample{CPUs: b})
	// cpu0: 100 ticks: user 40, nice 10, system 20, iowait 20, irq 5,
	// softirq 5, idle 0 (iowait is idle to vnet's utilization); cpu1:
	// none.
	if u.PerCPU[0] != 80 || u.PerCPU[1] != 0 {
		t.Errorf("per CPU %v, want 80 0", u.PerCPU)
	}
	for _, k := range []struct {
		name      string
		got, want float64
	}{{"user", u.User, 20}, {"system", u.System, 10}, {"iowait", u.IOWait, 10}, {"irq", u.IRQ, 2.5}, {"softirq", u.SoftIRQ, 2.5}} {
		if k.got != k.want {
			t.Errorf("%s %.2f%%, want %.2f%%", k.name, k.got, k.want)
		}
	}
	if f := Between(Sample{CPUs: a}.First(1), Sample{CPUs: b}.First(1)); f.NumCPU != 1 || f.Util != 80 || f.User != 40 {
		t.Errorf("the first CPU alone: %+v", f)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{"", "intr 1 2\n", "cpu0 x 0 0 0 0\n"} {
		if _, err := Parse(strings.NewReader(in)); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
}

func TestTake(t *testing.T) {
	s, err := Take()
	if err != nil {
		t.Fatal(err)
	}
	u := Between(s, s)
	if u.Util < 0 || u.Util > 100 || u.NumCPU < 1 {
		t.Errorf("usage %+v", u)
	}
}
