package reconcile_test

import (
	"maps"
	"net"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/dataplane/bpfpolicy"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
)

// Ports that run the programs of a build with other code on the same maps
// (an older vnet) are switched to this build's programs by the next
// change in their namespace, all of them and once, keeping their
// policies and counters; the apply after that re-points nothing.
func TestPortProgramsOfAnotherBuildAreReplaced(t *testing.T) {
	eng, infra, progs := upgradeLab(t, "pupg")
	vm := func(n string) string { return nstest.NSName(infra, n) }
	hostNS := vm("esx1")
	lab := secLab(infra)
	wantFrom, wantTo, err := progs.Tags()
	if err != nil {
		t.Fatal(err)
	}

	waitAddressesSettled(t, vm("app"))
	waitAddressesSettled(t, vm("other"))
	appMAC := macOf(t, vm("app"))
	forged := func(marker string) map[string]int {
		bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		return exchange(t, vm("app"), vm("other"), ethExperimental,
			ethFrame(bcast, net.HardwareAddr{0x02, 0, 0, 0, 0x99, 0x98}, ethExperimental, []byte("#forged-"+marker)),
			ethFrame(bcast, appMAC, ethExperimental, []byte("#honest-"+marker)))
	}
	if got := forged("a"); got["forged-a"] != 0 || got["honest-a"] != 1 {
		t.Fatalf("under this build's programs other received %v: want the honest frame only", got)
	}

	// An older build's programs, on the same maps, on every port.
	older, err := bpfpolicy.LoadOther(progs)
	if err != nil {
		t.Fatal(err)
	}
	if from, to, _ := older.Tags(); from == wantFrom || to == wantTo {
		t.Fatalf("the other build's programs have this build's tags %s %s", from, to)
	}
	h := nstest.Netlink(t, hostNS)
	for _, p := range nstest.ProgramPorts(t, hostNS) {
		repointTo(t, h, p.Index, older)
	}
	older.Close() // the filters hold them
	assertPortTags(t, hostNS, "the older build's", func(from, to string) bool { return from != wantFrom && to != wantTo })

	if got := forged("b"); got["forged-b"] != 0 || got["honest-b"] != 1 {
		t.Fatalf("under the older build's programs other received %v: want the honest frame only", got)
	}
	appPort := plan.VNICPortName(infra, "app", 0)
	before := counters(t, infra)[appPort]["forged-mac"]
	if before == 0 {
		t.Fatalf("the older build's programs did not count the forged frame on %s", appPort)
	}

	// This build's next change in the namespace, by another process: one
	// VM more.
	applyElsewhere(t, eng, oneVMMore(lab))
	ids := assertPortTags(t, hostNS, "this build's", func(from, to string) bool { return from == wantFrom && to == wantTo })
	if len(ids) != 1 {
		t.Errorf("the ports run %d pairs of programs, want one: %v", len(ids), ids)
	}
	nstest.PortPrograms(t, hostNS) // every port holds its entry in them

	if got := forged("c"); got["forged-c"] != 0 || got["honest-c"] != 1 {
		t.Errorf("under this build's programs other received %v: want the honest frame only", got)
	}
	if after := counters(t, infra)[appPort]["forged-mac"]; after <= before {
		t.Errorf("the forged-mac count of %s went from %d to %d: want it kept and counting", appPort, before, after)
	}

	// The next change re-points nothing.
	applyElsewhere(t, eng, lab)
	if again := assertPortTags(t, hostNS, "this build's", func(from, to string) bool { return from == wantFrom && to == wantTo }); !maps.Equal(again, ids) {
		t.Errorf("the apply after re-pointed the ports: %v, then %v", ids, again)
	}
}

// repointTo puts programs in a port's hooks in place of those there, as
// an apply does.
func repointTo(t *testing.T, h *netlink.Handle, index uint32, p *bpfpolicy.Programs) {
	t.Helper()
	link := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: int(index)}}
	for parent, prog := range map[uint32]*ebpf.Program{netlink.HANDLE_MIN_INGRESS: p.FromVM, netlink.HANDLE_MIN_EGRESS: p.ToVM} {
		fs, err := h.FilterList(link, parent)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			bf, ok := f.(*netlink.BpfFilter)
			if !ok || !strings.HasPrefix(bf.Name, plan.AliasPrefix+"port ") {
				continue
			}
			next := &netlink.BpfFilter{FilterAttrs: *bf.Attrs(), Fd: prog.FD(), Name: bf.Name, DirectAction: true}
			if err := h.FilterReplace(next); err != nil {
				t.Fatalf("replace port %d's filter: %v", index, err)
			}
		}
	}
}

// assertPortTags checks that every port runs programs whose tags pass ok,
// and returns the pairs of program IDs they run.
func assertPortTags(t *testing.T, ns, whose string, ok func(from, to string) bool) map[[2]uint32]bool {
	t.Helper()
	pairs := map[[2]uint32]bool{}
	for _, p := range nstest.ProgramPorts(t, ns) {
		pairs[p.IDs] = true
		var tags [2]string
		for i, id := range p.IDs {
			prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
			if err != nil {
				t.Fatal(err)
			}
			info, err := prog.Info()
			prog.Close()
			if err != nil {
				t.Fatal(err)
			}
			tags[i] = info.Tag
		}
		if !ok(tags[0], tags[1]) {
			t.Errorf("%s runs programs tagged %v, want %s", p.Name, tags, whose)
		}
	}
	return pairs
}

// A switch cut short (some ports on an older build's programs, the
// others on this build's, all on the same maps) is finished by the next
// change, whichever pair it finds first.
func TestPortProgramsSwitchCutShortIsFinished(t *testing.T) {
	eng, infra, progs := upgradeLab(t, "pcut")
	hostNS := nstest.NSName(infra, "esx1")
	wantFrom, wantTo, err := progs.Tags()
	if err != nil {
		t.Fatal(err)
	}
	older, err := bpfpolicy.LoadOther(progs)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close()
	// As a switch leaves it: this build's programs loaded on the older
	// ones' maps after them, and all ports but one re-pointed to them.
	next, err := bpfpolicy.Load(older)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	h := nstest.Netlink(t, hostNS)
	ports := nstest.ProgramPorts(t, hostNS)
	for _, p := range ports[:len(ports)-1] {
		repointTo(t, h, p.Index, next)
	}
	repointTo(t, h, ports[len(ports)-1].Index, older)
	applyElsewhere(t, eng, oneVMMore(secLab(infra)))
	ids := assertPortTags(t, hostNS, "this build's", func(from, to string) bool { return from == wantFrom && to == wantTo })
	if len(ids) != 1 {
		t.Errorf("the ports run %d pairs of programs, want one: %v", len(ids), ids)
	}
	nstest.PortPrograms(t, hostNS)
}

// upgradeLab applies the security lab and returns the programs its
// host's ports run.
func upgradeLab(t *testing.T, prefix string) (*reconcile.Engine, string, *bpfpolicy.Programs) {
	t.Helper()
	eng := nstest.Engine(t)
	if !byPrograms(eng) {
		t.Skip("SKIPPED: port policies are nftables here (" + dataplane.PortPolicyEnv + " or the kernel)")
	}
	infra := secInfra(prefix)
	nstest.Apply(t, eng, secLab(infra))
	progs, _ := nstest.PortPrograms(t, nstest.NSName(infra, "esx1"))
	return eng, infra, progs
}

// oneVMMore is the lab with one VM more on pg-web, whose rules name
// pg-app only: no other port's policy changes.
func oneVMMore(lab string) string {
	return strings.Replace(lab, "vms:\n", "vms:\n  - {name: more, host: esx1, nics: [{portgroup: pg-web, ip: 10.77.0.5/24}]}\n", 1)
}

// applyElsewhere applies src as another process of this build would.
func applyElsewhere(t *testing.T, eng *reconcile.Engine, src string) {
	t.Helper()
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if _, err := (&reconcile.Engine{DP: dp, Store: eng.Store}).Apply(loadSpec(t, src)); err != nil {
		t.Fatal(err)
	}
}
