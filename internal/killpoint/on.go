//go:build vnetkill

package killpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

const enabled = true

var (
	mu     sync.Mutex
	count  int
	killAt = func() int { n, _ := strconv.Atoi(os.Getenv("VNET_KILL_AT")); return n }()
	killOn = os.Getenv("VNET_KILL_ON")
	trace  = os.Getenv("VNET_KILL_TRACE")
)

func at(name string) {
	mu.Lock()
	defer mu.Unlock()
	count++
	if trace != "" {
		if f, err := os.OpenFile(trace, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			fmt.Fprintf(f, "%d %s\n", count, name)
			f.Close()
		}
	}
	if count == killAt || (killOn != "" && strings.Contains(name, killOn)) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; nothing more of this process runs
	}
}

func childEnv(env []string) []string {
	var out []string
	agentAt, agentOn, agentTrace := "", "", ""
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "VNET_KILL_AGENT_AT="):
			agentAt = strings.TrimPrefix(kv, "VNET_KILL_AGENT_AT=")
		case strings.HasPrefix(kv, "VNET_KILL_AGENT_ON="):
			agentOn = strings.TrimPrefix(kv, "VNET_KILL_AGENT_ON=")
		case strings.HasPrefix(kv, "VNET_KILL_AGENT_TRACE="):
			agentTrace = strings.TrimPrefix(kv, "VNET_KILL_AGENT_TRACE=")
		case strings.HasPrefix(kv, "VNET_KILL_AT="), strings.HasPrefix(kv, "VNET_KILL_ON="), strings.HasPrefix(kv, "VNET_KILL_TRACE="):
		default:
			out = append(out, kv)
		}
	}
	if agentAt != "" {
		out = append(out, "VNET_KILL_AT="+agentAt)
	}
	if agentOn != "" {
		out = append(out, "VNET_KILL_ON="+agentOn)
	}
	if agentTrace != "" {
		out = append(out, "VNET_KILL_TRACE="+agentTrace)
	}
	return out
}
