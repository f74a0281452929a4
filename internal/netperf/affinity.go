package netperf

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// MaxCPU bounds a -T CPU number: the size of the kernel's affinity mask
// that unix.CPUSet carries.
const MaxCPU = len(unix.CPUSet{})*64 - 1

// masksFor reads the calling thread's mask and builds the one-CPU mask to
// bind to, refusing a CPU the thread may not run on and naming the ones it may.
func masksFor(cpu int) (before, one unix.CPUSet, err error) {
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		return before, one, fmt.Errorf("read CPU affinity: %w", err)
	}
	if cpu < 0 || cpu > MaxCPU || !before.IsSet(cpu) {
		return before, one, fmt.Errorf("bind to CPU %d: not one of this process's CPUs (%s)", cpu, cpuList(&before))
	}
	one.Set(cpu)
	return before, one, nil
}

// bindProcess moves every thread of this process to one CPU, as netperf's
// -T binds the netperf process: every test of one vnet netperf shares the
// local CPU, so the whole process can. Threads the runtime starts later
// inherit the mask from the thread that creates them. The returned
// function puts every thread back on the CPUs it had.
func bindProcess(cpu int) (release func(), err error) {
	before, one, err := masksFor(cpu)
	if err != nil {
		return nil, err
	}
	if err := setAllThreads(&one); err != nil {
		setAllThreads(&before)
		return nil, fmt.Errorf("bind to CPU %d: %w", cpu, err)
	}
	return func() { setAllThreads(&before) }, nil
}

// setAllThreads sets the mask of every thread in /proc/self/task, again
// until a pass finds no thread it had not seen: the runtime may start one
// while the first pass runs.
func setAllThreads(set *unix.CPUSet) error {
	seen := map[int]bool{}
	for {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || seen[tid] {
				continue
			}
			seen[tid], fresh = true, true
			if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
				return err
			}
		}
		if !fresh {
			return nil
		}
	}
}

// bindThread keeps the calling goroutine on its OS thread and that thread
// on one CPU: netserver's half of -T. (C netserver forks a process per
// test and binds it; here tests share a process, so only the thread that
// runs the test's data loop is bound.) The returned function restores the
// thread's mask before handing the thread back to the runtime's pool.
func bindThread(cpu int) (release func(), err error) {
	runtime.LockOSThread()
	before, one, err := masksFor(cpu)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("bind to CPU %d: %w", cpu, err)
	}
	return func() {
		_ = unix.SchedSetaffinity(0, &before)
		runtime.UnlockOSThread()
	}, nil
}

// cpuList prints a mask as the kernel's lists do: "0-3,6".
func cpuList(set *unix.CPUSet) string {
	out, first := "", -1
	flush := func(last int) {
		if first < 0 {
			return
		}
		if out != "" {
			out += ","
		}
		if last == first {
			out += fmt.Sprint(first)
		} else {
			out += fmt.Sprintf("%d-%d", first, last)
		}
		first = -1
	}
	for cpu := 0; cpu <= MaxCPU+1; cpu++ {
		if cpu <= MaxCPU && set.IsSet(cpu) {
			if first < 0 {
				first = cpu
			}
			continue
		}
		flush(cpu - 1)
	}
	return out
}
