package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/rundir"
)

func TestSummaryNamesSkipsWithReasons(t *testing.T) {
	events := `{"Action":"run","Package":"m/vnet/internal/x","Test":"TestA"}
{"Action":"output","Package":"m/vnet/internal/x","Test":"TestA","Output":"    a_test.go:3: hello\n"}
{"Action":"output","Package":"m/vnet/internal/x","Test":"TestA","Output":"    a_test.go:4: needs chromium: not installed\n"}
{"Action":"skip","Package":"m/vnet/internal/x","Test":"TestA"}
{"Action":"run","Package":"m/vnet/internal/x","Test":"TestB"}
{"Action":"skip","Package":"m/vnet/internal/x","Test":"TestB"}
{"Action":"run","Package":"m/vnet/internal/x","Test":"TestC"}
{"Action":"output","Package":"m/vnet/internal/x","Test":"TestC","Output":"    c_test.go:9: fine\n"}
{"Action":"pass","Package":"m/vnet/internal/x","Test":"TestC"}
`
	var out bytes.Buffer
	l := newLog(&out, time.Now())
	l.read(strings.NewReader(events))
	l.summary()
	got := out.String()
	for _, want := range []string{
		"2 tests skipped:",
		"internal/x TestA: needs chromium: not installed",
		"internal/x TestB: (no reason given)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "TestC") {
		t.Errorf("summary names a test that passed:\n%s", got)
	}
}

func TestSummaryEndsWithFailuresAndTheirLastLines(t *testing.T) {
	events := `{"Action":"start","Package":"m/vnet/internal/x"}
{"Action":"run","Package":"m/vnet/internal/x","Test":"TestA"}
{"Action":"output","Package":"m/vnet/internal/x","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"run","Package":"m/vnet/internal/x","Test":"TestA/sub"}
{"Action":"output","Package":"m/vnet/internal/x","Test":"TestA/sub","Output":"    a_test.go:7: counters 0 and 12\n"}
{"Action":"output","Package":"m/vnet/internal/x","Test":"TestA/sub","Output":"    --- FAIL: TestA/sub (0.00s)\n"}
{"Action":"fail","Package":"m/vnet/internal/x","Test":"TestA/sub"}
{"Action":"fail","Package":"m/vnet/internal/x","Test":"TestA"}
{"Action":"run","Package":"m/vnet/internal/x","Test":"TestB"}
{"Action":"pass","Package":"m/vnet/internal/x","Test":"TestB"}
{"Action":"output","Package":"m/vnet/internal/x","Output":"FAIL\n"}
{"Action":"fail","Package":"m/vnet/internal/x"}
{"Action":"start","Package":"m/vnet/internal/y"}
{"Action":"output","Package":"m/vnet/internal/y","Output":"panic: at init\n"}
{"Action":"fail","Package":"m/vnet/internal/y"}
`
	var out bytes.Buffer
	l := newLog(&out, time.Now())
	l.read(strings.NewReader(events))
	l.summary()
	got := out.String()
	summary := got[strings.Index(got, "[testlog] 2 failed:"):]
	for _, want := range []string{
		"[testlog]   internal/x TestA/sub\n",
		"|     a_test.go:7: counters 0 and 12",
		"[testlog]   internal/y\n",
		"| panic: at init",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("failure summary lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"internal/x TestA\n", "internal/x\n", "TestB", "--- FAIL"} {
		if strings.Contains(summary, unwanted) {
			t.Errorf("failure summary repeats %q:\n%s", unwanted, summary)
		}
	}
}

// A test whose cleanup prints a long log after its t.Error: the summary
// still shows the error, which the tail alone would have lost.
func TestSummaryShowsTheErrorBeforeALongCleanupLog(t *testing.T) {
	var b strings.Builder
	out := func(s string) {
		line, _ := json.Marshal(map[string]string{"Action": "output", "Package": "m/vnet/internal/c", "Test": "TestC", "Output": s})
		b.Write(line)
		b.WriteString("\n")
	}
	b.WriteString(`{"Action":"run","Package":"m/vnet/internal/c","Test":"TestC"}` + "\n")
	out("    c_test.go:10: stopped member 1\n")
	out("    c_test.go:20: apply without quorum took 31s to fail\n")
	out("    c_test.go:40: agent of hv1:\n")
	for i := 0; i < 3*tailLines; i++ {
		out(fmt.Sprintf("        agent line %d\n", i))
	}
	b.WriteString(`{"Action":"fail","Package":"m/vnet/internal/c","Test":"TestC"}` + "\n")
	var got bytes.Buffer
	l := newLog(&got, time.Now())
	l.read(strings.NewReader(b.String()))
	l.summary()
	summary := got.String()[strings.Index(got.String(), "[testlog] 1 failed:"):]
	for _, want := range []string{
		"|     c_test.go:20: apply without quorum took 31s to fail",
		"|     c_test.go:40: agent of hv1:",
		fmt.Sprintf("agent line %d", 3*tailLines-1),
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("failure summary lacks %q:\n%s", want, summary)
		}
	}
	if strings.Contains(summary, "agent line 0\n") {
		t.Errorf("failure summary repeats more than the tail:\n%s", summary)
	}
}

// What a run left is what the machine holds after it and not before,
// a registry entry with the directory it names; a summary names each.
func TestSummaryNamesWhatTheRunLeft(t *testing.T) {
	dir := t.TempDir()
	run := []place{{glob: filepath.Join(dir, "ns", "*"), what: "namespace"}, {glob: filepath.Join(dir, "reg", "*"), what: "store registry entry"},
		{glob: filepath.Join(dir, "cg", "*"), what: "cgroup", dirs: true}}
	for _, d := range []string{"ns/old", "reg", "cg/old"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	before := machineState(run)
	for _, d := range []string{"ns/new", "cg/new"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{"reg/0123456789abcdef": "/tmp/TestX/001\n", "cg/cgroup.procs": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	l := newLog(&out, time.Now())
	l.left = leftBehind(before, machineState(run))
	l.summary()
	got := out.String()
	for _, want := range []string{
		"[testlog] 3 left behind, which fails the run:",
		"cgroup " + filepath.Join(dir, "cg", "new"),
		"namespace " + filepath.Join(dir, "ns", "new"),
		"store registry entry " + filepath.Join(dir, "reg", "0123456789abcdef") + " (/tmp/TestX/001)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old") || strings.Contains(got, "cgroup.procs") {
		t.Errorf("summary names what was there before, or a cgroup's file:\n%s", got)
	}

	out.Reset()
	l = newLog(&out, time.Now())
	l.left = leftBehind(before, before)
	l.summary()
	if !strings.Contains(out.String(), "nothing left behind") {
		t.Errorf("a run that left nothing does not say so:\n%s", out.String())
	}
}

// A leftover fails the run as a failed test does; go test's own failure
// keeps its status.
func TestExitCode(t *testing.T) {
	goFailed := exec.Command("sh", "-c", "exit 3").Run()
	var ee *exec.ExitError
	if !errors.As(goFailed, &ee) {
		t.Fatalf("sh: %v", goFailed)
	}
	for _, c := range []struct {
		name   string
		ee     *exec.ExitError
		failed bool
		left   []string
		want   int
	}{
		{"all passed, nothing left", nil, false, nil, 0},
		{"all passed, a namespace left", nil, false, []string{"namespace /run/netns/x"}, 1},
		{"a test failed", nil, true, nil, 1},
		{"go test failed", ee, true, []string{"namespace /run/netns/x"}, 3},
	} {
		l := newLog(io.Discard, time.Now())
		l.failed, l.left = c.failed, c.left
		if got := l.exitCode(c.ee); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
}

// testlog itself, run on a go test whose every test passes but which
// leaves an entry in the store registry: it exits 1 and its summary names
// the entry.
func TestALeftoverFailsTheRun(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	if err := os.MkdirAll(filepath.Join(runDir, "stores"), 0o755); err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(runDir, "stores", "0123456789abcdef")
	fakeGo := filepath.Join(dir, "go")
	script := `#!/bin/sh
echo '{"Action":"start","Package":"m/vnet/internal/x"}'
echo '{"Action":"run","Package":"m/vnet/internal/x","Test":"TestLeaky"}'
echo '{"Action":"pass","Package":"m/vnet/internal/x","Test":"TestLeaky"}'
echo '{"Action":"output","Package":"m/vnet/internal/x","Output":"ok  \tm/vnet/internal/x\t0.01s\n"}'
echo '{"Action":"pass","Package":"m/vnet/internal/x"}'
echo /tmp/TestLeaky/001 > ` + entry + "\n"
	if err := os.WriteFile(fakeGo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "./...")
	cmd.Env = append(os.Environ(), asMain+"=1", "GO="+fakeGo, rundir.Env+"="+runDir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("testlog exited with %v, want status 1:\n%s", err, out)
	}
	for _, want := range []string{"ok  \tm/vnet/internal/x", "left behind, which fails the run:", "store registry entry " + entry + " (/tmp/TestLeaky/001)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// asMain makes the test binary run testlog's main instead of the tests.
const asMain = "VNET_TESTLOG_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}
