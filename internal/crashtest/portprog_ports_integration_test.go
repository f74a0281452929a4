package crashtest

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/dataplane/bpfpolicy"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
)

// portProgramsHoldTheirPorts fails the test unless, in each namespace of
// the infrastructure, the port programs its ports share hold exactly the
// ports that run them: a one-port change reads only its port, so an
// entry a killed command left must be gone once the next apply repaired
// the host.
func portProgramsHoldTheirPorts(t *testing.T, infra string) {
	t.Helper()
	entries, err := os.ReadDir(dataplane.NetnsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), plan.InfraNSPrefix(infra)) {
			nsPortProgramsHoldTheirPorts(t, e.Name())
		}
	}
}

func nsPortProgramsHoldTheirPorts(t *testing.T, ns string) {
	t.Helper()
	running := map[[2]uint32][]uint32{} // by the programs' IDs, the ports that run them
	for _, p := range nstest.ProgramPorts(t, ns) {
		running[p.IDs] = append(running[p.IDs], p.Index)
	}
	for ids, ports := range running {
		progs, err := bpfpolicy.Open(ebpf.ProgramID(ids[0]), ebpf.ProgramID(ids[1]))
		if err != nil {
			t.Errorf("%s: open the port programs %v: %v", ns, ids, err)
			continue
		}
		if progs.Complete() {
			held, err := progs.Ports()
			slices.Sort(ports)
			if err != nil || !slices.Equal(held, ports) {
				t.Errorf("%s: the port programs hold ports %v (%v), the ports that run them are %v", ns, held, err, ports)
			}
		}
		progs.Close()
	}
}
