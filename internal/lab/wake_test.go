package lab

import (
	"context"
	"errors"
	"fmt"
	"github.com/vnet-project/vnet/internal/rundir/rundirtest"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/netperf"
)

// asVnet makes this test binary stand in for "vnet netperf ... --json" when
// a test runs it as a child, so the probe's tests need no built vnet.
const asVnet = "VNET_LAB_TEST_AS_VNET"

func TestMain(m *testing.M) {
	if os.Getenv(asVnet) == "1" && len(os.Args) > 1 && os.Args[1] == "netperf" {
		os.Exit(netperfMain(os.Args[2:]))
	}
	os.Exit(rundirtest.Run(m))
}

func netperfMain(args []string) int {
	cfg, err := netperf.ParseArgs(args)
	if err == nil {
		var rep *netperf.Report
		if rep, err = netperf.Execute(context.Background(), cfg, nil); err == nil {
			err = netperf.WriteJSON(os.Stdout, rep)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func TestWakeSaysWhenCrossingCoresIsSlow(t *testing.T) {
	for _, c := range []struct {
		w        Wake
		slow     bool
		contains string
	}{
		{Wake{SameCPU: 21, CrossCPU: 22}, false, "21 µs on one CPU, 22 µs across two"},
		{Wake{SameCPU: 21, CrossCPU: 42}, false, "42 µs across two"},
		{Wake{SameCPU: 21, CrossCPU: 114}, true, "(5.4x: this machine is slow to wake an idle CPU"},
	} {
		if c.w.Slow() != c.slow {
			t.Errorf("%+v: Slow() = %v, want %v", c.w, !c.slow, c.slow)
		}
		if s := c.w.String(); !strings.Contains(s, c.contains) || strings.Contains(s, "slow to wake") != c.slow {
			t.Errorf("%+v: %q, want it to contain %q and mention slowness only if slow", c.w, s, c.contains)
		}
	}
}

// The probe's netserver binds its test thread to each CPU in turn;
// afterwards this process may run where it could before.
func TestProbeWakeMeasuresAndUnbinds(t *testing.T) {
	var before, after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	t.Setenv(asVnet, "1")
	w, err := ProbeWake(context.Background(), os.Args[0], 1)
	if errors.Is(err, ErrOneCPU) {
		t.Skip("SKIPPED: this process may use only one CPU, so there is no wake across cores to probe")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Log(w)
	if w.SameCPU <= 0 || w.CrossCPU <= 0 {
		t.Errorf("probe gave %+v, want two positive round trips", w)
	}
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Errorf("affinity after the probe %v, before %v", after, before)
	}
}
