package clustertest

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
)

// apply --wait returns once every host reports the generation current,
// naming each; with one agent stopped it runs out of time naming that
// host; right after a destroy it does not take the agents' reports of the
// infrastructure before for the new one's; without a host, it returns once
// that host emptied itself; destroy --wait returns once no host reports
// the infrastructure, each having removed its part.
func TestClusterApplyWait(t *testing.T) {
	c := faultCluster(t, 120*time.Second, "hv1", "hv2", "hv3")
	infra := c.Infra()
	hosts := []string{"hv1", "hv2", "hv3"}
	file := c.WriteSpec(infra, c.Spec(infra, switchAndVMs))
	out := vnetOK(t, c, "apply", file, "--wait")
	t.Logf("apply --wait:\n%s", out)
	for _, h := range hosts {
		if !strings.Contains(out, h+" current at generation 1 after ") {
			t.Errorf("apply --wait does not list %s current:\n%s", h, out)
		}
	}
	if !strings.Contains(out, infra+" generation 1: 3 hosts current in ") {
		t.Errorf("apply --wait has no summary:\n%s", out)
	}
	st, err := status(t, c, infra)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Converged || st.Generation != 1 {
		t.Fatalf("status right after apply --wait: generation %d, %v, want every host current at 1", st.Generation, st.states())
	}

	// Unchanged, it waits for the generation in etcd, which is current.
	start := time.Now()
	out = vnetOK(t, c, "apply", file, "--wait=20s")
	if !strings.Contains(out, "unchanged") || !strings.Contains(out, "3 hosts current") {
		t.Errorf("apply --wait of an unchanged spec:\n%s", out)
	}
	t.Logf("unchanged apply --wait took %s", time.Since(start).Round(time.Millisecond))

	// hv3's agent is down: the others catch up, hv3 never does.
	hv3 := c.Machine("hv3")
	hv3.KillAgent()
	file = c.WriteSpec(infra, c.Spec(infra, switchAndVMs+addVM4))
	out, err = c.Vnet("apply", file, "--wait=5s")
	t.Logf("apply --wait=5s with hv3's agent down:\n%s", out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("apply --wait=5s with hv3's agent down: %v, want exit status 3", err)
	}
	for _, want := range []string{"hv1 current at generation 2", "hv2 current at generation 2", "ran out", "hosts not current at " + infra + " generation 2: hv3 "} {
		if !strings.Contains(out, want) {
			t.Errorf("apply --wait=5s with hv3's agent down does not say %q", want)
		}
	}
	if strings.Contains(out, "hv3 current") {
		t.Errorf("hv3 is said current with its agent down")
	}

	// Back, hv3 catches up; the unchanged apply waits for it.
	hv3.StartAgent("--interval", "30s")
	out = vnetOK(t, c, "apply", file, "--wait=60s")
	if !strings.Contains(out, "hv3 current at generation 2") {
		t.Errorf("apply --wait after hv3's agent restarted:\n%s", out)
	}

	// Destroyed and applied again at once, it starts over at generation 1
	// while the agents may still report generation 2 of the one before.
	vnetOK(t, c, "destroy", infra)
	out = vnetOK(t, c, "apply", file, "--wait=60s")
	t.Logf("apply --wait right after a destroy:\n%s", out)
	if !strings.Contains(out, infra+" generation 1: 3 hosts current in ") {
		t.Errorf("apply --wait right after a destroy:\n%s", out)
	}
	if st, err := status(t, c, infra); err != nil || !st.Converged || st.Generation != 1 {
		t.Fatalf("status right after apply --wait: %+v, %v; want every host current at 1", st, err)
	}

	// Without hv3, the apply is done once hv3 emptied itself and withdrew
	// its report.
	file = c.WriteSpec(infra, specOn(c, infra, []string{"hv1", "hv2"}, switchOnTwo))
	out = vnetOK(t, c, "apply", file, "--wait=60s")
	t.Logf("apply --wait without hv3:\n%s", out)
	if !strings.Contains(out, "hv3, no longer in the spec, withdrew its report after ") || !strings.Contains(out, "2 hosts current") {
		t.Errorf("apply --wait without hv3 does not say hv3 withdrew:\n%s", out)
	}
	if links := vnetLinks(hv3); len(links) > 0 || nsExists(plan.NSName(infra, "vm3")) {
		t.Errorf("hv3 still holds a part of the infrastructure after apply --wait without it:\n%s", strings.Join(links, "\n"))
	}

	out = vnetOK(t, c, "destroy", infra, "--wait")
	t.Logf("destroy --wait:\n%s", out)
	for _, h := range hosts {
		if h != "hv3" && !strings.Contains(out, h+" withdrew its report after ") {
			t.Errorf("destroy --wait does not list %s:\n%s", h, out)
		}
		if links := vnetLinks(c.Machine(h)); len(links) > 0 {
			t.Errorf("%s holds links of vnet after destroy --wait:\n%s", h, strings.Join(links, "\n"))
		}
	}
	for _, vm := range []string{"vm1", "vm2", "vm3", "vm4"} {
		if nsExists(plan.NSName(infra, vm)) {
			t.Errorf("%s's namespace is left after destroy --wait", vm)
		}
	}
	if !strings.Contains(out, infra+": no host reports it") {
		t.Errorf("destroy --wait has no summary:\n%s", out)
	}
}

func vnetOK(t *testing.T, c *Cluster, args ...string) string {
	t.Helper()
	out, err := c.Vnet(args...)
	if err != nil {
		t.Fatalf("vnet %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
