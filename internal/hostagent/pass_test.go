package hostagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// memoryDP is a kernel in memory: it holds what it was told to make, by
// key, and reads it back, whole or within a scope. It lets an agent's
// passes be measured, and compared, with the kernel left out.
type memoryDP struct {
	mu       sync.Mutex
	objs     map[string]plan.Resource
	executed []plan.Action
}

func newMemoryDP() *memoryDP { return &memoryDP{objs: map[string]plan.Resource{}} }

func (d *memoryDP) Observe(infra string, hints []plan.Resource) ([]plan.Resource, error) {
	return d.ObserveScope(infra, nil, hints)
}

func (d *memoryDP) ObserveScope(_ string, scope plan.Scope, _ []plan.Resource) ([]plan.Resource, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []plan.Resource
	for _, k := range slices.Sorted(maps.Keys(d.objs)) {
		if r := d.objs[k]; scope.Holds(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (d *memoryDP) Execute(a plan.Action) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.executed = append(d.executed, a)
	if a.Old != nil {
		delete(d.objs, a.Old.Key())
	}
	if a.New != nil {
		d.objs[a.New.Key()] = *a.New
	}
	return nil
}

func (d *memoryDP) Probe([]plan.Resource) error { return nil }

// takeExecuted returns the actions executed since it was last called.
func (d *memoryDP) takeExecuted() []plan.Action {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.executed
	d.executed = nil
	return out
}

// memoryCluster is a cluster that holds its records in memory and takes
// no reports.
type memoryCluster struct {
	mu   sync.Mutex
	recs map[string]*store.Record
}

func (c *memoryCluster) List() ([]*store.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*store.Record
	for _, k := range slices.Sorted(maps.Keys(c.recs)) {
		out = append(out, c.recs[k])
	}
	return out, nil
}

func (c *memoryCluster) put(name, src string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recs == nil {
		c.recs = map[string]*store.Record{}
	}
	gen := 1
	if old, ok := c.recs[name]; ok {
		gen = old.Generation + 1
	}
	c.recs[name] = &store.Record{Name: name, SpecFile: name + ".yaml", Spec: []byte(src), Generation: gen}
}

func (c *memoryCluster) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.recs, name)
}

var errNoReports = errors.New("this cluster takes no reports")

func (c *memoryCluster) Reporter(string, string, time.Duration) (*etcdstore.Reporter, error) {
	return nil, errNoReports
}

func (c *memoryCluster) WatchInfra(ctx context.Context) <-chan struct{} { return make(chan struct{}) }

// scaleSpec is the spec a cluster stores for n networks of two VMs each,
// network i on hosts hv(i%3+1) and hv((i+1)%3+1), their VNIs pinned, and
// extra networks more with their VMs on hv1 and hv2.
func scaleSpec(name string, n, extra int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nhosts:\n", name)
	for h := 1; h <= 3; h++ {
		fmt.Fprintf(&b, "  - {name: hv%d, underlay: 192.0.2.%d}\n", h, h)
	}
	b.WriteString("networks:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {name: n%d, subnet: 10.%d.%d.0/24, vni: %d}\n", i, i/256, i%256, i+1)
	}
	for k := 0; k < extra; k++ {
		fmt.Fprintf(&b, "  - {name: x%d, subnet: 10.250.%d.0/24, vni: %d}\n", k, k, 100000+k)
	}
	b.WriteString("vms:\n")
	for i := 0; i < n; i++ {
		for j := 0; j < 2; j++ {
			fmt.Fprintf(&b, "  - {name: v%d-%d, host: hv%d, nics: [{network: n%d, ip: 10.%d.%d.%d/24}]}\n",
				i, j, (i+j)%3+1, i, i/256, i%256, 10+j)
		}
	}
	for k := 0; k < extra; k++ {
		fmt.Fprintf(&b, "  - {name: x%d-0, host: hv1, nics: [{network: x%d, ip: 10.250.%d.10/24}]}\n", k, k, k)
		fmt.Fprintf(&b, "  - {name: x%d-1, host: hv2, nics: [{network: x%d, ip: 10.250.%d.11/24}]}\n", k, k, k)
	}
	return b.String()
}

// newMemoryAgent is hv1's agent over a cluster and kernel in memory, with
// its local record in dir.
func newMemoryAgent(t testing.TB, c *memoryCluster, dp *memoryDP, dir string, trace io.Writer) *Agent {
	t.Helper()
	local, err := store.OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	return &Agent{Cluster: c, Local: local, DP: dp, Host: "hv1", HostNS: "hv1", Trace: trace}
}

// TestPassScale measures hv1's agent, with the kernel in memory, adding
// one network to VNET_AGENT_BENCH networks (1,000 unless set): the pass's
// trace and its CPU time. Run it with -v.
func TestPassScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VNET_AGENT_BENCH"))
	if n <= 0 {
		t.Skip("set VNET_AGENT_BENCH=<networks> to measure")
	}
	c, dp := &memoryCluster{}, newMemoryDP()
	c.put("big", scaleSpec("big", n, 0))
	var trace strings.Builder
	a := newMemoryAgent(t, c, dp, t.TempDir(), &trace)
	start := time.Now()
	a.reconcile(false)
	t.Logf("first pass: %s, %d objects", time.Since(start).Round(time.Millisecond), len(dp.objs))
	dp.takeExecuted()
	if path := os.Getenv("VNET_AGENT_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	for round := range 3 {
		c.put("big", scaleSpec("big", n, round+1))
		trace.Reset()
		cpu0 := cpuTime()
		start = time.Now()
		a.reconcile(false)
		t.Logf("add one network to %d: %s (CPU %s), %d actions; trace:\n%s", n+round,
			time.Since(start).Round(time.Millisecond), (cpuTime() - cpu0).Round(time.Millisecond), len(dp.takeExecuted()), trace.String())
	}
}
