package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/netperf"
)

// Wake is the median loopback TCP_RR round trip, in µs, with both ends on
// one CPU and with them on two. In a VM the second depends on how fast the
// host runs a halted vCPU again: 22 µs on a normal day here, 114 µs on a
// bad one, against 21 µs within one CPU. Every verdict that waits on
// another core (latency, several streams) moves with it, so the report
// says which day it was.
type Wake struct {
	SameCPU, CrossCPU float64
}

// ErrOneCPU: there is no second CPU to wake.
var ErrOneCPU = errors.New("one CPU: nothing to compare")

// slowWake is how much longer a round trip across cores may take than one
// within a core before the machine counts as slow to wake: a normal day
// gives about 1.05.
const slowWake = 2.0

// Slow reports whether crossing cores costs the host's wake-up latency.
func (w Wake) Slow() bool { return w.CrossCPU > slowWake*w.SameCPU }

func (w Wake) String() string {
	s := fmt.Sprintf("loopback TCP_RR p50 %.0f µs on one CPU, %.0f µs across two", w.SameCPU, w.CrossCPU)
	if w.Slow() {
		s += fmt.Sprintf(" (%.1fx: this machine is slow to wake an idle CPU, and latency and multi-core figures show it)", w.CrossCPU/w.SameCPU)
	}
	return s
}

// ProbeWake measures Wake on loopback, secs seconds each way, on the first
// two CPUs this process may use: exe (vnet) runs the client, an in-process
// netserver the other end. Two processes, because -T binds the whole
// client process, as netperf's does, and the server's thread must still
// be free to go to the other CPU.
func ProbeWake(ctx context.Context, exe string, secs int) (Wake, error) {
	a, b, err := firstTwoCPUs()
	if err != nil {
		return Wake{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Wake{}, fmt.Errorf("wake probe: %w", err)
	}
	ctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- (&netperf.Server{}).Serve(ctx, ln) }()
	defer func() { stop(); <-served }()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	p50 := func(local, remote int) (float64, error) {
		out, err := exec.CommandContext(ctx, exe, "netperf", "-H", "127.0.0.1", "-p", port, "-l", strconv.Itoa(secs),
			"-t", "TCP_RR", "-j", "--json", "-T", fmt.Sprintf("%d,%d", local, remote)).Output()
		if err != nil {
			return 0, fmt.Errorf("wake probe on CPUs %d,%d: %w%s", local, remote, err, stderrOf(err))
		}
		var rep netperf.Report
		if err := json.Unmarshal(out, &rep); err != nil || len(rep.Results) == 0 || rep.Results[0].Latency == nil {
			return 0, fmt.Errorf("wake probe on CPUs %d,%d: no latency in %.200q", local, remote, out)
		}
		return rep.Results[0].Latency.P50, nil
	}
	var w Wake
	if w.SameCPU, err = p50(a, a); err != nil {
		return Wake{}, err
	}
	if w.CrossCPU, err = p50(a, b); err != nil {
		return Wake{}, err
	}
	return w, nil
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

func firstTwoCPUs() (int, int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, 0, fmt.Errorf("wake probe: %w", err)
	}
	var cpus []int
	for c := 0; c <= netperf.MaxCPU && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return 0, 0, ErrOneCPU
	}
	return cpus[0], cpus[1], nil
}
