package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// One agent process runs per infrastructure that teams uplinks. vnet apply
// starts it (or tells it to reload) and vnet destroy stops it; its pid and
// log live in the state directory.

// PIDFile is where an infrastructure's agent records its pid.
func PIDFile(stateDir, infra string) string { return filepath.Join(stateDir, "agent-"+infra+".pid") }

// LogFile is where an infrastructure's agent writes what it does.
func LogFile(stateDir, infra string) string { return filepath.Join(stateDir, "agent-"+infra+".log") }

// Running returns the pid of the infrastructure's agent if one runs. A
// stale pid file, or a pid reused by another program, does not count.
func Running(stateDir, infra string) (int, bool) {
	b, err := os.ReadFile(PIDFile(stateDir, infra))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte("\x00agent\x00run\x00"+infra+"\x00")) {
		return 0, false
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && zombie(stat) {
		return 0, false
	}
	return pid, true
}

func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// Ensure starts the infrastructure's agent, or makes a running one reload
// the spec. exe is the vnet binary.
func Ensure(stateDir, infra, exe string) (started bool, err error) {
	if pid, ok := Running(stateDir, infra); ok {
		if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
			return false, fmt.Errorf("reload agent %d: %w", pid, err)
		}
		return false, nil
	}
	logf, err := os.OpenFile(LogFile(stateDir, infra), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return false, fmt.Errorf("agent log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, "agent", "run", infra, "--state-dir", stateDir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives the apply and its terminal
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("start agent: %w", err)
	}
	pid := cmd.Process.Pid
	go cmd.Wait() //nolint:errcheck // reaps it should it exit while we still run
	if err := os.WriteFile(PIDFile(stateDir, infra), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return false, fmt.Errorf("agent pid file: %w", err)
	}
	return true, nil
}

// Stop ends the infrastructure's agent, if one runs, and waits for it.
func Stop(stateDir, infra string) error {
	defer os.Remove(PIDFile(stateDir, infra))
	pid, ok := Running(stateDir, infra)
	if !ok {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop agent %d: %w", pid, err)
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, ok := Running(stateDir, infra); !ok {
			return nil
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return nil
}
