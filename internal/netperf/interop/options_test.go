package interop

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/netperf/netperftest"
)

// The options that change how a test runs, each with the real program at
// the other end, both ways where the real program has the option: what
// the client prints is checked, never a rate, only bounds that pacing
// sets.

// mixes are the client and netserver of each direction.
var mixes = []struct{ client, server string }{{"netperf", "vnet"}, {"vnet", "netperf"}}

// -b: a first burst of requests in TCP_RR and UDP_RR (netperf's default
// build has it).
func TestFirstBurst(t *testing.T) {
	needPeers(t)
	for _, mix := range mixes {
		port := serve(t, mix.server)
		for _, test := range []string{"TCP_RR", "UDP_RR"} {
			t.Run(mix.client+"→"+mix.server+"/"+test, func(t *testing.T) {
				out, _ := runClient(t, mix.client, "-H", "127.0.0.1", "-p", port, "-l", "1", "-t", test, "--", "-b", "4",
					"-k", "BURST_SIZE,TRANSACTION_RATE,RT_LATENCY,REMOTE_BYTES_RECVD")
				kv := keyvals(out)
				if kv["BURST_SIZE"] != "4" || num(t, kv, "TRANSACTION_RATE") <= 0 || num(t, kv, "RT_LATENCY") <= 0 || num(t, kv, "REMOTE_BYTES_RECVD") <= 0 {
					t.Errorf("%v", kv)
				}
				out, _ = runClient(t, mix.client, "-H", "127.0.0.1", "-p", port, "-l", "1", "-t", test, "--", "-b", "4")
				if !strings.Contains(strings.SplitN(out, "\n", 2)[0], " : demo : first burst 4") {
					t.Errorf("heading: %q", strings.SplitN(out, "\n", 2)[0])
				}
			})
		}
	}
}

// -C (TCP_CORK on the client's socket) and -F (TCP fast open). netperf
// 2.7.1's own -F fails but in TCP_CRR (it sends with MSG_FASTOPEN on a
// socket it has connected); vnet's opens every TCP test's connection so.
func TestCorkAndFastOpen(t *testing.T) {
	needPeers(t)
	for _, mix := range mixes {
		port := serve(t, mix.server)
		for _, tt := range []struct{ test, opt string }{{"TCP_STREAM", "-C"}, {"TCP_STREAM", "-F"}, {"TCP_RR", "-F"}, {"TCP_CRR", "-F"}} {
			if mix.client == "netperf" && tt.opt == "-F" && tt.test != "TCP_CRR" {
				continue
			}
			t.Run(fmt.Sprintf("%s→%s/%s%s", mix.client, mix.server, tt.test, tt.opt), func(t *testing.T) {
				out, _ := runClient(t, mix.client, "-H", "127.0.0.1", "-p", port, "-l", "1", "-t", tt.test, "--", tt.opt,
					"-k", "THROUGHPUT,LOCAL_CORK,REMOTE_CORK")
				kv := keyvals(out)
				cork := map[string]string{"-C": "1", "-F": "0"}[tt.opt]
				if num(t, kv, "THROUGHPUT") <= 0 || kv["LOCAL_CORK"] != cork || kv["REMOTE_CORK"] != cork {
					t.Errorf("%v", kv)
				}
			})
		}
	}
}

// -G (TCP_MAXSEG) and -q (SO_MAX_PACING_RATE) on the client's data
// socket: the segment size both clients report is the one asked for, less
// TCP's options, and the same for both; a stream paced at 1.25 MB/s for a
// second is received at about that rate: TCP paces without the fq qdisc.
func TestSegmentSizeAndPacingRate(t *testing.T) {
	needPeers(t)
	mss := map[string]string{}
	for _, mix := range mixes {
		port := serve(t, mix.server)
		t.Run(mix.client+"→"+mix.server, func(t *testing.T) {
			out, _ := runClient(t, mix.client, "-H", "127.0.0.1", "-p", port, "-l", "1", "-t", "TCP_STREAM", "--", "-G", "1000",
				"-k", "TRANSPORT_MSS,THROUGHPUT")
			kv := keyvals(out)
			if m := num(t, kv, "TRANSPORT_MSS"); m < 900 || m > 1000 || num(t, kv, "THROUGHPUT") <= 0 {
				t.Errorf("-G 1000: %v", kv)
			}
			mss[mix.client] = kv["TRANSPORT_MSS"]
			// The receiver's rate: the sender's socket buffer drains at
			// the paced rate after the sender's second is up.
			out, _ = runClient(t, mix.client, "-H", "127.0.0.1", "-p", port, "-l", "1", "-f", "m", "-t", "TCP_STREAM", "--", "-q", "1250000",
				"-k", "THROUGHPUT")
			kv = keyvals(out)
			if r := num(t, kv, "THROUGHPUT"); r <= 0 || r > 16 {
				t.Errorf("-q 1250000 (10 Mbit/s): %v", kv)
			}
		})
	}
	if mss["vnet"] != mss["netperf"] {
		t.Errorf("TRANSPORT_MSS with -G 1000: vnet %s, netperf %s", mss["vnet"], mss["netperf"])
	}
}

// Pacing: -w and -b, this end's and (",r") the netserver's. netperf's
// default build has neither, so its client here is the build with them;
// its default netserver paces nothing, and netperf 2.7.1's paced
// netserver fails a paced TCP_MAERTS (its interval timer interrupts its
// own control connection), so vnet's client meets the default one.
// REMOTE_INTERVAL_* print what was asked, as netperf prints them.
func TestPacing(t *testing.T) {
	needPeers(t)
	sel := "-k THROUGHPUT,TRANSACTION_RATE,LOCAL_INTERVAL_USECS,LOCAL_INTERVAL_BURST,REMOTE_INTERVAL_USECS,REMOTE_INTERVAL_BURST,LOCAL_BYTES_RECVD"
	for _, mix := range []struct{ client, server string }{{"paced", "vnet"}, {"vnet", "netperf"}} {
		port := serve(t, mix.server)
		t.Run(mix.client+"→"+mix.server, func(t *testing.T) {
			// Two transactions every 10 ms for a second: at most 200 a
			// second, and a few more for the ends.
			out, _ := runClient(t, mix.client, append([]string{"-H", "127.0.0.1", "-p", port, "-l", "1", "-w", "10", "-b", "2", "-t", "TCP_RR", "--"},
				strings.Fields(sel)...)...)
			kv := keyvals(out)
			if r := num(t, kv, "TRANSACTION_RATE"); r <= 0 || r > 220 || kv["LOCAL_INTERVAL_USECS"] != "10000" || kv["LOCAL_INTERVAL_BURST"] != "2" {
				t.Errorf("paced TCP_RR: %v", kv)
			}
			// The netserver's sends, 1 KiB every 20 ms: at most 50 KiB
			// in a second, and a few more for the ends.
			out, _ = runClient(t, mix.client, append([]string{"-H", "127.0.0.1", "-p", port, "-l", "1", "-w", ",20", "-b", ",1", "-t", "TCP_MAERTS",
				"--", "-m", ",1K"}, strings.Fields(sel)...)...)
			kv = keyvals(out)
			if kv["REMOTE_INTERVAL_USECS"] != "20000" || kv["REMOTE_INTERVAL_BURST"] != "1" {
				t.Errorf("the netserver's pacing: %v", kv)
			}
			if b := num(t, kv, "LOCAL_BYTES_RECVD"); mix.server != "netperf" && (b <= 0 || b > 55*1024) {
				t.Errorf("paced TCP_MAERTS: %v bytes", b)
			}
		})
	}
}

// -W: the buffer rings' widths, asked for and as netperf chooses them,
// and what each netserver reports of its own.
func TestWidths(t *testing.T) {
	needPeers(t)
	widths := "LOCAL_SEND_WIDTH,LOCAL_RECV_WIDTH,REMOTE_SEND_WIDTH,REMOTE_RECV_WIDTH"
	for _, mix := range mixes {
		port := serve(t, mix.server)
		t.Run(mix.client+"→"+mix.server, func(t *testing.T) {
			out, _ := runClient(t, mix.client, "-H", "127.0.0.1", "-p", port, "-l", "1", "-W", "3,5", "-t", "TCP_STREAM", "--", "-k", widths)
			if kv := keyvals(out); kv["LOCAL_SEND_WIDTH"] != "3" || kv["REMOTE_RECV_WIDTH"] != "5" {
				t.Errorf("-W 3,5: %v", kv)
			}
			out, _ = runClient(t, mix.client, "-H", "127.0.0.1", "-p", port, "-l", "1", "-t", "TCP_RR", "--", "-k", widths)
			for k, v := range keyvals(out) {
				if v != "1" {
					t.Errorf("TCP_RR: %s=%s, want netperf's 1", k, v)
				}
			}
		})
	}
	// The client's default stream widths are netperf's: one more buffer
	// than the socket buffer holds, never one.
	port := serve(t, "netperf")
	for _, test := range []string{"TCP_STREAM", "TCP_MAERTS"} {
		real, _ := runClient(t, "netperf", "-H", "127.0.0.1", "-p", port, "-l", "1", "-t", test, "--", "-m", "4K", "-M", "4K", "-s", "64K", "-k", widths)
		ours, _ := runClient(t, "vnet", "-H", "127.0.0.1", "-p", port, "-l", "1", "-t", test, "--", "-m", "4K", "-M", "4K", "-s", "64K", "-k", widths)
		if r, o := keyvals(real), keyvals(ours); r["LOCAL_SEND_WIDTH"] != o["LOCAL_SEND_WIDTH"] && test == "TCP_STREAM" ||
			r["LOCAL_RECV_WIDTH"] != o["LOCAL_RECV_WIDTH"] && test == "TCP_MAERTS" {
			t.Errorf("%s: netperf %v, vnet %v", test, r, o)
		}
	}
}

// -N: no control connection; the data connection goes to a service that
// already listens, as netperf's does, and only this end is measured.
func TestNoControl(t *testing.T) {
	needPeers(t)
	discard, echo, chargen := netperftest.TCP(t, netperftest.Discard), netperftest.TCP(t, netperftest.Echo), netperftest.TCP(t, netperftest.Chargen)
	udpDiscard, udpEcho := netperftest.UDP(t, netperftest.UDPDiscard), netperftest.UDP(t, netperftest.UDPEcho)
	sel := "PROTOCOL,DIRECTION,THROUGHPUT,REMOTE_CPU_UTIL,RSR_SIZE_END,REMOTE_BYTES_RECVD"
	for _, tt := range []struct {
		test string
		port int
	}{{"TCP_STREAM", discard}, {"TCP_MAERTS", chargen}, {"TCP_RR", echo}, {"TCP_CRR", echo}, {"UDP_STREAM", udpDiscard}, {"UDP_RR", udpEcho}} {
		t.Run(tt.test, func(t *testing.T) {
			var got [2]map[string]string
			for i, kind := range []string{"netperf", "vnet"} {
				out, _ := runClient(t, kind, "-N", "-H", "127.0.0.1", "-l", "1", "-t", tt.test, "-C", "--", "-P", ","+strconv.Itoa(tt.port), "-m", "1K", "-k", sel)
				got[i] = keyvals(out)
				if num(t, got[i], "THROUGHPUT") <= 0 {
					t.Errorf("%s: %v", kind, got[i])
				}
				head, _ := runClient(t, kind, "-N", "-H", "127.0.0.1", "-l", "1", "-t", tt.test, "--", "-P", ","+strconv.Itoa(tt.port), "-m", "1K")
				if !strings.Contains(strings.SplitN(head, "\n", 2)[0], fmt.Sprintf("port %d AF_INET : no control : demo", tt.port)) {
					t.Errorf("%s heading: %q", kind, strings.SplitN(head, "\n", 2)[0])
				}
			}
			for _, k := range []string{"PROTOCOL", "DIRECTION", "REMOTE_CPU_UTIL", "RSR_SIZE_END", "REMOTE_BYTES_RECVD"} {
				if got[0][k] != got[1][k] {
					t.Errorf("%s: netperf %q, vnet %q", k, got[0][k], got[1][k])
				}
			}
		})
	}
}

// -d: debug lines on stderr, and the results on stdout as without it.
func TestDebug(t *testing.T) {
	needPeers(t)
	for _, mix := range mixes {
		port := serve(t, mix.server)
		t.Run(mix.client+"→"+mix.server, func(t *testing.T) {
			out, errOut := runClient(t, mix.client, "-d", "-H", "127.0.0.1", "-p", port, "-l", "1", "-P", "0", "-t", "TCP_RR", "--", "-o", "THROUGHPUT,PROTOCOL")
			if mix.client == "vnet" && (!strings.Contains(errOut, "netperf: debug: ") || strings.Contains(out, "debug")) {
				t.Errorf("stdout:\n%s\nstderr:\n%s", out, errOut)
			}
			if !regexp.MustCompile(`(?m)^\s*[0-9.]+,TCP$`).MatchString(out) {
				t.Errorf("the result line is not in stdout:\n%s", out)
			}
		})
	}
}

// DUMP_TCP_INFO: the data connection's TCP_INFO on stderr, the lines
// netperf prints (flent reads them), with the same names.
func TestDumpTCPInfo(t *testing.T) {
	needPeers(t)
	port := serve(t, "netperf")
	names := func(kind string) []string {
		cmd := client(kind, "-H", "127.0.0.1", "-p", port, "-l", "1", "-P", "0", "-t", "TCP_STREAM", "--", "-k", "THROUGHPUT")
		cmd.Env = append(os.Environ(), "DUMP_TCP_INFO=1")
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", kind, err, errOut.String())
		}
		var n []string
		for _, l := range strings.Split(errOut.String(), "\n") {
			if strings.HasPrefix(l, "tcpi") {
				f := strings.Fields(l)
				for i := 0; i+1 < len(f); i += 2 {
					if _, err := strconv.Atoi(f[i+1]); err != nil {
						t.Errorf("%s: %s %q is not a number", kind, f[i], f[i+1])
					}
					n = append(n, f[i])
				}
			}
		}
		return n
	}
	real, ours := names("netperf"), names("vnet")
	if len(real) == 0 || strings.Join(real, " ") != strings.Join(ours, " ") {
		t.Errorf("netperf prints %v, vnet %v", real, ours)
	}
}

// -v 2: netperf's blocks under the classic tables, heading for heading,
// against the same netserver.
func TestVerboseTwo(t *testing.T) {
	needPeers(t)
	port := serve(t, "netperf")
	digits := regexp.MustCompile(`[-0-9.]+`)
	for _, test := range []string{"TCP_STREAM", "TCP_MAERTS", "TCP_RR", "TCP_CRR", "UDP_STREAM", "UDP_RR"} {
		t.Run(test, func(t *testing.T) {
			shape := func(kind string) []string {
				out, _ := runClient(t, kind, "-v", "2", "-H", "127.0.0.1", "-p", port, "-l", "1", "-t", test, "--", "-m", "1K")
				var lines []string
				for _, l := range strings.Split(out, "\n")[1:] { // the first line names addresses
					if strings.HasPrefix(l, "receive interface") || strings.HasPrefix(l, "receiving IP stack") || strings.HasPrefix(l, "cpu efficiency") {
						continue // vnet's lines under netperf's
					}
					lines = append(lines, strings.Join(strings.Fields(digits.ReplaceAllString(l, "#")), " "))
				}
				return lines
			}
			if real, ours := shape("netperf"), shape("vnet"); strings.Join(real, "\n") != strings.Join(ours, "\n") {
				t.Errorf("netperf:\n%s\nvnet:\n%s", strings.Join(real, "\n"), strings.Join(ours, "\n"))
			}
		})
	}
}

// -o ?: the same list of selectors, and netperf's exit status.
func TestSelectorList(t *testing.T) {
	needPeers(t)
	var outs [2]string
	for i, kind := range []string{"netperf", "vnet"} {
		cmd := client(kind, "--", "-o", "?")
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("%s -o ?: %v, want exit status 1", kind, err)
		}
		outs[i] = string(out)
	}
	if outs[0] != outs[1] {
		t.Errorf("netperf lists\n%s\nvnet\n%s", outs[0], outs[1])
	}
}

// The CPU's time by kind: what the netserver measured, from either
// netserver, and this end's; the kinds together are at most the whole.
func TestCPUBreakdown(t *testing.T) {
	needPeers(t)
	kinds := []string{"USER", "SYSTEM", "IRQ", "SWINTR"}
	var sel []string
	for _, side := range []string{"LOCAL", "REMOTE"} {
		sel = append(sel, side+"_CPU_UTIL")
		for _, k := range kinds {
			sel = append(sel, side+"_CPU_PERCENT_"+k)
		}
	}
	for _, mix := range mixes {
		port := serve(t, mix.server)
		t.Run(mix.client+"→"+mix.server, func(t *testing.T) {
			out, _ := runClient(t, mix.client, "-H", "127.0.0.1", "-p", port, "-l", "1", "-c", "-C", "-t", "TCP_STREAM", "--", "-k", strings.Join(sel, ","))
			kv := keyvals(out)
			for _, side := range []string{"LOCAL", "REMOTE"} {
				sum := 0.0
				for _, k := range kinds {
					v := num(t, kv, side+"_CPU_PERCENT_"+k)
					if v < 0 {
						t.Errorf("%s_CPU_PERCENT_%s=%v", side, k, v)
					}
					sum += v
				}
				if util := num(t, kv, side+"_CPU_UTIL"); sum <= 0 || sum > util+0.5 {
					t.Errorf("%s: kinds sum to %.2f, utilization %.2f: %v", side, sum, util, kv)
				}
			}
		})
	}
}
