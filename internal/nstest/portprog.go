package nstest

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/vnet-project/vnet/internal/dataplane/bpfpolicy"
	"github.com/vnet-project/vnet/internal/plan"
)

// PortPrograms opens the port programs the protected ports of a host
// namespace run, failing the test unless every one runs the same pair, and
// returns them with the ports' interface indexes by link name.
func PortPrograms(t testing.TB, ns string) (*bpfpolicy.Programs, map[string]uint32) {
	t.Helper()
	h := Netlink(t, ns)
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]uint32{}
	var in, out uint32
	for _, l := range links {
		var ids [2]uint32
		for i, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, _ := h.FilterList(l, parent)
			for _, f := range fs {
				if bf, ok := f.(*netlink.BpfFilter); ok && strings.HasPrefix(bf.Name, plan.AliasPrefix+"port ") {
					ids[i] = uint32(bf.Id)
				}
			}
		}
		if ids[0] == 0 && ids[1] == 0 {
			continue
		}
		if in == 0 {
			in, out = ids[0], ids[1]
		}
		if ids != [2]uint32{in, out} {
			t.Errorf("%s runs programs %v, another port %v", l.Attrs().Name, ids, [2]uint32{in, out})
		}
		ports[l.Attrs().Name] = uint32(l.Attrs().Index)
	}
	if in == 0 {
		t.Fatalf("no port runs port programs in %s", ns)
	}
	progs, err := bpfpolicy.Open(ebpf.ProgramID(in), ebpf.ProgramID(out))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(progs.Close)
	return progs, ports
}
