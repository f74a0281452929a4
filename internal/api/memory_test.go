package api

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// memoryHelperEnv makes TestMemoryHelperServer serve, for
// TestManyLargePutsStayBounded to measure in a process of its own.
const memoryHelperEnv = "VNET_API_MEMORY_HELPER"

// TestMemoryHelperServer is the server TestManyLargePutsStayBounded
// measures: it serves until its standard input closes.
func TestMemoryHelperServer(t *testing.T) {
	if os.Getenv(memoryHelperEnv) == "" {
		t.Skip("the server of TestManyLargePutsStayBounded")
	}
	// The fake back end decodes every stored spec at each sample, which
	// a real one does once: no samples here.
	s, _ := newTestServer(t, func(c *Config) { c.SampleInterval = time.Hour })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		buf := make([]byte, 1)
		os.Stdin.Read(buf)
		cancel()
	}()
	s.Serve(ctx, ln)
}

// peakRSS is the most memory a process has held (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// What 100 authenticated PUTs of 3 MB at once make the server hold is
// bounded (the budgets of budgets.go): the server runs in a process of its
// own, whose peak resident memory is read after each burst. Specs that are
// mostly comments cost little to decode, so their burst measures what
// the bodies hold (650 MB before the budgets); real specs of the same
// size, what decoding holds (one decode is some 140 MB; 100 of them peaked
// at 1 GB before).
func TestManyLargePutsStayBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 100 large specs")
	}
	addr, pid := startMemoryHelper(t)
	real := manyNetworks(14500)
	small := strings.Replace(smallSpec, "name: t1", "name: big", 1)
	padded := small + padding(len(real)-len(small))
	if len(padded) != len(real) {
		t.Fatalf("the padded spec is %d bytes, the real one %d", len(padded), len(real))
	}
	t.Logf("specs of %d bytes; idle: peak RSS %d MB", len(real), peakRSS(t, pid)>>20)
	for _, burst := range []struct {
		what  string
		body  string
		n     int
		bound int64
	}{
		{"mostly comments", padded, 100, 160 << 20},
		{"real specs", real, 6, 320 << 20},
	} {
		start := time.Now()
		codes := putMany(t, addr, burst.body, burst.n)
		peak := peakRSS(t, pid)
		t.Logf("%d PUTs of %s in %.1fs: peak RSS %d MB; statuses %v", burst.n, burst.what, time.Since(start).Seconds(), peak>>20, codes)
		if codes[http.StatusOK] == 0 {
			t.Errorf("%s: no PUT got through", burst.what)
		}
		if peak > burst.bound {
			t.Errorf("%s: the server peaked at %d MB, over the bound of %d MB", burst.what, peak>>20, burst.bound>>20)
		}
	}
}

// startMemoryHelper starts TestMemoryHelperServer in a process of its own
// and returns its address and pid; it ends with the test.
func startMemoryHelper(t *testing.T) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryHelperServer$")
	cmd.Env = append(os.Environ(), memoryHelperEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatal("the helper server did not start")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return addr, cmd.Process.Pid
}

// putMany PUTs body n times at once and counts the answers by status.
func putMany(t *testing.T, addr, body string, n int) map[int]int {
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxConnsPerHost: n, MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _ := http.NewRequest("PUT", "http://"+addr+"/api/v1/infras/big", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/yaml")
			r.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := client.Do(r)
			if err != nil {
				t.Errorf("PUT %d: %v", i, err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return codes
}
