package crashtest

import (
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
)

// aclLab is a host whose web VM's port has an ACL allowing TCP to port,
// and an app VM whose port has port security alone.
func aclLab(port string) string {
	return `name: acl
hosts:
  - {name: esx1}
switches:
  - name: sw0
    hosts: [esx1]
    portgroups:
      - name: pg-web
        acl:
          default: deny
          rules:
            - {action: allow, direction: ingress, proto: tcp, dport: ` + port + `, from: {portgroup: pg-app}}
            - {action: allow, direction: ingress, proto: icmp}
      - name: pg-app
        security: {ipSpoofing: false}
vms:
  - {name: web, host: esx1, nics: [{portgroup: pg-web, ip: 10.78.0.1/24}]}
  - {name: web2, host: esx1, nics: [{portgroup: pg-web, ip: 10.78.0.3/24}]}
  - {name: app, host: esx1, nics: [{portgroup: pg-app, ip: 10.78.0.2/24}]}
`
}

// An apply killed once it has staged its ports' new rules in the port
// programs' maps of maps, and set none of them, leaves rules that no
// port's settings name. The next apply, here of the spec as it was, so
// that it sets no port's policy at all, frees them; a further one changes
// nothing, and destroy leaves nothing.
func TestKillAfterStagingPortRules(t *testing.T) {
	nstest.RequireRoot(t)
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	on, why := dp.PortPrograms()
	dp.Close()
	if !on {
		t.Skip("SKIPPED: port policies are nftables here: " + why)
	}
	infra, state := uniqueInfra("acl"), t.TempDir()
	cleanup(t, infra, state)
	base, changed := specFile(t, aclLab("443"), infra), specFile(t, aclLab("8443"), infra)
	must(t, state, "apply", base)
	host := plan.NSName(infra, "esx1")
	unnamed := func(when string) int {
		t.Helper()
		progs, _ := nstest.PortPrograms(t, host)
		n, err := progs.Unnamed()
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		return n
	}
	if n := unnamed("after the first apply"); n != 0 {
		t.Fatalf("after the first apply the port programs hold %d entries no port names", n)
	}
	r := killed(t, state, []string{"VNET_KILL_ON=port programs staged"}, "apply", changed)
	if n := unnamed("after the killed apply"); n == 0 {
		t.Fatalf("the killed apply left nothing staged: the kill point no longer falls between staging and setting:\n%s", r.out)
	}
	out := must(t, state, "apply", base)
	if n := unnamed("after the next apply"); n != 0 {
		t.Errorf("after the next apply the port programs still hold %d entries no port names:\n%s", n, out)
	}
	if out := must(t, state, "apply", "--dry-run", "--full", base); !strings.Contains(out, "no changes") {
		t.Errorf("after the repairing apply, a further one would change:\n%s", out)
	}
	destroyClean(t, infra, state, r.pid)
}
