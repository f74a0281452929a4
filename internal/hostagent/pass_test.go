package hostagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// memoryDP is a kernel in memory: it holds what it was told to make, by
// key, and reads it back, whole or within a scope. It lets an agent's
// passes be measured, and compared, with the kernel left out.
type memoryDP struct {
	mu   sync.Mutex
	objs map[string]plan.Resource
	// byPlace holds the keys of the objects by where they are: namespace,
	// then link ("" for the namespace as a whole), as plan.Scope places
	// them, so that a scoped observation reads only what its scope names.
	byPlace map[string]map[string]map[string]bool
	// infra is, by key, the infrastructure whose apply made each object,
	// and observing the infrastructure the steps that follow are of: an
	// observation sees one infrastructure's objects, as the kernel's does.
	infra     map[string]string
	observing string
	executed  []plan.Action
	sweeps    int
	// failDeletes is how many deletions fail from now on, as a kernel
	// that refuses them would.
	failDeletes int
}

func newMemoryDP() *memoryDP {
	return &memoryDP{objs: map[string]plan.Resource{}, byPlace: map[string]map[string]map[string]bool{}, infra: map[string]string{}}
}

func (d *memoryDP) Observe(infra string, hints []plan.Resource) ([]plan.Resource, error) {
	return d.ObserveScope(infra, nil, hints)
}

func (d *memoryDP) ObserveScope(infra string, scope plan.Scope, _ []plan.Resource) ([]plan.Resource, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.observing = infra
	keys := map[string]bool{}
	held := func(k string) {
		if r := d.objs[k]; scope.Holds(r) && d.infra[k] == infra {
			keys[k] = true
		}
	}
	if scope.Full() {
		for k := range d.objs {
			held(k)
		}
	}
	for ns, links := range scope {
		for link, ks := range d.byPlace[ns] {
			if links != nil && (link == "" || !links[link]) {
				continue // what is there is not all in the scope
			}
			for k := range ks {
				held(k)
			}
		}
	}
	var out []plan.Resource
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		out = append(out, d.objs[k])
	}
	return out, nil
}

// memoryPlace is a link of a namespace, or (link "") the namespace itself.
type memoryPlace struct{ ns, link string }

// placesOf are where a resource is, as plan.Scope places it: the links it
// is or sits on, or its namespace for what belongs to one as a whole.
func placesOf(r plan.Resource) []memoryPlace {
	switch r.Kind {
	case plan.KindVeth:
		return []memoryPlace{{r.A.NS, r.A.Name}, {r.B.NS, r.B.Name}}
	case plan.KindBridge, plan.KindVxlan, plan.KindDevice:
		return []memoryPlace{{r.NS, r.Name}}
	case plan.KindNetns, plan.KindFirewall, plan.KindCgroup:
		return []memoryPlace{{r.Namespace(), ""}}
	}
	return []memoryPlace{{r.NS, r.Link}}
}

func (d *memoryDP) Execute(a plan.Action) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a.New == nil && d.failDeletes > 0 {
		d.failDeletes--
		return fmt.Errorf("delete %s: device or resource busy", a.Old.Key())
	}
	d.executed = append(d.executed, a)
	if a.Old != nil {
		k := a.Old.Key()
		for _, p := range placesOf(d.objs[k]) {
			delete(d.byPlace[p.ns][p.link], k)
		}
		delete(d.objs, k)
	}
	if a.New != nil {
		k := a.New.Key()
		d.objs[k] = *a.New
		d.infra[k] = d.observing
		for _, p := range placesOf(*a.New) {
			if d.byPlace[p.ns] == nil {
				d.byPlace[p.ns] = map[string]map[string]bool{}
			}
			if d.byPlace[p.ns][p.link] == nil {
				d.byPlace[p.ns][p.link] = map[string]bool{}
			}
			d.byPlace[p.ns][p.link][k] = true
		}
	}
	return nil
}

func (d *memoryDP) Probe([]plan.Resource) error { return nil }

// Sweep finds nothing a killed command left, and counts that it looked.
func (d *memoryDP) Sweep(string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweeps++
	return nil, nil
}

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
	rec := &store.Record{Name: name, SpecFile: name + ".yaml", Spec: []byte(src), Generation: gen}
	// As vnet apply --etcd stores a spec that validated: with its encoding,
	// which the agent makes its spec of.
	if doc, err := spec.Load(rec.SpecFile, rec.Spec); err == nil {
		rec.SpecEncoded = speccache.EncodeValidated(doc)
	}
	c.recs[name] = rec
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

// ClaimHost claims nothing: a cluster in memory has one agent.
func (c *memoryCluster) ClaimHost(string, time.Duration) (*etcdstore.HostClaim, error) {
	return nil, nil
}

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

// TestPassScale measures hv1's agent (VNET_AGENT_HOST's when set), with
// the kernel in memory, adding one network to VNET_AGENT_BENCH networks,
// VNET_AGENT_ROUNDS times (3 unless set), on hv1 and hv2: each pass's
// trace and its CPU time. VNET_AGENT_PORTS=tap makes the VMs guests on
// TAPs. Run it with -v.
func TestPassScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VNET_AGENT_BENCH"))
	if n <= 0 {
		t.Skip("set VNET_AGENT_BENCH=<networks> to measure")
	}
	c, dp := &memoryCluster{}, newMemoryDP()
	ports := func(src string) string { return src }
	if os.Getenv("VNET_AGENT_PORTS") == "tap" {
		ports = onTaps
	}
	c.put("big", ports(scaleSpec("big", n, 0)))
	var trace strings.Builder
	a := newMemoryAgent(t, c, dp, t.TempDir(), &trace)
	if h := os.Getenv("VNET_AGENT_HOST"); h != "" {
		a.Host, a.HostNS = h, h // hv3 carries none of the networks added
	}
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
	rounds := 3
	if r, err := strconv.Atoi(os.Getenv("VNET_AGENT_ROUNDS")); err == nil && r > 0 {
		rounds = r
	}
	for round := range rounds {
		c.put("big", ports(scaleSpec("big", n, round+1)))
		trace.Reset()
		cpu0 := cpuTime()
		start = time.Now()
		a.reconcile(false)
		t.Logf("add one network to %d: %s (CPU %s), %d actions; trace:\n%s", n+round,
			time.Since(start).Round(time.Millisecond), (cpuTime() - cpu0).Round(time.Millisecond), len(dp.takeExecuted()), trace.String())
	}
}

// applyPass makes an agent over dp and dir run one pass (full or not) of
// the spec src, and returns what it executed and the local record.
func applyPass(t *testing.T, c *memoryCluster, a *Agent, dp *memoryDP, src string, full bool) ([]plan.Action, *store.Record) {
	t.Helper()
	c.put("inc", src)
	var log strings.Builder
	a.Log = &log
	a.reconcile(full)
	if strings.Contains(log.String(), "failed") || strings.Contains(log.String(), "does not load") {
		t.Fatalf("pass failed:\n%s", log.String())
	}
	rec, err := a.Local.Get("inc")
	if err != nil {
		t.Fatalf("local record: %v", err)
	}
	return dp.takeExecuted(), rec
}

// sortedResources is rs sorted by key, for comparing records whose order
// the store does not keep, without the namespaces' marks, which name the
// store.
func sortedResources(rs []plan.Resource) []plan.Resource {
	out := slices.Clone(rs)
	for i := range out {
		out[i].Mark = ""
	}
	slices.SortFunc(out, func(a, b plan.Resource) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

func actionText(as []plan.Action) string {
	var b strings.Builder
	for _, a := range as {
		b.WriteString(a.String() + "\n")
	}
	return b.String()
}

// A pass that reads only what a change touches does exactly what a full
// pass does, and records the same; an agent started afresh on the result
// changes nothing, in a full pass or not.
func TestIncrementalPassIsFullPass(t *testing.T) {
	base := scaleSpec("inc", 12, 2)
	edit := func(old, new string) string {
		if !strings.Contains(base, old) {
			t.Fatalf("base spec holds no %q", old)
		}
		return strings.Replace(base, old, new, 1)
	}
	cases := []struct{ name, next string }{
		{"no change", base},
		{"add a network", scaleSpec("inc", 12, 3)},
		{"remove a network", scaleSpec("inc", 12, 1)},
		{"remove a network of other hosts", strings.Replace(strings.Replace(strings.Replace(base,
			"  - {name: n5, subnet: 10.0.5.0/24, vni: 6}\n", "", 1),
			"  - {name: v5-0, host: hv3, nics: [{network: n5, ip: 10.0.5.10/24}]}\n", "", 1),
			"  - {name: v5-1, host: hv1, nics: [{network: n5, ip: 10.0.5.11/24}]}\n", "", 1)},
		{"change a network's MTU", edit("{name: n3, subnet: 10.0.3.0/24, vni: 4}", "{name: n3, subnet: 10.0.3.0/24, vni: 4, mtu: 1400}")},
		{"change a network's VNI", edit("vni: 4}", "vni: 4444}")},
		{"add a VM to a network", strings.Replace(base, "vms:\n", "vms:\n  - {name: extra, host: hv1, nics: [{network: n4, ip: 10.0.4.20/24}]}\n", 1)},
		{"remove a VM", edit("  - {name: v3-0, host: hv1, nics: [{network: n3, ip: 10.0.3.10/24}]}\n", "")},
		{"move a VM to another host", edit("{name: v3-0, host: hv1,", "{name: v3-0, host: hv2,")},
		{"change a VM's address", edit("ip: 10.0.3.10/24", "ip: 10.0.3.30/24")},
		{"add a port to a VM", edit("nics: [{network: n3, ip: 10.0.3.10/24}]", "nics: [{network: n3, ip: 10.0.3.10/24}, {network: n4, ip: 10.0.4.30/24}]")},
		{"remove a port of a VM", strings.Replace(edit("nics: [{network: n3, ip: 10.0.3.10/24}]", "nics: [{network: n3, ip: 10.0.3.10/24}, {network: n4, ip: 10.0.4.30/24}]"),
			", {network: n4, ip: 10.0.4.30/24}]", "]", 1)},
		{"disconnect a port", edit("{network: n3, ip: 10.0.3.10/24}", "{network: n3, ip: 10.0.3.10/24, connected: false}")},
	}
	for _, taps := range []bool{false, true} {
		for _, tc := range cases {
			name := tc.name
			if taps {
				name += ", VMs on TAPs"
			}
			from := base
			if tc.name == "remove a port of a VM" {
				from = edit("nics: [{network: n3, ip: 10.0.3.10/24}]", "nics: [{network: n3, ip: 10.0.3.10/24}, {network: n4, ip: 10.0.4.30/24}]")
			}
			if taps {
				from, tc.next = onTaps(from), onTaps(tc.next)
			}
			incrementalIsFull(t, name, from, tc.next)
		}
	}
}

// incrementalIsFull checks that an agent's incremental pass from the spec
// from to next does what a full pass does, and records the same.
func incrementalIsFull(t *testing.T, name, from, next string) {
	t.Run(name, func(t *testing.T) {
		type world struct {
			c   *memoryCluster
			dp  *memoryDP
			dir string
			a   *Agent
		}
		newWorld := func() *world {
			w := &world{c: &memoryCluster{}, dp: newMemoryDP(), dir: t.TempDir()}
			w.a = newMemoryAgent(t, w.c, w.dp, w.dir, nil)
			applyPass(t, w.c, w.a, w.dp, from, true)
			return w
		}
		inc, full := newWorld(), newWorld()
		incActs, incRec := applyPass(t, inc.c, inc.a, inc.dp, next, false)
		fullActs, fullRec := applyPass(t, full.c, full.a, full.dp, next, true)
		if got, want := actionText(incActs), actionText(fullActs); got != want {
			t.Errorf("incremental pass did\n%swant, as a full pass does,\n%s", got, want)
		}
		if !slices.Equal(sortedResources(incRec.Realized), sortedResources(fullRec.Realized)) ||
			string(incRec.Spec) != string(fullRec.Spec) || incRec.Generation != fullRec.Generation {
			t.Errorf("incremental pass recorded %d resources, generation %d; a full pass %d, generation %d",
				len(incRec.Realized), incRec.Generation, len(fullRec.Realized), fullRec.Generation)
		}
		if !slices.Equal(sortedResources(slices.Collect(maps.Values(inc.dp.objs))), sortedResources(slices.Collect(maps.Values(full.dp.objs)))) {
			t.Errorf("the kernels differ: %d objects after the incremental pass, %d after the full one", len(inc.dp.objs), len(full.dp.objs))
		}
		if got := inc.a.realized("inc"); got != len(incRec.Realized) {
			t.Errorf("the agent counts %d objects standing, its record %d", got, len(incRec.Realized))
		}
		if p := plan.Diff(sortedResources(incRec.Realized), sortedResources(slices.Collect(maps.Values(inc.dp.objs)))); !p.Empty() {
			t.Errorf("the record is not the kernel:\n%s", p)
		}
		// An agent started afresh on the same host and record.
		again := newMemoryAgent(t, inc.c, inc.dp, inc.dir, nil)
		for _, f := range []bool{false, true} {
			if acts, _ := applyPass(t, inc.c, again, inc.dp, next, f); len(acts) > 0 {
				t.Errorf("a restarted agent's pass (full %v) did\n%s", f, actionText(acts))
			}
		}
	})
}

// onTaps makes every VM of a spec a guest whose vNICs are TAPs (attach:
// {tap: ...}), named after the VM and the vNIC's place, as a hypervisor's
// VMs are.
func onTaps(src string) string {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		m := vmLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		k := 0
		lines[i] = vnicOnNetwork.ReplaceAllStringFunc(l, func(nic string) string {
			k++
			return fmt.Sprintf("%s, attach: {tap: t%s-%d}", nic, m[1], k-1)
		})
	}
	return strings.Join(lines, "\n")
}

var (
	vmLine        = regexp.MustCompile(`^  - \{name: ([^,]+), host: `)
	vnicOnNetwork = regexp.MustCompile(`\{network: [^,]+, ip: [^,}]+`)
)

// A stored spec that does not load leaves what stands on the host, and its
// record, until one that loads says otherwise.
func TestSpecThatDoesNotLoadKeepsWhatStands(t *testing.T) {
	c, dp := &memoryCluster{}, newMemoryDP()
	a := newMemoryAgent(t, c, dp, t.TempDir(), nil)
	_, rec := applyPass(t, c, a, dp, scaleSpec("inc", 3, 1), false)
	c.put("inc", "name: inc\nvms: [{name: broken\n")
	var log strings.Builder
	a.Log = &log
	a.reconcile(false)
	if !strings.Contains(log.String(), "does not load") {
		t.Fatalf("no complaint about the spec:\n%s", log.String())
	}
	if acts := dp.takeExecuted(); len(acts) > 0 {
		t.Errorf("the pass did\n%s", actionText(acts))
	}
	if again, err := a.Local.Get("inc"); err != nil || len(again.Realized) != len(rec.Realized) {
		t.Errorf("the record after the pass: %v, %v", again, err)
	}
}

// An agent's pass for a change does not sweep for what killed commands
// left when the last apply finished; a full pass does, and so does the
// pass after an apply that did not finish.
func TestChangePassSweepsOnlyAfterAnUnfinishedApply(t *testing.T) {
	c, dp := &memoryCluster{}, newMemoryDP()
	a := newMemoryAgent(t, c, dp, t.TempDir(), nil)
	pass := func(src string, full bool) int {
		t.Helper()
		before := dp.sweeps
		applyPass(t, c, a, dp, src, full)
		return dp.sweeps - before
	}
	if n := pass(scaleSpec("inc", 6, 0), true); n != 1 {
		t.Errorf("the first pass (full, as on start) swept %d times, want 1", n)
	}
	if n := pass(scaleSpec("inc", 6, 1), false); n != 0 {
		t.Errorf("a change's pass swept %d times, want 0", n)
	}
	if n := pass(scaleSpec("inc", 6, 2), true); n != 1 {
		t.Errorf("a full pass swept %d times, want 1", n)
	}
	if err := a.Local.(store.Pending).SetPending("inc"); err != nil {
		t.Fatal(err)
	}
	if n := pass(scaleSpec("inc", 6, 3), false); n != 1 {
		t.Errorf("the pass after an unfinished apply swept %d times, want 1", n)
	}
}
