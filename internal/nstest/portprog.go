package nstest

import (
	"testing"

	"github.com/cilium/ebpf"

	"github.com/vnet-project/vnet/internal/dataplane/bpfpolicy"
)

// PortPrograms opens the port programs the protected ports of a host
// namespace run, failing the test unless every one runs the same pair, and
// returns them with the ports' interface indexes by link name.
func PortPrograms(t testing.TB, ns string) (*bpfpolicy.Programs, map[string]uint32) {
	t.Helper()
	ports := map[string]uint32{}
	var in, out uint32
	for _, p := range ProgramPorts(t, ns) {
		if in == 0 {
			in, out = p.IDs[0], p.IDs[1]
		}
		if p.IDs != [2]uint32{in, out} {
			t.Errorf("%s runs programs %v, another port %v", p.Name, p.IDs, [2]uint32{in, out})
		}
		ports[p.Name] = p.Index
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
