// Package cpustat measures CPU utilization the way netperf does: from the
// per-CPU counters in /proc/stat, sampled at the start and end of a test,
// system-wide. It also reads the process's own CPU time, which tells the two
// ends apart when both run on one machine.
package cpustat

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU is one line of /proc/stat, in clock ticks.
type CPU struct {
	Name  string
	Busy  uint64 // user+nice+system+irq+softirq+steal
	Idle  uint64 // idle+iowait
	Total uint64
	// The kinds of time netperf reports apart (its CPU breakdown
	// selectors): user (without nice), system, I/O wait, hardware and
	// software interrupts.
	User, System, IOWait, IRQ, SoftIRQ uint64
}

// Sample is the state of every CPU at one instant.
type Sample struct {
	At   time.Time
	CPUs []CPU // per CPU, without the aggregate "cpu" line
	// The process's own CPU time (all threads, children excluded).
	ProcUser, ProcSys time.Duration
}

// Parse reads /proc/stat's per-CPU lines.
func Parse(r io.Reader) ([]CPU, error) {
	var out []CPU
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		var v [10]uint64
		for i := 1; i < len(f) && i <= 10; i++ {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/stat %s: %w", f[0], err)
			}
			v[i-1] = n
		}
		// user nice system idle iowait irq softirq steal guest guest_nice;
		// guest time is already counted in user.
		idle := v[3] + v[4]
		busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
		out = append(out, CPU{Name: f[0], Busy: busy, Idle: idle, Total: busy + idle,
			User: v[0], System: v[2], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("/proc/stat: no per-CPU lines")
	}
	return out, nil
}

// Take samples /proc/stat and the process's CPU time now.
func Take() (Sample, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return Sample{}, err
	}
	defer f.Close()
	cpus, err := Parse(f)
	if err != nil {
		return Sample{}, err
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return Sample{At: time.Now(), CPUs: cpus,
		ProcUser: time.Duration(ru.Utime.Nano()), ProcSys: time.Duration(ru.Stime.Nano())}, nil
}

// First is the sample of the first n CPUs alone (all of them when n is 0
// or more than there are).
func (s Sample) First(n int) Sample {
	if n > 0 && n < len(s.CPUs) {
		s.CPUs = s.CPUs[:n]
	}
	return s
}

// Usage is the CPU used between two samples.
type Usage struct {
	NumCPU  int       `json:"num_cpus"`
	Util    float64   `json:"util_percent"`    // of all CPUs together, 0-100 (netperf's figure)
	PerCPU  []float64 `json:"per_cpu_percent"` // each CPU, 0-100
	Cores   float64   `json:"cores_used"`      // Util/100 × NumCPU
	Process float64   `json:"process_cores"`   // the process's own CPU time / elapsed
	Elapsed float64   `json:"elapsed_s"`
	// The breakdown, as netperf computes it: each kind's share of each
	// CPU's time, averaged over the CPUs, 0-100.
	User    float64 `json:"user_percent"`
	System  float64 `json:"system_percent"`
	IOWait  float64 `json:"iowait_percent"`
	IRQ     float64 `json:"irq_percent"`
	SoftIRQ float64 `json:"softirq_percent"`
}

// Between computes the usage from a to b.
func Between(a, b Sample) Usage {
	u := Usage{NumCPU: len(b.CPUs), Elapsed: b.At.Sub(a.At).Seconds()}
	var busy, total uint64
	for i := range b.CPUs {
		if i >= len(a.CPUs) {
			break
		}
		db := sub(b.CPUs[i].Busy, a.CPUs[i].Busy)
		dt := sub(b.CPUs[i].Total, a.CPUs[i].Total)
		busy += db
		total += dt
		u.PerCPU = append(u.PerCPU, pct(db, dt))
		x, y := b.CPUs[i], a.CPUs[i]
		u.User += pct(sub(x.User, y.User), dt)
		u.System += pct(sub(x.System, y.System), dt)
		u.IOWait += pct(sub(x.IOWait, y.IOWait), dt)
		u.IRQ += pct(sub(x.IRQ, y.IRQ), dt)
		u.SoftIRQ += pct(sub(x.SoftIRQ, y.SoftIRQ), dt)
	}
	if n := float64(len(u.PerCPU)); n > 0 {
		u.User, u.System, u.IOWait, u.IRQ, u.SoftIRQ = u.User/n, u.System/n, u.IOWait/n, u.IRQ/n, u.SoftIRQ/n
	}
	u.Util = pct(busy, total)
	u.Cores = u.Util / 100 * float64(u.NumCPU)
	if u.Elapsed > 0 {
		u.Process = (b.ProcUser + b.ProcSys - a.ProcUser - a.ProcSys).Seconds() / u.Elapsed
	}
	return u
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0 // a CPU went offline and came back
	}
	return a - b
}

func pct(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return min(100, 100*float64(part)/float64(whole))
}
