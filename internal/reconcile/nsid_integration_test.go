package reconcile_test

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/nstest"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// markCounter is the real dataplane, noting whose marks the ownership
// check reads (by entering them).
type markCounter struct {
	*dataplane.Linux
	mu    sync.Mutex
	asked []string
	// identified are the namespaces whose IDs were read.
	identified []string
}

func (m *markCounter) NamespaceIDs(names []string) map[string]uint64 {
	m.mu.Lock()
	m.identified = append(m.identified, names...)
	m.mu.Unlock()
	return m.Linux.NamespaceIDs(names)
}

// identifiedNow returns and forgets whose IDs were read.
func (m *markCounter) identifiedNow() []string { return m.take(&m.identified) }

func (m *markCounter) Marks(namespaces, cgroups []string) (map[string]string, error) {
	m.mu.Lock()
	m.asked = append(m.asked, namespaces...)
	m.mu.Unlock()
	return m.Linux.Marks(namespaces, cgroups)
}

// read returns and forgets whose marks were read.
func (m *markCounter) read() []string { return m.take(&m.asked) }

// take returns, sorted, and forgets the names a list noted.
func (m *markCounter) take(noted *[]string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := *noted
	*noted = nil
	slices.Sort(out)
	return out
}

// countingEngine is an engine on st (a new one when nil) whose dataplane,
// its own, counts the marks it reads. It skips the test on a kernel that
// tells no namespace's ID.
func countingEngine(t *testing.T, st store.Store) (*reconcile.Engine, *markCounter) {
	t.Helper()
	if st == nil {
		st = nstest.Engine(t).Store // cleaned up with that engine
	}
	dp, err := dataplane.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dp.Close)
	if boot, _ := dp.NamespaceBoot(); boot == "" {
		t.Skip("this kernel tells no namespace's ID (NS_GET_ID, Linux 6.18)")
	}
	mc := &markCounter{Linux: dp}
	return &reconcile.Engine{DP: mc, Store: st}, mc
}

// recordedNamespaceNames is the sorted names of the namespaces a record
// names.
func recordedNamespaceNames(rec *store.Record) []string {
	var out []string
	for _, r := range rec.Realized {
		if r.Kind == plan.KindNetns {
			out = append(out, r.Name)
		}
	}
	slices.Sort(out)
	return out
}

// An apply records the ID of each namespace it made, for this boot and
// this store's mark, and the next one reads no mark of those.
func TestRecordKeepsNamespaceIDs(t *testing.T) {
	eng, mc := countingEngine(t, nil)
	infra := nstest.Infra("itnsid")
	t.Cleanup(func() { _, _ = eng.Destroy(infra) })
	doc, _ := nstest.Apply(t, eng, small(infra))
	rec, err := eng.Store.Get(infra)
	if err != nil {
		t.Fatal(err)
	}
	names := recordedNamespaceNames(rec)
	ids := rec.Namespaces
	if ids == nil {
		t.Fatal("the record holds no namespace IDs")
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if ids.Boot != strings.TrimSpace(string(boot)) {
		t.Errorf("IDs of boot %q, want this one, %q", ids.Boot, boot)
	}
	if want := (plan.Mark{Infra: infra, Store: eng.Store.ID(), Dir: eng.Store.Location()}).String(); ids.Mark != want {
		t.Errorf("IDs noted with mark %q, want %q", ids.Mark, want)
	}
	now := mc.NamespaceIDs(names)
	for _, n := range names {
		if id := ids.IDs[n]; id == 0 || id != now[n] {
			t.Errorf("%s: recorded ID %d, the namespace's is %d", n, id, now[n])
		}
	}
	mc.read()
	res, err := eng.Apply(doc)
	if err != nil || !res.Plan.Empty() {
		t.Fatalf("a further apply: %v\n%s", err, res.Plan)
	}
	if read := mc.read(); len(read) > 0 {
		t.Errorf("a further apply read the marks of %v", read)
	}
}

// A namespace deleted and made again by hand under the same name (its
// inode may well be the old one's) has another ID: the next apply reads
// its mark and, finding another store's, refuses as it always has.
func TestNamespaceMadeAnewIsNotThisStores(t *testing.T) {
	eng, mc := countingEngine(t, nil)
	var log bytes.Buffer
	eng.Log = &log
	infra := nstest.Infra("itnsnew")
	t.Cleanup(func() { _, _ = eng.Destroy(infra) })
	doc, _ := nstest.Apply(t, eng, small(infra))
	vm := ns(infra, "vm1")
	before := mc.NamespaceIDs([]string{vm})[vm]
	oldIno := statIno(t, vm)
	if err := netns.DeleteNamed(vm); err != nil {
		t.Fatal(err)
	}
	makeNamespace(t, vm) // removed again when the test ends
	other := plan.Mark{Infra: infra, Store: "00000000000000bb", Dir: "/srv/other"}.String()
	setMark(t, vm, other)
	if after := mc.NamespaceIDs([]string{vm})[vm]; after == before {
		t.Fatalf("the namespace made anew has the old one's ID %d", after)
	}
	t.Logf("inode before %d, after %d", oldIno, statIno(t, vm))
	mc.read()
	_, err := eng.Apply(doc)
	if !errors.Is(err, reconcile.ErrNotOwned) {
		t.Errorf("apply over a namespace made anew by another store: %v", err)
	}
	if read := mc.read(); !slices.Equal(read, []string{vm}) {
		t.Errorf("read the marks of %v, want of %s alone", read, vm)
	}
	if !strings.Contains(log.String(), "not marked as this store's") {
		t.Errorf("the apply does not say why it read everything:\n%s", log.String())
	}
}

// statIno is the inode of a named namespace's entry.
func statIno(t *testing.T, name string) uint64 {
	t.Helper()
	st, err := os.Stat(dataplane.NetnsDir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// A record without namespace IDs (an older build's) has every mark read,
// as before; the apply then records the IDs, and the next one reads none.
func TestRecordWithoutNamespaceIDsReadsMarks(t *testing.T) {
	first := nstest.Engine(t)
	infra := nstest.Infra("itnsold")
	doc, _ := nstest.Apply(t, first, small(infra))
	rec, err := first.Store.Get(infra)
	if err != nil {
		t.Fatal(err)
	}
	names := recordedNamespaceNames(rec)
	rec.Namespaces = nil
	if err := first.Store.Put(rec); err != nil {
		t.Fatal(err)
	}
	// A new command: a dataplane that has seen none of the namespaces.
	eng, mc := countingEngine(t, first.Store)
	res, err := eng.Apply(doc)
	if err != nil || !res.Plan.Empty() {
		t.Fatalf("apply: %v\n%s", err, res.Plan)
	}
	if read := mc.read(); !slices.Equal(read, names) {
		t.Errorf("read the marks of %v, want of %v", read, names)
	}
	rec, err = eng.Store.Get(infra)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Namespaces == nil || len(rec.Namespaces.IDs) != len(names) {
		t.Fatalf("the apply recorded the IDs %+v, want those of %v", rec.Namespaces, names)
	}
	if res, err := eng.Apply(doc); err != nil || !res.Plan.Empty() {
		t.Fatalf("a further apply: %v\n%s", err, res.Plan)
	}
	if read := mc.read(); len(read) > 0 {
		t.Errorf("a further apply read the marks of %v", read)
	}
}

// A change of one VM checks the namespaces it touches alone, by their
// IDs, and records the IDs of the others as noted: a namespace it does
// not touch, made anew by another store meanwhile, is left to the next
// apply that touches it or changes nothing, which refuses it.
func TestOneVMChangeChecksItsNamespaces(t *testing.T) {
	first, _ := countingEngine(t, nil)
	infra := nstest.Infra("itnsone")
	t.Cleanup(func() { _, _ = first.Destroy(infra) })
	two := strings.Replace(small(infra), "vms:\n", "vms:\n  - {name: vm2, host: esx1, nics: [{portgroup: pg, ip: 10.71.0.2/24}]}\n", 1)
	nstest.Apply(t, first, two)
	before, err := first.Store.Get(infra)
	if err != nil {
		t.Fatal(err)
	}
	// Another process: its dataplane has seen no mark.
	eng, mc := countingEngine(t, first.Store)
	var log bytes.Buffer
	eng.Log = &log
	vm2 := ns(infra, "vm2")
	if err := netns.DeleteNamed(vm2); err != nil {
		t.Fatal(err)
	}
	makeNamespace(t, vm2)
	setMark(t, vm2, plan.Mark{Infra: infra, Store: "00000000000000bb", Dir: "/srv/other"}.String())
	mc.read()
	mc.identifiedNow()
	moved, err := spec.Load("moved.yaml", []byte(strings.Replace(two, "10.71.0.1/24", "10.71.0.9/24", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Apply(moved); err != nil {
		t.Fatalf("a change of vm1 beside another store's vm2: %v\n%s", err, log.String())
	}
	if got, want := mc.identifiedNow(), []string{ns(infra, "vm1")}; !slices.Equal(got, want) {
		t.Errorf("a change of vm1 read the IDs of %v, want of %v", got, want)
	}
	if read := mc.read(); len(read) > 0 {
		t.Errorf("a change of vm1 read the marks of %v", read)
	}
	after, err := eng.Store.Get(infra)
	if err != nil {
		t.Fatal(err)
	}
	if after.Namespaces == nil || !maps.Equal(after.Namespaces.IDs, before.Namespaces.IDs) {
		t.Errorf("namespace IDs recorded %v, want those noted before, %v", after.Namespaces, before.Namespaces)
	}
	// An apply that changes nothing checks all the record names.
	if _, err := eng.Apply(moved); !errors.Is(err, reconcile.ErrNotOwned) {
		t.Errorf("an apply changing nothing beside another store's vm2: %v", err)
	}
	if read := mc.read(); !slices.Equal(read, []string{vm2}) {
		t.Errorf("read the marks of %v, want of %s alone", read, vm2)
	}
}
