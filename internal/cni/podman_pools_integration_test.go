package cni_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/nstest"
)

// poolsInfra has one 100 Mbit uplink on esx1, the only contention point
// (the receiving machine's NIC is ten times faster), and a port group for
// containers in each of two pools whose shares are 4:1. Both port groups
// hand out addresses of one subnet, the receiver's.
func poolsInfra(name string) string {
	return fmt.Sprintf(`name: %s
hosts:
  - {name: esx1, nics: [{name: vmnic0, speed: 100Mbit}]}
  - {name: sink, native: true, nics: [{name: eth0, speed: 1Gbit, ip: 10.44.0.100/24}]}
switches:
  - name: dvs0
    uplinks: [{name: u1, nics: {esx1: vmnic0}}]
    ioc:
      enabled: true
      pools:
        gold: {shares: 100}
        bronze: {shares: 25}
    portgroups:
      - {name: pg-gold, pool: gold, subnet: 10.44.0.0/24, gateway: 10.44.0.1}
      - {name: pg-bronze, pool: bronze, subnet: 10.44.0.0/24, gateway: 10.44.0.1}
`, name)
}

const sinkIP = "10.44.0.100"

// Two podman containers, one on a port group of each pool, send to a
// machine beyond the uplink at once: the uplink splits by the pools'
// shares, the 100-share pool's container getting clearly more than the
// 25-share pool's (ideally 4/5 of what the uplink carries, 1/5), and the
// two together fill the uplink as far as this machine carries 100 Mbit.
func TestPodmanPoolsSplitByShares(t *testing.T) {
	p := newPodman(t, plugin(t))
	infra, state, _ := applied(t, "podpool", poolsInfra)
	p.image()
	for _, pool := range []string{"gold", "bronze"} {
		p.network("vnet"+pool, fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "vnet%s", "plugins": [
  {"type": "vnet-cni", "infra": %q, "portgroup": "pg-%s", "host": "esx1", "stateDir": %q,
   "ipam": {"type": "vnet"}}]}`, pool, infra, pool, state))
		p.container(pool, "vnet"+pool, 8000)
	}
	// The runtime's name for each container's namespace, bind-mounted in
	// /run/netns as CNI had it.
	gold := filepath.Base(p.must("inspect", "-f", "{{.NetworkSettings.SandboxKey}}", "gold"))
	bronze := filepath.Base(p.must("inspect", "-f", "{{.NetworkSettings.SandboxKey}}", "bronze"))
	sink := nstest.NSName(infra, "sink")

	const line = 100e6
	for try := 1; ; try++ {
		var r []float64
		both, _ := nstest.CarriesAsMuch(t, line, 0.8, "the 100- and 25-share pools' containers together", func() float64 {
			r = nstest.Goodputs(t, sink, sinkIP, 3*time.Second, gold, bronze)
			t.Logf("shares 100:25 -> %.1f : %.1f Mbit/s", r[0]/1e6, r[1]/1e6)
			return r[0] + r[1]
		})
		if both > 1.03*line {
			t.Errorf("together %.1f Mbit/s, above the 100 Mbit uplink", both/1e6)
		}
		fraction := r[0] / (r[0] + r[1])
		if fraction >= 0.65 && r[1] > 0 {
			t.Logf("the 100-share pool's container got %.0f%% of the uplink (ideally 80%%)", 100*fraction)
			return
		}
		if try == 2 { // a slow host's rates swing: one more go before failing
			t.Errorf("the 100-share pool's container got %.1f Mbit/s, the 25-share pool's %.1f (%.0f%%): not clearly its share",
				r[0]/1e6, r[1]/1e6, 100*fraction)
			return
		}
	}
}
