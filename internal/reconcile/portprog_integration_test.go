package reconcile_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/dataplane/bpfpolicy"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
)

// The protected ports of a host share one pair of programs, each port's
// policy an entry in their maps: the programs hold exactly the ports that
// run them, also after a VM goes and after a port is deleted under vnet
// (a crash's leftover, forgotten by the next full apply); VMs whose ports
// take frames directly reach each other past the bridge.
func TestPortProgramsAreSharedAndHoldTheirPorts(t *testing.T) {
	eng := nstest.Engine(t)
	if !byPrograms(eng) {
		t.Skip("SKIPPED: port policies are nftables here (" + dataplane.PortPolicyEnv + " or the kernel)")
	}
	infra := secInfra("pshare")
	vm := func(n string) string { return nstest.NSName(infra, n) }
	hostNS := vm("esx1")
	nstest.Apply(t, eng, secLab(infra))
	holds := func(when string) (*bpfpolicy.Programs, map[string]uint32) {
		t.Helper()
		progs, ports := nstest.PortPrograms(t, hostNS)
		held, err := progs.Ports()
		if err != nil {
			t.Fatal(err)
		}
		var want []uint32
		for _, i := range ports {
			want = append(want, i)
		}
		slices.Sort(want)
		if !slices.Equal(held, want) {
			t.Errorf("%s: the programs hold ports %v, the ports that run them are %v", when, held, want)
		}
		return progs, ports
	}
	progs, ports := holds("after the apply")
	appPort, otherPort := plan.VNICPortName(infra, "app", 0), plan.VNICPortName(infra, "other", 0)
	if _, direct, err := progs.Bridge(ports[otherPort]); err != nil || !direct {
		t.Errorf("other's port takes frames directly: %v, %v", direct, err)
	}
	on, _, err := progs.FastPath()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("frames between ports past the bridge: %v", on)
	waitAddressesSettled(t, vm("other"))
	echoTCP(t, vm("other"), "10.77.0.3:7")
	for i := 0; i < 3; i++ { // past the bridge once its MAC is known
		if err := tcpEcho(t, vm("app"), "10.77.0.3:7"); err != nil {
			t.Fatalf("app does not reach other: %v", err)
		}
	}

	// A VM gone: its port is forgotten.
	nstest.Apply(t, eng, strings.Replace(secLab(infra), "  - {name: other, host: esx1, nics: [{portgroup: pg-app, ip: 10.77.0.3/24}]}\n", "", 1))
	holds("after a VM went")

	// A port deleted under vnet: a one-VM change does not read the other
	// ports, so the next full apply, which finds the port gone, makes it
	// again and has the programs forget the one deleted.
	h := nstest.Netlink(t, hostNS)
	link, err := h.LinkByName(appPort)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkDel(link); err != nil {
		t.Fatal(err)
	}
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if _, err := (&reconcile.Engine{DP: dp, Store: eng.Store, Full: true}).Apply(loadSpec(t, secLab(infra))); err != nil {
		t.Fatal(err)
	}
	holds("after a port was deleted under vnet and the VM made again")
}

// pruneCounter counts the dataplane's prunes of the port programs.
type pruneCounter struct {
	*dataplane.Linux
	prunes int
}

func (c *pruneCounter) PruneStale(namespaces []string) error {
	c.prunes++
	return c.Linux.PruneStale(namespaces)
}

// A one-VM change after a finished apply does not read every port's
// hooks to prune the port programs (its own pending note does not count
// as the last command's); a full apply does.
func TestOneVMChangeDoesNotPrunePortPrograms(t *testing.T) {
	eng := nstest.Engine(t)
	if !byPrograms(eng) {
		t.Skip("SKIPPED: port policies are nftables here (" + dataplane.PortPolicyEnv + " or the kernel)")
	}
	infra := secInfra("pprune")
	lab := secLab(infra)
	nstest.Apply(t, eng, lab)
	counter := &pruneCounter{Linux: eng.DP.(*dataplane.Linux)}
	eng.DP = counter
	nstest.Apply(t, eng, strings.Replace(lab, "  - {name: other, host: esx1, nics: [{portgroup: pg-app, ip: 10.77.0.3/24}]}\n", "", 1))
	nstest.Apply(t, eng, lab)
	if counter.prunes != 0 {
		t.Errorf("one-VM changes after finished applies pruned the port programs %d times, want 0", counter.prunes)
	}
	eng.Full = true
	nstest.Apply(t, eng, lab)
	if counter.prunes == 0 {
		t.Error("a full apply did not prune the port programs")
	}
}
