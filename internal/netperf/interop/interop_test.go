package interop

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The peers, built once per run: vnet, and netperf's netperf and
// netserver from their source, as configured by default and with paced
// operation (--enable-intervals, which netperf's default build leaves
// out).
var (
	vnetBin, realNetperf, realNetserver string
	pacedNetperf, pacedNetserver        string
	skipWhy                             string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vnet-interop")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		vnetBin = filepath.Join(dir, "vnet")
		if out, err := exec.Command("go", "build", "-o", vnetBin, "../../../cmd/vnet").CombinedOutput(); err != nil {
			panic(string(out))
		}
		script, err := buildScript()
		if err != nil {
			skipWhy = err.Error()
			return m.Run()
		}
		out, err := exec.Command(script, filepath.Join(dir, "netperf")).CombinedOutput()
		if err != nil {
			panic(fmt.Sprintf("build netperf: %v\n%s", err, out))
		}
		realNetperf, realNetserver = filepath.Join(dir, "netperf", "netperf"), filepath.Join(dir, "netperf", "netserver")
		// The paced build: the same script, its compiler told to define
		// WANT_INTERVALS (-fcommon: netperf 2.7.1's paced code defines a
		// global in a header, which GCC 10 and later refuse to link twice).
		build := exec.Command(script, filepath.Join(dir, "paced"))
		build.Env = append(os.Environ(), "CFLAGS=-O2 -fcommon -DWANT_INTERVALS")
		if out, err := build.CombinedOutput(); err != nil {
			panic(fmt.Sprintf("build netperf with intervals: %v\n%s", err, out))
		}
		pacedNetperf, pacedNetserver = filepath.Join(dir, "paced", "netperf"), filepath.Join(dir, "paced", "netserver")
		return m.Run()
	}()
	os.Exit(code)
}

// buildScript finds ../shared/peers/build-netperf.sh beside the
// repository (VNET_SHARED names another shared directory).
func buildScript() (string, error) {
	shared := os.Getenv("VNET_SHARED")
	if shared == "" {
		root, err := filepath.Abs("../../..")
		if err != nil {
			return "", err
		}
		shared = filepath.Join(filepath.Dir(root), "shared")
	}
	script := filepath.Join(shared, "peers", "build-netperf.sh")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("SKIPPED: no %s (the real netperf's source and build script; set VNET_SHARED to the shared directory)", script)
	}
	return script, nil
}

func needPeers(t *testing.T) {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
}

// freePort is a TCP port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// serve starts a netserver in the foreground for the test: "vnet" or
// "netperf" (netperf's own). A port free when picked can be taken before
// the server binds it (another package's test, or an ephemeral port of a
// connection), so a server that exits before it listens is started again
// on another port.
func serve(t *testing.T, kind string) string {
	t.Helper()
	const attempts = 5
	var last string
	for i := 0; i < attempts; i++ {
		port, why := tryServe(t, kind)
		if why == "" {
			return port
		}
		last = why
	}
	t.Fatalf("%s netserver: %d attempts failed; the last: %s", kind, attempts, last)
	return ""
}

// tryServe starts one netserver on a free port and waits until it
// listens. It returns why not if the server exited first; it fails the
// test if the server neither listens nor exits within 10 s.
func tryServe(t *testing.T, kind string) (port, whyNot string) {
	t.Helper()
	port = freePort(t)
	var cmd *exec.Cmd
	switch kind {
	case "vnet":
		cmd = exec.Command(vnetBin, "netserver", "-D", "-p", port)
	case "paced":
		cmd = exec.Command(pacedNetserver, "-D", "-p", port)
	default:
		cmd = exec.Command(realNetserver, "-D", "-p", port)
	}
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = os.Stderr, io.MultiWriter(os.Stderr, &stderr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case err := <-exited:
			exited <- err // for stop, should it run
			return "", fmt.Sprintf("exited before listening on %s (%v): %s", port, err, strings.TrimSpace(stderr.String()))
		default:
		}
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			t.Cleanup(stop)
			return port, ""
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("%s netserver never listened on %s", kind, port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// client is the command of a netperf client: "vnet", "netperf" or
// "paced" (netperf with intervals).
func client(kind string, args ...string) *exec.Cmd {
	switch kind {
	case "vnet":
		return exec.Command(vnetBin, append([]string{"netperf"}, args...)...)
	case "paced":
		return exec.Command(pacedNetperf, args...)
	}
	return exec.Command(realNetperf, args...)
}

// runClient runs a client to its end, within a minute, and returns its
// output and standard error apart.
func runClient(t *testing.T, kind string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := client(kind, args...)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s%s", kind, args, err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// keyvals reads netperf's -k output.
func keyvals(out string) map[string]string {
	kv := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = v
		}
	}
	return kv
}

func num(t *testing.T, kv map[string]string, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(kv[key], 64)
	if err != nil {
		t.Errorf("%s=%q: not a number", key, kv[key])
	}
	return v
}

const selection = "THROUGHPUT,THROUGHPUT_UNITS,ELAPSED_TIME,PROTOCOL,DIRECTION,LOCAL_BYTES_SENT,LOCAL_BYTES_RECVD," +
	"REMOTE_BYTES_SENT,REMOTE_BYTES_RECVD,LOCAL_CPU_UTIL,REMOTE_CPU_UTIL,LOCAL_SD,REMOTE_SD,TRANSACTION_RATE,REQUEST_SIZE," +
	"RESPONSE_SIZE,REMOTE_SOCKET_TOS,LOCAL_SOCKET_TOS,REMOTE_CPU_COUNT"

// cell is one test of the matrix.
type cell struct {
	name      string // as -t takes it
	testArgs  []string
	proto     string // PROTOCOL
	direction string // DIRECTION
	rr        bool
}

var cells = []cell{
	{"TCP_STREAM", nil, "TCP", "Send", false},
	{"TCP_MAERTS", nil, "TCP", "Receive", false},
	{"UDP_STREAM", []string{"-m", "1024"}, "UDP", "Send", false},
	{"TCP_RR", nil, "TCP", "Send|Recv", true},
	{"TCP_CRR", nil, "TCP", "Connect|Send|Recv", true},
	{"UDP_RR", nil, "UDP", "Send|Recv", true},
	{"OMNI", []string{"-d", "send"}, "TCP", "Send", false},
	{"OMNI", []string{"-d", "recv"}, "TCP", "Receive", false},
	{"OMNI", []string{"-d", "rr", "-r", "32,64"}, "TCP", "Send|Recv", true},
	{"OMNI", []string{"-d", "recv", "-T", "udp", "-m", ",1024"}, "UDP", "Receive", false},
}

// Every test, both ways, over IPv4 and IPv6, with CPU on both ends and
// the TOS on both: the protocol works and what the client prints reads
// as netperf's. Rates are not judged, only their presence.
func TestMatrix(t *testing.T) {
	needPeers(t)
	for _, mix := range []struct{ client, server string }{{"netperf", "vnet"}, {"vnet", "netperf"}} {
		port := serve(t, mix.server)
		for _, fam := range []struct{ flag, host string }{{"-4", "127.0.0.1"}, {"-6", "::1"}} {
			for _, c := range cells {
				name := fmt.Sprintf("%s→%s/%s/%s%s", mix.client, mix.server, fam.flag[1:], c.name, strings.Join(c.testArgs, ""))
				t.Run(name, func(t *testing.T) {
					args := []string{fam.flag, "-H", fam.host, "-p", port, "-t", c.name, "-l", "1", "-c", "-C", "-P", "0", "-Y", "CS1,AF11", "--"}
					args = append(append(args, c.testArgs...), "-k", selection)
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					cmd := client(mix.client, args...)
					cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
					}
					checkCell(t, c, keyvals(string(out)), mix.server)
				})
			}
		}
	}
}

func checkCell(t *testing.T, c cell, kv map[string]string, server string) {
	t.Helper()
	if kv["PROTOCOL"] != c.proto || kv["DIRECTION"] != c.direction {
		t.Errorf("PROTOCOL=%s DIRECTION=%s, want %s %s", kv["PROTOCOL"], kv["DIRECTION"], c.proto, c.direction)
	}
	if num(t, kv, "THROUGHPUT") <= 0 || num(t, kv, "ELAPSED_TIME") <= 0 {
		t.Errorf("no throughput or time: %v", kv)
	}
	wantUnits := "10^6bits/s"
	if c.rr {
		wantUnits = "Trans/s"
		if num(t, kv, "TRANSACTION_RATE") <= 0 || num(t, kv, "REQUEST_SIZE") < 1 || num(t, kv, "RESPONSE_SIZE") < 1 {
			t.Errorf("request/response figures: %v", kv)
		}
	}
	if kv["THROUGHPUT_UNITS"] != wantUnits {
		t.Errorf("THROUGHPUT_UNITS=%s, want %s", kv["THROUGHPUT_UNITS"], wantUnits)
	}
	// The data moved, as both ends count it.
	switch c.direction {
	case "Send":
		if num(t, kv, "LOCAL_BYTES_SENT") <= 0 || num(t, kv, "REMOTE_BYTES_RECVD") <= 0 {
			t.Errorf("bytes: %v", kv)
		}
	case "Receive":
		if num(t, kv, "LOCAL_BYTES_RECVD") <= 0 || num(t, kv, "REMOTE_BYTES_SENT") <= 0 {
			t.Errorf("bytes: %v", kv)
		}
	}
	// CPU utilization and service demand came across from the netserver.
	for _, k := range []string{"LOCAL_CPU_UTIL", "REMOTE_CPU_UTIL"} {
		u := num(t, kv, k)
		// netperf's netserver ends TCP_CRR by a timer PAD_TIME past the
		// length and takes that time off the elapsed time again, so its
		// utilization of that test exceeds 100%: its figure, passed on.
		tooMuch := u > 100 && !(k == "REMOTE_CPU_UTIL" && server == "netperf" && c.name == "TCP_CRR")
		if u < 0 || tooMuch {
			t.Errorf("%s=%v", k, u)
		}
	}
	for _, k := range []string{"LOCAL_SD", "REMOTE_SD"} {
		if num(t, kv, k) <= 0 {
			t.Errorf("%s=%s", k, kv[k])
		}
	}
	if num(t, kv, "REMOTE_CPU_COUNT") < 1 {
		t.Errorf("REMOTE_CPU_COUNT=%s", kv["REMOTE_CPU_COUNT"])
	}
	if kv["LOCAL_SOCKET_TOS"] != "0x20" || kv["REMOTE_SOCKET_TOS"] != "0x28" {
		t.Errorf("TOS %s %s, want 0x20 0x28", kv["LOCAL_SOCKET_TOS"], kv["REMOTE_SOCKET_TOS"])
	}
}

// vnet netperf's classic table against netperf's netserver has
// netperf's columns, and its JSON says what the netserver was and carries
// what it reported.
func TestVnetAgainstNetserverOutput(t *testing.T) {
	needPeers(t)
	port := serve(t, "netperf")
	out, err := client("vnet", "-H", "127.0.0.1", "-p", port, "-l", "1", "-t", "TCP_RR", "-c", "-C").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	if !strings.HasPrefix(lines[0], "MIGRATED TCP REQUEST/RESPONSE TEST") || !strings.HasPrefix(lines[3], "Send   Recv   Size    Size   Time    Rate") {
		t.Errorf("not netperf's heading:\n%s", out)
	}
	if f := strings.Fields(lines[6]); len(f) != 10 {
		t.Errorf("result line has %d columns, want netperf's 10: %q", len(f), lines[6])
	}
	out, err = client("vnet", "-H", "127.0.0.1", "-p", port, "-l", "1", "-t", "TCP_STREAM", "-C", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []struct {
			Peer   string `json:"peer"`
			Remote struct {
				Bytes int64 `json:"bytes"`
				CPU   *struct {
					Util float64 `json:"util_percent"`
				} `json:"cpu"`
			} `json:"remote"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || len(rep.Results) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
	r := rep.Results[0]
	if r.Peer != "netperf" || r.Remote.Bytes <= 0 || r.Remote.CPU == nil {
		t.Errorf("peer %q, remote %+v", r.Peer, r.Remote)
	}
}

// netperf's own netperf against vnet's netserver: the demo mode's interim
// lines, several iterations of -i on one control connection.
func TestNetperfAgainstVnetNetserver(t *testing.T) {
	needPeers(t)
	port := serve(t, "vnet")
	out, err := client("netperf", "-H", "127.0.0.1", "-p", port, "-l", "1", "-D", "-0.25", "-i", "3,3", "-t", "TCP_STREAM").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := strings.Count(string(out), "Interim result:"); n < 6 {
		t.Errorf("%d interim results in 3 iterations of 1 s every 0.25 s:\n%s", n, out)
	}
}

// flent's tcp_1down, tcp_1up and rrul complete in each mix: vnet as netperf
// against netperf's netserver and against vnet's, and netperf against
// vnet's netserver. Every netperf series of the data file has points and
// a mean, and every TCP series the TCP_INFO flent asks for.
func TestFlent(t *testing.T) {
	needPeers(t)
	flent, err := exec.LookPath("flent")
	if err != nil {
		t.Skip("SKIPPED: flent is not installed (apt-get install flent)")
	}
	for _, mix := range []struct{ client, server string }{{"vnet", "netperf"}, {"netperf", "vnet"}, {"vnet", "vnet"}} {
		port := serve(t, mix.server)
		bin := t.TempDir()
		if mix.client == "vnet" {
			os.WriteFile(filepath.Join(bin, "netperf"), []byte("#!/bin/sh\nexec "+vnetBin+" netperf \"$@\"\n"), 0o755)
		} else {
			os.Symlink(realNetperf, filepath.Join(bin, "netperf"))
		}
		for _, test := range []string{"tcp_1down", "tcp_1up", "rrul"} {
			t.Run(fmt.Sprintf("%s→%s/%s", mix.client, mix.server, test), func(t *testing.T) {
				data := t.TempDir()
				cmd := exec.Command(flent, test, "-H", "127.0.0.1", "--netperf-control-port", port, "-l", "3", "-d", "1", "-D", data, "-f", "summary")
				cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				checkFlentData(t, data)
			})
		}
	}
}

func checkFlentData(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.flent.gz"))
	if len(files) != 1 {
		t.Fatalf("data files: %v", files)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Results  map[string][]*float64 `json:"results"`
		Metadata struct {
			Series map[string]struct {
				Runner string   `json:"RUNNER"`
				Mean   *float64 `json:"MEAN_VALUE"`
				MSS    *int     `json:"TCP_MSS"`
				RTT    *int     `json:"TCPI_RTT"`
			} `json:"SERIES_META"`
		} `json:"metadata"`
	}
	if err := json.NewDecoder(zr).Decode(&d); err != nil {
		t.Fatal(err)
	}
	netperfs := 0
	for name, meta := range d.Metadata.Series {
		if meta.Runner != "NetperfDemoRunner" {
			continue
		}
		netperfs++
		points := 0
		for _, v := range d.Results[name] {
			if v != nil {
				points++
			}
		}
		// 3 s at flent's 0.2 s steps: 15 points; allow for the ends.
		if points < 10 || meta.Mean == nil || *meta.Mean <= 0 {
			t.Errorf("%s: %d points, mean %v", name, points, meta.Mean)
		}
		// A TCP series carries the TCP_INFO lines netperf prints with
		// DUMP_TCP_INFO, which flent sets.
		if meta.MSS != nil && meta.RTT == nil {
			t.Errorf("%s: a TCP series without TCP_INFO metadata (TCPI_RTT)", name)
		}
	}
	if netperfs == 0 {
		t.Errorf("no netperf series in %s", files[0])
	}
}
