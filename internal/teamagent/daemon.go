package teamagent

import (
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

	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/killpoint"
)

// One agent process runs per infrastructure that teams uplinks. vnet apply
// starts it (or tells it to reload) and vnet destroy stops it; its pid
// file and log live in the state directory.
//
// The agent is whoever holds an exclusive flock on the pid file: the
// kernel drops the lock when the process ends, however it ends, so the
// holder is always a live agent and a pid file nobody holds is stale and
// harmless (the next agent takes it over). The holder writes its pid into
// the file once it holds the lock, after it has installed its reload
// handler; a held file without a pid is an agent still starting.

// PIDFile is where an infrastructure's agent records its pid.
func PIDFile(stateDir, infra string) string {
	return filepath.Join(stateDir, pidPrefix+infra+pidSuffix)
}

// LogFile is where an infrastructure's agent writes what it does.
func LogFile(stateDir, infra string) string { return filepath.Join(stateDir, "agent-"+infra+".log") }

const pidPrefix, pidSuffix = "agent-", ".pid"

// ErrRunning says another agent already runs for the infrastructure.
var ErrRunning = errors.New("an agent already runs for this infrastructure")

// claimWait is how long a claim retries a held pid file: a reader asking
// whether an agent runs holds a shared lock for an instant, which must not
// turn a starting agent away. A live agent holds its lock for good.
const claimWait = 250 * time.Millisecond

// Claim is an agent's hold on its pid file.
type Claim struct {
	stateDir, infra string
	f               *os.File
}

// Take makes this process the infrastructure's agent: it locks the pid
// file and writes its pid there. The lock lasts until Release or the
// process's end, however it ends.
func Take(stateDir, infra string) (*Claim, error) {
	path := PIDFile(stateDir, infra)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("agent pid file: %w", err)
	}
	if err := lockWithin(f, claimWait); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("agent for %s: %w", infra, ErrRunning)
		}
		return nil, fmt.Errorf("lock agent pid file: %w", err)
	}
	// The pid of an agent before this one goes at once, so that no reader
	// takes it for this one's.
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("agent pid file: %w", err)
	}
	killpoint.At("agent holds its lock, pid not yet written")
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("agent pid file: %w", err)
	}
	return &Claim{stateDir: stateDir, infra: infra, f: f}, nil
}

func lockWithin(f *os.File, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Release gives the claim up. The file stays: a stale pid file is harmless.
func (c *Claim) Release() { c.f.Close() }

// Keep checks that the pid file is still the one this agent holds. One
// removed or replaced behind its back is claimed anew, so that the next
// apply finds this agent rather than starting another; when another agent
// got there first, Keep returns ErrRunning and this one should end.
func (c *Claim) Keep() error {
	if sameFile(c.f, PIDFile(c.stateDir, c.infra)) {
		return nil
	}
	again, err := Take(c.stateDir, c.infra)
	if err != nil {
		return err
	}
	c.f.Close()
	c.f = again.f
	return nil
}

func sameFile(f *os.File, path string) bool {
	held, err1 := f.Stat()
	named, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(held, named)
}

// Running returns the pid of the infrastructure's agent if one runs. The
// pid is 0 for an agent that holds its pid file but has not written its
// pid yet.
func Running(stateDir, infra string) (int, bool) {
	f, err := os.Open(PIDFile(stateDir, infra))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	// A shared lock that is granted means nobody holds the file: stale.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return 0, false
	}
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0, true
	}
	return pid, true
}

// All returns the running agents of stateDir: their pids by
// infrastructure.
func All(stateDir string) map[string]int {
	out := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(stateDir, pidPrefix+"*"+pidSuffix))
	for _, f := range files {
		infra := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), pidPrefix), pidSuffix)
		if pid, ok := Running(stateDir, infra); ok {
			out[infra] = pid
		}
	}
	return out
}

// Ensure starts the infrastructure's agent, or makes a running one reload
// the spec. exe is the vnet binary.
func Ensure(stateDir, infra, exe string) (started bool, err error) {
	if pid, ok := Running(stateDir, infra); ok {
		// An agent that has written its pid has its reload handler; one
		// that has not is still starting and reads the spec as it is now.
		if pid > 0 {
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
	cmd := exec.Command(exe, "agent", "run", infra, "--state-dir", absDir(stateDir))
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

// absDir is dir made absolute, so that the agent finds it whatever its
// working directory.
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// waitClaimed waits until the agent started as pid has recorded itself.
// One that exits at once lost a race with another apply's: that one runs.
func waitClaimed(stateDir, infra string, pid int, exited <-chan struct{}) (bool, error) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if got, ok := Running(stateDir, infra); ok && got == pid {
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

// Stop ends the infrastructure's agent (of this state directory), waits
// for it, and removes its pid file.
func Stop(stateDir, infra string) error {
	signalled := 0
	deadline := time.Now().Add(3 * time.Second)
	for {
		pid, ok := Running(stateDir, infra)
		if !ok {
			break
		}
		if pid > 0 && pid != signalled {
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("stop agent %d: %w", pid, err)
			}
			signalled = pid
		}
		if time.Now().After(deadline) {
			if pid > 0 {
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
	PID   int
}

// Orphans returns the agents of stateDir whose infrastructure known says
// is gone.
func Orphans(stateDir string, known func(infra string) bool) []Orphan {
	var out []Orphan
	for infra, pid := range All(stateDir) {
		if !known(infra) {
			out = append(out, Orphan{Infra: infra, PID: pid})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Infra < out[j].Infra })
	return out
}
