// Command testlog runs `go test -json` with the arguments it is given and
// prints what go test -v would, as it happens, so that a long run never
// goes quiet: when nothing has been printed for a while it says which
// tests are still running and for how long. The lines go test prints
// (--- PASS, ok, FAIL, the tests' logs) pass through unchanged, and it
// exits as go test did. At the end it says how long the run took, the
// longest it went without printing, and which tests skipped and why, so
// that a suite that passed because a tool was missing says so. Last come
// the tests that failed, each with the final lines it printed: a CI log
// is often read from its tail only, and the tail must name the failure.
// Before them it names what the run left on the machine (namespaces,
// cgroups, entries of the store registry and of /run/vnet) that was not
// there when it began; anything left fails the run, as a failed test does.
//
//	go run ./internal/nstest/testlog -count=1 -p 1 ./...
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// quiet is how long testlog lets the output rest before it speaks.
const quiet = 20 * time.Second

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

type log struct {
	mu       sync.Mutex
	out      io.Writer
	start    time.Time
	last     time.Time     // when a line was last printed
	longest  time.Duration // the longest rest between two lines
	running  map[string]time.Time
	packages int
	failed   bool
	said     map[string]string   // a running test's last log entry: a skip's reason
	skipped  []string            // "pkg Test: reason", in the order they skipped
	recent   map[string][]string // a running test's last lines of output
	entries  map[string][]string // a running test's last log entries' first lines
	failures []failure           // in the order they failed
	left     []string            // what the run left on the machine
}

// failure is a failed test (or a package that failed outside its tests)
// with the first lines of its last log entries and the last lines it
// printed. The entries are what name the failure when a test's cleanup
// prints a long log after its t.Error: the tail alone would show only
// the end of that log.
type failure struct {
	name    string
	entries []string
	tail    []string
}

// tailLines is how many of a failed test's last lines the summary repeats.
const tailLines = 12

// entryLines is how many of a failed test's last log entries the summary
// repeats (their first lines, each cut to entryWidth bytes).
const (
	entryLines = 16
	entryWidth = 240
)

func main() {
	args := append([]string{"test", "-json"}, os.Args[1:]...)
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.Command(goCmd, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testlog:", err)
		os.Exit(2)
	}
	// What the machine holds is taken before go test starts: a package
	// that leaves something at once, before this process is scheduled
	// again, would otherwise count as there before the run.
	before := machineState(places())
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testlog:", err)
		os.Exit(2)
	}
	now := time.Now()
	l := newLog(os.Stdout, now)
	done := make(chan struct{})
	go l.heartbeat(done)
	l.read(stdout)
	close(done)
	err = cmd.Wait()
	l.left = leftBehind(before, machineState(places()))
	l.summary()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, "testlog:", err)
		os.Exit(2)
	}
	os.Exit(l.exitCode(ee))
}

// exitCode is go test's exit status when it failed (ee), else 1 when a
// test failed or the run left something behind, else 0. A leftover fails
// the run although every test passed: after the suite nothing is left,
// so one is a test's cleanup to mend, and a run that only reported it
// would let the next leftover land unseen.
func (l *log) exitCode(ee *exec.ExitError) int {
	switch {
	case ee != nil && ee.ExitCode() != 0:
		return ee.ExitCode()
	case l.failed, len(l.left) > 0:
		return 1
	}
	return 0
}

func newLog(out io.Writer, now time.Time) *log {
	return &log{
		out: out, start: now, last: now,
		running: map[string]time.Time{},
		said:    map[string]string{},
		recent:  map[string][]string{},
		entries: map[string][]string{},
	}
}

func (l *log) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			l.print(sc.Text() + "\n") // not an event: go test's own words
			continue
		}
		l.handle(e)
	}
}

func (l *log) handle(e event) {
	key := e.Package + " " + e.Test
	l.mu.Lock()
	switch e.Action {
	case "start":
		l.packages++
		l.running[e.Package] = time.Now()
	case "run":
		l.running[key] = time.Now()
	case "output":
		if e.Test != "" && logEntry.MatchString(e.Output) {
			l.said[key] = strings.TrimSpace(e.Output)
		}
		l.remember(key, e.Output)
	case "pass", "fail", "skip":
		if e.Test == "" {
			delete(l.running, e.Package)
		} else {
			delete(l.running, key)
		}
		if e.Action == "fail" {
			l.failed = true
			l.failures = append(l.failures, failure{
				name:    strings.TrimSpace(short(e.Package) + " " + e.Test),
				entries: l.entries[key],
				tail:    l.recent[key],
			})
		}
		if e.Action == "skip" && e.Test != "" {
			l.skipped = append(l.skipped, fmt.Sprintf("%s %s: %s", short(e.Package), e.Test, reason(l.said[key])))
		}
		delete(l.said, key)
		delete(l.recent, key)
		delete(l.entries, key)
	}
	l.mu.Unlock()
	if e.Output != "" && !noise(e.Output) {
		l.print(e.Output)
	}
}

// remember keeps the last tailLines lines a test (or a package, for a
// key without a test) printed, for the summary should it fail.
func (l *log) remember(key, output string) {
	line := strings.TrimRight(output, "\n")
	if line == "" || noise(output) || strings.HasPrefix(line, "=== RUN ") {
		return
	}
	l.recent[key] = keepLast(append(l.recent[key], line), tailLines)
	if logEntry.MatchString(line) {
		if len(line) > entryWidth {
			line = line[:entryWidth] + " …"
		}
		l.entries[key] = keepLast(append(l.entries[key], line), entryLines)
	}
}

// keepLast is the last n of lines.
func keepLast(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

// logEntry is the first line of a t.Log, t.Skip or t.Error: "    file_test.go:12: text".
var logEntry = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

// reason is a skip's message without the file and line it came from.
func reason(entry string) string {
	if entry == "" {
		return "(no reason given)"
	}
	if _, text, ok := strings.Cut(entry, ": "); ok {
		return text
	}
	return entry
}

// noise is what -v prints that says nothing a reader needs.
func noise(line string) bool {
	return strings.HasPrefix(line, "=== PAUSE ") || strings.HasPrefix(line, "=== CONT ") || strings.HasPrefix(line, "=== NAME ")
}

func (l *log) print(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.printLocked(s)
}

func (l *log) printLocked(s string) {
	now := time.Now()
	l.longest = max(l.longest, now.Sub(l.last))
	l.last = now
	fmt.Fprint(l.out, s)
}

func (l *log) heartbeat(done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		l.mu.Lock()
		if time.Since(l.last) >= quiet {
			l.printLocked(fmt.Sprintf("    [testlog %s] still running: %s\n", clock(time.Since(l.start)), l.runningLocked()))
		}
		l.mu.Unlock()
	}
}

// runningLocked names the innermost tests running, with how long each has
// run, or the packages being built and started.
func (l *log) runningLocked() string {
	var names []string
	for k, since := range l.running {
		inner := false
		for other := range l.running {
			if other != k && strings.HasPrefix(other, k+"/") || (!strings.Contains(k, " ") && strings.HasPrefix(other, k+" ")) {
				inner = true
			}
		}
		if !inner {
			names = append(names, fmt.Sprintf("%s (%s)", strings.TrimSpace(short(k)), time.Since(since).Round(time.Second)))
		}
	}
	if len(names) == 0 {
		return "building"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// short drops the module path from a package name.
func short(key string) string {
	if i := strings.Index(key, "/vnet/"); i >= 0 {
		return key[i+len("/vnet/"):]
	}
	return key
}

func (l *log) summary() {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, "[testlog] %d packages in %s; the longest the output rested was %s\n",
		l.packages, clock(time.Since(l.start)), l.longest.Round(100*time.Millisecond))
	if len(l.skipped) == 0 {
		fmt.Fprintln(l.out, "[testlog] no test skipped")
	} else {
		fmt.Fprintf(l.out, "[testlog] %d tests skipped:\n", len(l.skipped))
		for _, s := range l.skipped {
			fmt.Fprintf(l.out, "[testlog]   %s\n", s)
		}
	}
	l.printLeft()
	l.printFailures()
}

// printLeft names what the run left on the machine that was not there
// before it: after the suite nothing is left, so each line is a test's
// cleanup to mend (or, on a machine others use meanwhile, theirs), and
// the run fails.
func (l *log) printLeft() {
	if len(l.left) == 0 {
		fmt.Fprintln(l.out, "[testlog] nothing left behind (namespaces, cgroups, the store registry, /run/vnet)")
		return
	}
	fmt.Fprintf(l.out, "[testlog] %d left behind, which fails the run:\n", len(l.left))
	for _, s := range l.left {
		fmt.Fprintf(l.out, "[testlog]   %s\n", s)
	}
}

// printFailures names every test that failed, with the last lines it
// printed; a parent whose only failure is its subtest's is named alone.
func (l *log) printFailures() {
	if len(l.failures) == 0 {
		return
	}
	var shown []failure
	for _, f := range l.failures {
		if !coveredBy(f.name, l.failures) {
			shown = append(shown, f)
		}
	}
	fmt.Fprintf(l.out, "[testlog] %d failed:\n", len(shown))
	for _, f := range shown {
		fmt.Fprintf(l.out, "[testlog]   %s\n", f.name)
		printed := map[string]bool{}
		if len(f.entries) > 0 {
			fmt.Fprintf(l.out, "[testlog]     its last log entries (first lines):\n")
		}
		for _, line := range f.entries {
			printed[line] = true
			fmt.Fprintf(l.out, "[testlog]     | %s\n", line)
		}
		if len(f.entries) > 0 {
			fmt.Fprintf(l.out, "[testlog]     the last lines it printed:\n")
		}
		for _, line := range f.tail {
			if printed[line] || strings.HasPrefix(strings.TrimSpace(line), "--- FAIL") {
				continue
			}
			fmt.Fprintf(l.out, "[testlog]     | %s\n", line)
		}
	}
}

// coveredBy says whether a failure only repeats another's: a parent test
// failing because its subtest did, or a package failing because a test in
// it did. (A package that failed with no test failing is kept: it did not
// build, or it panicked outside a test.)
func coveredBy(name string, all []failure) bool {
	for _, other := range all {
		if other.name == name {
			continue
		}
		if strings.HasPrefix(other.name, name+"/") || strings.HasPrefix(other.name, name+" ") {
			return true
		}
	}
	return false
}

func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}
