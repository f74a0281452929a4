package teamagent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vnet-project/vnet/internal/killpoint"
)

// One agent process runs per infrastructure that teams uplinks. vnet apply
// starts it (or tells it to reload) and vnet destroy stops it; its pid and
// log live in the state directory.
//
// The pid file is not how an agent is found: a command killed between
// starting an agent and recording it would leave one nobody knows of.
// Agents are found by their command line in /proc (`vnet agent run NAME
// --state-dir DIR`), and the agent itself holds an exclusive lock on its
// pid file for as long as it lives, so that two can never run at once for
// one infrastructure of one state directory, however they were started.

// PIDFile is where an infrastructure's agent records its pid.
func PIDFile(stateDir, infra string) string { return filepath.Join(stateDir, "agent-"+infra+".pid") }

// LogFile is where an infrastructure's agent writes what it does.
func LogFile(stateDir, infra string) string { return filepath.Join(stateDir, "agent-"+infra+".log") }

// defaultStateDir is the state directory of an agent whose command line and
// environment name none.
const defaultStateDir = "/var/lib/vnet"

// ErrRunning says another agent already runs for the infrastructure.
var ErrRunning = errors.New("an agent already runs for this infrastructure")

// Claim makes this process the infrastructure's agent: it locks the pid
// file and writes its pid there. The lock lasts until release or the
// process's end, however it ends.
func Claim(stateDir, infra string) (release func(), err error) {
	f, err := os.OpenFile(PIDFile(stateDir, infra), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("agent pid file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("agent for %s: %w", infra, ErrRunning)
		}
		return nil, fmt.Errorf("lock agent pid file: %w", err)
	}
	killpoint.At("agent holds its lock, pid not yet written")
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("agent pid file: %w", err)
	}
	return func() { f.Close() }, nil
}

// Running returns the pid of the infrastructure's agent if one runs.
func Running(stateDir, infra string) (int, bool) {
	pids := Find(stateDir, infra)
	if len(pids) == 0 {
		return 0, false
	}
	if pid, ok := recordedPID(stateDir, infra); ok && containsPID(pids, pid) {
		return pid, true
	}
	return pids[0], true
}

func recordedPID(stateDir, infra string) (int, bool) {
	b, err := os.ReadFile(PIDFile(stateDir, infra))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

func containsPID(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// Find returns every live agent process of the infrastructure whose state
// directory is stateDir, oldest pid first.
func Find(stateDir, infra string) []int {
	return All(stateDir)[infra]
}

// All returns the live agent processes of stateDir, by infrastructure.
func All(stateDir string) map[string][]int {
	want := absDir(stateDir, "")
	out := map[string][]int{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		infra, dir, ok := agentProcess(pid)
		if ok && dir == want {
			out[infra] = append(out[infra], pid)
		}
	}
	for _, pids := range out {
		sort.Ints(pids)
	}
	return out
}

// agentProcess reads whether pid is a vnet agent, of which infrastructure
// and state directory. A zombie has no command line and is no agent.
func agentProcess(pid int) (infra, stateDir string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return "", "", false
	}
	infra, stateDir, ok = parseAgentArgs(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"))
	if !ok {
		return "", "", false
	}
	if stateDir == "" {
		stateDir = envValue(pid, "VNET_STATE_DIR")
	}
	if stateDir == "" {
		stateDir = defaultStateDir
	}
	cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return infra, absDir(stateDir, cwd), true
}

// parseAgentArgs recognizes `vnet [flags] agent run NAME [flags]`, with
// --state-dir DIR or --state-dir=DIR anywhere.
func parseAgentArgs(argv []string) (infra, stateDir string, ok bool) {
	if len(argv) < 4 || !strings.Contains(filepath.Base(argv[0]), "vnet") {
		return "", "", false
	}
	var positional []string
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--state-dir" && i+1 < len(argv):
			stateDir = argv[i+1]
			i++
		case strings.HasPrefix(a, "--state-dir="):
			stateDir = strings.TrimPrefix(a, "--state-dir=")
		case a == "--tick" && i+1 < len(argv):
			i++
		case strings.HasPrefix(a, "-"):
		default:
			positional = append(positional, a)
		}
	}
	if len(positional) != 3 || positional[0] != "agent" || positional[1] != "run" {
		return "", "", false
	}
	return positional[2], stateDir, true
}

func envValue(pid int, key string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return ""
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := strings.CutPrefix(string(kv), key+"="); ok {
			return v
		}
	}
	return ""
}

// absDir makes dir absolute against cwd (this process's when empty).
func absDir(dir, cwd string) string {
	if !filepath.IsAbs(dir) {
		if cwd == "" {
			cwd, _ = os.Getwd()
		}
		dir = filepath.Join(cwd, dir)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return filepath.Clean(dir)
}

// startupGrace is how long a new agent may take to install its reload
// handler: a SIGHUP before that would end it.
const startupGrace = 2 * time.Second

// Ensure starts the infrastructure's agent, or makes a running one reload
// the spec. exe is the vnet binary.
func Ensure(stateDir, infra, exe string) (started bool, err error) {
	if pids := Find(stateDir, infra); len(pids) > 0 {
		// The one that recorded itself has its handler; one that has not
		// yet is still starting and reads the spec as it is now.
		recorded, _ := recordedPID(stateDir, infra)
		for _, pid := range pids {
			if pid != recorded && processAge(pid) < startupGrace {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGHUP); err != nil && !errors.Is(err, syscall.ESRCH) {
				return false, fmt.Errorf("reload agent %d: %w", pid, err)
			}
		}
		return false, nil
	}
	logf, err := os.OpenFile(LogFile(stateDir, infra), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return false, fmt.Errorf("agent log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, "agent", "run", infra, "--state-dir", absDir(stateDir, ""))
	cmd.Env = killpoint.ChildEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives the apply and its terminal
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("start agent: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // reaps it should it exit while we still run
	killpoint.At("agent started")
	return waitClaimed(stateDir, infra, cmd.Process.Pid, exited)
}

// waitClaimed waits until the agent started as pid has recorded itself.
// One that exits at once lost a race with another apply's: that one runs.
func waitClaimed(stateDir, infra string, pid int, exited <-chan struct{}) (bool, error) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if got, ok := recordedPID(stateDir, infra); ok && got == pid {
			return true, nil
		}
		select {
		case <-exited:
			if _, ok := Running(stateDir, infra); ok {
				return false, nil
			}
			return false, fmt.Errorf("agent for %s exited at start: see %s", infra, LogFile(stateDir, infra))
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true, nil // slow to start, but running: it records itself when it gets there
}

// processAge is how long ago pid started (0 when unknown).
func processAge(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return 0
	}
	start, err1 := strconv.ParseFloat(f[19], 64) // starttime, field 22, in clock ticks
	up, err2 := os.ReadFile("/proc/uptime")
	if err1 != nil || err2 != nil {
		return 0
	}
	uptime, err := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	if err != nil {
		return 0
	}
	const ticks = 100 // USER_HZ, 100 on every Linux architecture vnet runs on
	return time.Duration((uptime - start/ticks) * float64(time.Second))
}

// Stop ends every agent of the infrastructure (of this state directory)
// and waits for them.
func Stop(stateDir, infra string) error {
	return stopPIDs(stateDir, infra, Find(stateDir, infra))
}

func stopPIDs(stateDir, infra string, pids []int) error {
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("stop agent %d: %w", pid, err)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(Find(stateDir, infra)) > 0 {
		if time.Now().After(deadline) {
			for _, pid := range Find(stateDir, infra) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if time.Now().After(deadline.Add(2 * time.Second)) {
				return fmt.Errorf("agent for %s does not stop", infra)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.Remove(PIDFile(stateDir, infra)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("agent pid file: %w", err)
	}
	return nil
}

// Orphan is an agent whose infrastructure is gone from the store.
type Orphan struct {
	Infra string
	PIDs  []int
}

// Orphans returns the agents of stateDir whose infrastructure known says
// is gone.
func Orphans(stateDir string, known func(infra string) bool) []Orphan {
	var out []Orphan
	for infra, pids := range All(stateDir) {
		if !known(infra) {
			out = append(out, Orphan{Infra: infra, PIDs: pids})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Infra < out[j].Infra })
	return out
}

// StopOrphan ends an orphan's agents.
func StopOrphan(stateDir string, o Orphan) error { return Stop(stateDir, o.Infra) }
