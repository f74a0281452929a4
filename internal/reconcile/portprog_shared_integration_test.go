package reconcile_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
)

// aclHostSpec is an infrastructure of one real host whose two web VMs'
// ports have an ACL: https from the app VM only. deny is one more port
// the ACL denies, so that each variant makes every web port's rules anew.
func aclHostSpec(infra, net string, deny int) string {
	return fmt.Sprintf(`name: %[1]s
hosts:
  - name: hv1
switches:
  - name: sw
    hosts: [hv1]
    portgroups:
      - name: pg-web
        acl:
          default: deny
          rules:
            - {action: allow, direction: ingress, proto: tcp, dport: 443, from: {portgroup: pg-app}}
            - {action: deny, direction: ingress, proto: tcp, dport: %[3]d}
      - name: pg-app
vms:
  - {name: web1, host: hv1, nics: [{portgroup: pg-web, ip: %[2]s.0.1/24}]}
  - {name: web2, host: hv1, nics: [{portgroup: pg-web, ip: %[2]s.0.2/24}]}
  - {name: app, host: hv1, nics: [{portgroup: pg-app, ip: %[2]s.0.3/24}]}
`, infra, net, deny)
}

// Two infrastructures on one machine share its namespace's port programs,
// each changed by a process of its own under its own lock. Applied at the
// same time, over and over, while a third sweeps those programs, neither
// loses a rule: each ACL still lets https from its app VM in and nothing
// else.
func TestSharedPortProgramsKeepConcurrentRules(t *testing.T) {
	h := newSharedHost(t, "ppshare")
	if !byPrograms(h.eng) {
		t.Skip("SKIPPED: port policies are nftables here (" + dataplane.PortPolicyEnv + " or the kernel)")
	}
	other := engineOnMachine(t, h.machine) // another process's
	sweeper, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	defer sweeper.Close()
	sweeper.HostNS = h.machine
	blue, green := nstest.Infra("ppblue"), nstest.Infra("ppgreen")
	nets := map[string]string{blue: "10.46", green: "10.47"}
	engines := map[string]*reconcile.Engine{blue: h.eng, green: other}
	for infra, eng := range engines {
		if _, err := eng.Apply(loadSpec(t, aclHostSpec(infra, nets[infra], 22))); err != nil {
			t.Fatal(err)
		}
	}
	const rounds = 6
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds+1)
	done := make(chan struct{})
	for infra, eng := range engines {
		variants := [2]*spec.Document{loadSpec(t, aclHostSpec(infra, nets[infra], 22)), loadSpec(t, aclHostSpec(infra, nets[infra], 23))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				if _, err := eng.Apply(variants[(i+1)%2]); err != nil {
					errs <- fmt.Errorf("%s round %d: %w", infra, i, err)
				}
			}
		}()
	}
	var swept sync.WaitGroup
	swept.Add(1)
	go func() {
		defer swept.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := sweeper.SweepPortPrograms([]string{h.machine}); err != nil {
				errs <- fmt.Errorf("sweep: %w", err)
				return
			}
		}
	}()
	wg.Wait()
	close(done)
	swept.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for infra, net := range nets {
		for _, web := range []string{"web1", "web2"} {
			ns := nstest.NSName(infra, web)
			waitAddressesSettled(t, ns)
			addr := net + ".0." + strings.TrimPrefix(web, "web")
			echoTCP(t, ns, addr+":443")
			echoTCP(t, ns, addr+":8443")
			if err := tcpEcho(t, nstest.NSName(infra, "app"), addr+":443"); err != nil {
				t.Errorf("%s: app does not reach %s's https: %v", infra, web, err)
			}
			if err := tcpEcho(t, nstest.NSName(infra, "app"), addr+":8443"); err == nil {
				t.Errorf("%s: app reaches %s on a port its ACL denies", infra, web)
			}
		}
	}
}
