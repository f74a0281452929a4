package main

import (
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/netperf"
	"github.com/vnet-project/vnet/internal/nstest"
)

// Every test type, in both directions, between two VMs on two hosts across
// the emulated physical switch, with CPU at both ends.
func TestNetperfAcrossNamespaces(t *testing.T) {
	requireRoot(t)
	state := t.TempDir()
	infra := nstest.Infra("npt")
	src := `name: ` + infra + `
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 1Gbit}]}
  - {name: esx2, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - {name: dvs0, uplinks: [{name: u1, nics: {esx1: vmnic0, esx2: vmnic0}}], portgroups: [{name: pg}]}
vms:
  - {name: vma, host: esx1, nics: [{portgroup: pg, ip: 10.77.0.1/24}]}
  - {name: vmb, host: esx2, nics: [{portgroup: pg, ip: 10.77.0.2/24}]}
`
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte(src), 0o644)
	if out, code := run(t, state, "apply", f); code != 0 {
		t.Fatalf("apply: %s", out)
	}
	defer func() {
		if out, code := run(t, state, "destroy", infra); code != 0 {
			t.Errorf("destroy: %s", out)
		}
	}()
	for _, vm := range []string{"vma", "vmb"} {
		if out, code := run(t, state, "exec", vm, "--", vnetBin, "netserver"); code != 0 {
			t.Fatalf("netserver in %s: %s", vm, out)
		}
	}
	// Each netserver listens on 12865 once it is up; however long that
	// takes on this machine, wait for it rather than for a fixed time.
	for _, to := range []struct{ from, addr string }{{"vma", "10.77.0.2:12865"}, {"vmb", "10.77.0.1:12865"}} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := nstest.Dial(t, nstest.NSName(infra, to.from), to.addr, net.Dialer{Timeout: time.Second})
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the netserver on %s does not answer: %v", to.addr, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, dir := range []struct{ from, to string }{{"vma", "10.77.0.2"}, {"vmb", "10.77.0.1"}} {
		for _, test := range netperf.Tests {
			out, code := run(t, state, "exec", dir.from, "--", vnetBin, "netperf", "-H", dir.to, "-l", "1", "-t", test, "-c", "-C", "--json", "--", "-m", "1400")
			if code != 0 {
				t.Errorf("%s %s -> %s: exit %d: %s", test, dir.from, dir.to, code, out)
				continue
			}
			var rep netperf.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%s: %v\n%s", test, err, out)
			}
			checkResult(t, test+" from "+dir.from, rep.Results[0])
		}
	}
}

func checkResult(t *testing.T, name string, r *netperf.Result) {
	t.Helper()
	if r.Throughput <= 0 && r.TransRate <= 0 {
		t.Errorf("%s: nothing measured", name)
	}
	if r.Throughput > 1.03e9 {
		t.Errorf("%s: %.0f bit/s through a 1 Gbit NIC", name, r.Throughput)
	}
	for side, s := range map[string]netperf.SideResults{"local": r.Local, "remote": r.Remote} {
		if s.CPU == nil || s.CPU.Util < 0 || s.CPU.Util > 100 {
			t.Errorf("%s: %s CPU %+v", name, side, s.CPU)
			continue
		}
		// Service demand must follow from CPU and work: util × cpus × time / units.
		units := float64(s.Bytes) / 1024
		sd := r.LocalSD
		if side == "remote" {
			sd = r.RemoteSD
		}
		if strings.Contains(name, "RR") {
			units = float64(s.Transactions)
			if side == "local" {
				units = float64(r.Transactions)
			}
		}
		want := s.CPU.Util / 100 * float64(s.CPU.NumCPU) * s.CPU.Elapsed * 1e6 / units
		if units > 0 && math.Abs(sd-want) > 1e-6*math.Max(1, want) {
			t.Errorf("%s: %s service demand %.4f, CPU and work give %.4f", name, side, sd, want)
		}
	}
	if r.RecvIface == nil || r.RecvIface.RxPackets == 0 || r.RecvIface.Name != "eth0" {
		t.Errorf("%s: receive interface %+v", name, r.RecvIface)
	}
}

func TestDaemonArgsNameTheListener(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want string
	}{
		{"[::]:12865", "netserver -D -p 12865"},
		{"0.0.0.0:12866", "netserver -D -p 12866"},
		{"10.0.0.2:12865", "netserver -D -p 12865 -L 10.0.0.2"},
		{"[fd00::2]:9", "netserver -D -p 9 -L fd00::2"},
	} {
		a, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(daemonArgs(a), " "); got != tc.want {
			t.Errorf("daemonArgs(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// The limits given to a netserver that goes to the background reach the
// copy that serves; nonsense limits are usage errors.
func TestNetserverLimits(t *testing.T) {
	cmd := netserverCmd()
	if err := cmd.ParseFlags([]string{"-p", "5", "--max-tests=3", "--max-memory", "1GiB", "--stall-timeout", "1m"}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(limitArgs(cmd), " "), "--max-tests=3 --max-memory=1GiB --stall-timeout=1m0s"; got != want {
		t.Errorf("passed on %q, want %q", got, want)
	}
	state := t.TempDir()
	for _, args := range [][]string{{"--max-tests", "0"}, {"--max-memory", "1MiB"}, {"--start-timeout", "-1s"}, {"--max-idle", "x"}} {
		if out, code := run(t, state, append([]string{"netserver", "-D", "-p", "1"}, args...)...); code != 2 {
			t.Errorf("netserver %v: exit %d, want 2: %s", args, code, out)
		}
	}
}
