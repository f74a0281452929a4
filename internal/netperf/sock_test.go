package netperf

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A raw loop must yield well inside the runtime's 10 ms preemption
// deadline even at the fastest round trips (a few µs per call on loopback),
// and not so often that the yield shows in a transaction's time.
func TestRawLoopYieldsOncePerCadence(t *testing.T) {
	var s sock
	yields := 0
	for i := 1; i <= 10*rawCallsPerYield; i++ {
		if s.yieldNow() {
			yields++
			if i%rawCallsPerYield != 0 {
				t.Fatalf("yield at call %d, want every %d calls", i, rawCallsPerYield)
			}
		}
	}
	if yields != 10 {
		t.Fatalf("%d yields in %d calls, want 10", yields, 10*rawCallsPerYield)
	}
	if rawCallsPerYield > 1024 || rawCallsPerYield < 64 {
		t.Fatalf("cadence %d calls: at 5 µs a call that is not between 0.3 and 5 ms", rawCallsPerYield)
	}
}

// allowedCPUs is the test process's mask and the highest CPU in it.
func allowedCPUs(t *testing.T) (unix.CPUSet, int) {
	t.Helper()
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	last := -1
	for cpu := 0; cpu <= MaxCPU; cpu++ {
		if all.IsSet(cpu) {
			last = cpu
		}
	}
	return all, last
}

// threadMasks reads the mask of every thread of this process.
func threadMasks(t *testing.T) map[int]unix.CPUSet {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	masks := map[int]unix.CPUSet{}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		var m unix.CPUSet
		if unix.SchedGetaffinity(tid, &m) == nil {
			masks[tid] = m
		}
	}
	return masks
}

func TestBindProcessMovesEveryThread(t *testing.T) {
	all, last := allowedCPUs(t)
	release, err := bindProcess(last)
	if err != nil {
		t.Fatal(err)
	}
	for tid, m := range threadMasks(t) {
		if m.Count() != 1 || !m.IsSet(last) {
			t.Errorf("thread %d runs on %s, want %d", tid, cpuList(&m), last)
		}
	}
	release()
	for tid, m := range threadMasks(t) {
		if m != all {
			t.Errorf("after release thread %d runs on %s, want %s", tid, cpuList(&m), cpuList(&all))
		}
	}
	if _, err := bindProcess(MaxCPU + 1); err == nil || !strings.Contains(err.Error(), "not one of this process's CPUs") {
		t.Errorf("CPU %d: %v", MaxCPU+1, err)
	}
}

func TestBindThreadPinsAndRestores(t *testing.T) {
	all, last := allowedCPUs(t)
	done := make(chan struct{})
	go func() { // a goroutine of its own: bindThread locks the calling one
		defer close(done)
		release, err := bindThread(last)
		if err != nil {
			t.Error(err)
			return
		}
		var got unix.CPUSet
		unix.SchedGetaffinity(0, &got)
		if got.Count() != 1 || !got.IsSet(last) {
			t.Errorf("bound to CPU %d, the thread's mask is %s", last, cpuList(&got))
		}
		release()
		runtime.LockOSThread() // the same thread again, to see it restored
		defer runtime.UnlockOSThread()
		unix.SchedGetaffinity(0, &got)
		if got != all {
			t.Errorf("after release the mask is %s, want %s", cpuList(&got), cpuList(&all))
		}
	}()
	<-done
	if _, err := bindThread(MaxCPU + 1); err == nil || !strings.Contains(err.Error(), "not one of this process's CPUs") {
		t.Errorf("CPU %d: %v", MaxCPU+1, err)
	}
}

func TestCPUList(t *testing.T) {
	for _, tt := range []struct {
		cpus []int
		want string
	}{{nil, ""}, {[]int{0}, "0"}, {[]int{0, 1, 2, 3}, "0-3"}, {[]int{0, 1, 3, 5, 6, 7}, "0-1,3,5-7"}, {[]int{MaxCPU}, fmt.Sprint(MaxCPU)}} {
		var s unix.CPUSet
		for _, c := range tt.cpus {
			s.Set(c)
		}
		if got := cpuList(&s); got != tt.want {
			t.Errorf("cpuList(%v) = %q, want %q", tt.cpus, got, tt.want)
		}
	}
}
