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
