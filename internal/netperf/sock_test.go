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

// callsUntilLook makes the calls that bring a loop to its next look for
// a slot (or its next yield) and reports whether the last one was raw.
func callsUntilLook(s *sock) bool {
	raw := false
	for i := 0; i < rawCallsPerYield; i++ {
		raw = s.beforeCall()
	}
	return raw
}

// One raw slot, a stream that took it first, a round-trip loop that
// arrives later: the stream gives the slot up at its next call, the
// round-trip loop has it at its next look, and the stream gets it back
// once the round-trip loop is done.
func TestStreamsGiveRawSlotsToRoundTrips(t *testing.T) {
	if len(rawSlots) != 0 || rrWaiting.Load() != 0 {
		t.Fatalf("slots held before the test: %d, waiting %d", len(rawSlots), rrWaiting.Load())
	}
	for i := 1; i < cap(rawSlots); i++ { // leave exactly one free
		rawSlots <- struct{}{}
	}
	defer func() {
		for len(rawSlots) > 0 {
			<-rawSlots
		}
	}()

	stream, rr := &sock{fd: -1}, &sock{fd: -1}
	releaseStream := stream.useRaw(rawForCPU)
	if !stream.beforeCall() {
		t.Fatal("a stream alone did not get the free slot")
	}
	releaseRR := rr.useRaw(rawForLatency)
	if rr.raw || rrWaiting.Load() != 1 {
		t.Fatalf("round trip: raw %v, waiting %d; want false, 1", rr.raw, rrWaiting.Load())
	}
	if stream.beforeCall() {
		t.Fatal("the stream kept its slot while a round-trip loop waited")
	}
	if !callsUntilLook(rr) || rrWaiting.Load() != 0 {
		t.Fatalf("the round-trip loop did not get the slot at its next look (waiting %d)", rrWaiting.Load())
	}
	if callsUntilLook(stream) {
		t.Fatal("the stream took a slot that was not free")
	}
	releaseRR()
	if !callsUntilLook(stream) {
		t.Fatal("the stream did not get the slot back")
	}
	releaseStream()
	if len(rawSlots) != cap(rawSlots)-1 || rrWaiting.Load() != 0 {
		t.Fatalf("after both: %d slots held, waiting %d", len(rawSlots), rrWaiting.Load())
	}
}

// A stream that starts while a round-trip loop waits does not take the slot.
func TestStreamDoesNotTakeASlotARoundTripWaitsFor(t *testing.T) {
	rrWaiting.Add(1)
	defer rrWaiting.Add(-1)
	s := &sock{fd: -1}
	defer s.useRaw(rawForCPU)()
	if s.raw || callsUntilLook(s) {
		t.Fatal("the stream took a raw slot while a round-trip loop waited")
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
