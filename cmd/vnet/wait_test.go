package main

import (
	"strings"
	"testing"
)

// With no agent running, apply --wait runs out of time naming every host;
// destroy --wait has no report to wait for; --wait through --server is
// refused as a usage error.
func TestWaitWithoutAgents(t *testing.T) {
	ep := startServer(t)
	etcd := func(args ...string) (string, int) { return vnetEnv(t, nil, append(args, "--etcd", ep)...) }

	out, code := etcd("apply", "../../examples/demo.yaml", "--wait=1s")
	if code != exitTimedOut || !strings.Contains(out, "--wait=1s ran out: hosts not current at demo generation 1: ") {
		t.Fatalf("apply --wait=1s without agents: exit %d\n%s", code, out)
	}
	for _, h := range []string{"esx1", "esx2", "client"} {
		if !strings.Contains(out, h+" no report (agent not running?)") {
			t.Errorf("apply --wait=1s without agents does not name %s:\n%s", h, out)
		}
	}
	// Unchanged, it waits for generation 1 in the same way.
	if out, code = etcd("apply", "../../examples/demo.yaml", "--wait=1s"); code != exitTimedOut || !strings.Contains(out, "unchanged, generation 1") {
		t.Errorf("unchanged apply --wait=1s without agents: exit %d\n%s", code, out)
	}
	if out, code = etcd("destroy", "demo", "--wait"); code != 0 || !strings.Contains(out, "demo: no host reports it (0 reports withdrawn") {
		t.Errorf("destroy --wait without agents: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"apply", "../../examples/demo.yaml", "--wait"}, {"destroy", "demo", "--wait=5s"}} {
		out, code := vnetEnv(t, nil, append(args, "--server", "http://127.0.0.1:1")...)
		if code != exitBadInput || !strings.Contains(out, "--wait needs --etcd") {
			t.Errorf("%s through --server: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
}
