package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
)

// curlBlocks are docs/api.md's sh blocks that call curl, and every line
// of the file that names curl in a code block.
func curlBlocks(doc string) (blocks []string, curlLines []string) {
	var cur []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case !in && strings.HasPrefix(line, "```"):
			in, cur = true, nil
			continue
		case in && strings.HasPrefix(line, "```"):
			in = false
			if block := strings.Join(cur, "\n"); strings.Contains(block, "curl ") {
				blocks = append(blocks, block)
			}
			continue
		}
		if in {
			cur = append(cur, line)
			if strings.Contains(line, "curl ") {
				curlLines = append(curlLines, line)
			}
		}
	}
	return
}

var wantStatus = regexp.MustCompile(`#\s*([1-5][0-9][0-9])\s*$`)

// expectedStatuses reads the status each curl call of a block says it
// answers (a comment at the end of its command).
func expectedStatuses(t *testing.T, block string) []string {
	t.Helper()
	var out []string
	logical := ""
	for _, line := range strings.Split(block, "\n") {
		if strings.HasSuffix(line, "\\") {
			logical += strings.TrimSuffix(line, "\\")
			continue
		}
		logical += line
		if strings.Contains(logical, "curl ") && !strings.HasPrefix(strings.TrimSpace(logical), "#") {
			m := wantStatus.FindStringSubmatch(logical)
			if m == nil {
				t.Errorf("docs/api.md: a curl call says no status: %s", logical)
			} else {
				out = append(out, m[1])
			}
		}
		logical = ""
	}
	return out
}

func TestDocsCurlBlockSaysEveryStatus(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, lines := curlBlocks(string(doc))
	if len(blocks) != 1 {
		t.Fatalf("docs/api.md has %d blocks of curl calls, want the one the kernel test runs", len(blocks))
	}
	n := 0
	for _, l := range lines {
		if strings.Contains(blocks[0], l) {
			n++
		}
	}
	if n != len(lines) {
		t.Errorf("docs/api.md names curl outside its tested block")
	}
	if got := expectedStatuses(t, blocks[0]); len(got) < 10 {
		t.Errorf("only %d curl calls with a status", len(got))
	}
}

// TestDocsCurlExamples runs docs/api.md's curl block as written, by bash
// from the top of the source tree, against a real vnet server, and checks
// that each call answers the status its comment says. The block's
// infrastructure, demo, is given a name of this run's own (ownName), so
// that the test never meets one of the machine's.
func TestDocsCurlExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs vnet server and applies the demo; runs without -short")
	}
	nstest.RequireRoot(t)
	for _, tool := range []string{"curl", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: needs %s", tool)
		}
	}
	root := repoRoot(t)
	want := expectedStatuses(t, curlBlock(t, root))
	infra := nstest.Infra("demo")
	block := ownName(t, root, curlBlock(t, root), infra)

	bin := vnetBinary(t)
	state := t.TempDir()
	addr := freeAddr(t)
	srv := exec.Command(bin, "--state-dir", state, "server", "--no-etcd", "--listen", addr, "--sample-interval", "500ms")
	for _, kv := range os.Environ() { // this machine's server, whatever the caller's etcd
		if !strings.HasPrefix(kv, "VNET_ETCD") {
			srv.Env = append(srv.Env, kv)
		}
	}
	logs, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var serverLog bytes.Buffer
	logged := make(chan struct{}) // closed once the log is read to its end
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(bin, "--state-dir", state, "destroy", infra).CombinedOutput(); err != nil && !strings.Contains(string(out), "no such infrastructure") {
			t.Errorf("destroy %s: %v: %s", infra, err, out)
		}
		_ = srv.Process.Signal(syscall.SIGTERM)
		<-logged
		_ = srv.Wait()
		nstest.AssertGone(t, infra)
		if t.Failed() {
			t.Logf("server log:\n%s", serverLog.String())
		}
	})
	ready := make(chan bool, 1)
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			serverLog.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "serving the vnet API") {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("vnet server ended before serving")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("vnet server did not serve within 30 s")
	}

	// Each call's status goes to stderr, so that what the examples pipe
	// (the metrics into grep) is as written.
	script := "curl() { command curl -w '%{stderr}HTTP %{http_code}\\n' \"$@\"; }\nset -e\n" + block + "\n"
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VNET_STATE_DIR="+state, "VNET_SERVER=http://"+addr)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var got []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if code, ok := strings.CutPrefix(line, "HTTP "); ok {
			got = append(got, code)
		}
	}
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the examples: %v\nstatuses %v\nwanted   %v\nstdout:\n%s\nstderr:\n%s", err, got, want, stdout.String(), stderr.String())
	}
	// The netperf example measured something.
	resp, err := http.Get("http://" + addr + "/api/v1/netperf/1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var run NetperfRun
	if err := json.NewDecoder(resp.Body).Decode(&run); err != nil || run.State != "done" || run.Result == nil || run.Result.Throughput <= 0 {
		t.Errorf("the example's netperf run: %+v %v", run, err)
	}
}

// curlBlock is docs/api.md's one block of curl calls.
func curlBlock(t *testing.T, root string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, _ := curlBlocks(string(doc))
	if len(blocks) != 1 {
		t.Fatalf("docs/api.md has %d blocks of curl calls", len(blocks))
	}
	return blocks[0]
}

// demoWord is the block's infrastructure wherever it names it.
var demoWord = regexp.MustCompile(`\bdemo\b`)

// ownName is the curl block with its infrastructure, demo, named infra:
// in the URLs, in the spec it sends (a copy of examples/demo.yaml under
// that name, as the server takes only a spec named as its URL) and in the
// spec with a mistake.
func ownName(t *testing.T, root, block, infra string) string {
	t.Helper()
	const example = "@examples/demo.yaml"
	if !strings.Contains(block, example) {
		t.Fatalf("docs/api.md's curl block sends no %s", example)
	}
	src, err := os.ReadFile(filepath.Join(root, "examples", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`(?m)^name: demo$`)
	if !named.Match(src) {
		t.Fatal("examples/demo.yaml is not named demo")
	}
	copied := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(copied, named.ReplaceAll(src, []byte("name: "+infra)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := demoWord.ReplaceAllLiteralString(block, infra)
	return strings.ReplaceAll(out, "@examples/"+infra+".yaml", "@"+copied)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The block run under a name of its own names demo nowhere, and sends a
// spec of that name.
func TestDocsCurlBlockTakesAName(t *testing.T) {
	root := repoRoot(t)
	block := ownName(t, root, curlBlock(t, root), "own-1")
	if demoWord.MatchString(block) {
		t.Errorf("the block still names demo:\n%s", block)
	}
	m := regexp.MustCompile(`--data-binary @(\S+)`).FindStringSubmatch(block)
	if m == nil {
		t.Fatalf("the block sends no file:\n%s", block)
	}
	if src, err := os.ReadFile(m[1]); err != nil || !strings.Contains(string(src), "\nname: own-1\n") {
		t.Errorf("the block sends %s, not a spec named own-1: %v", m[1], err)
	}
	if !strings.Contains(block, "/infras/own-1/status") || !strings.Contains(block, "infra=own-1") {
		t.Errorf("the block's URLs do not name own-1:\n%s", block)
	}
}
