package hostagent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
	"github.com/vnet-project/vnet/internal/store/etcdstore/etcdtest"
)

// apart moves a spec's networks to VNIs and addresses other specs of
// scaleSpec do not use, so that both fit on one host.
func apart(src string) string {
	src = vniOf.ReplaceAllStringFunc(src, func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "vni: "))
		return "vni: " + strconv.Itoa(n+500000)
	})
	return strings.ReplaceAll(src, " 10.", " 11.")
}

var vniOf = regexp.MustCompile(`vni: \d+`)

// stored is the record vnet apply --etcd stores of src: with its encoding.
func stored(t *testing.T, name, src string) *store.Record {
	t.Helper()
	doc, err := spec.Load(name+".yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return &store.Record{Name: name, SpecFile: name + ".yaml", Spec: doc.Source, SpecEncoded: speccache.EncodeValidated(doc), Generation: 1}
}

// etcdAgent is hv1's agent over a cluster in etcd, its kernel in memory.
func etcdAgent(t *testing.T, st *etcdstore.Store, dp *memoryDP) *Agent {
	t.Helper()
	local, err := store.OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	a := &Agent{Cluster: st, Local: local, DP: dp, Host: "hv1", HostNS: "hv1", TTL: 2 * time.Second}
	t.Cleanup(a.closeReporters)
	return a
}

// standing are the keys of the objects the local record of infra lists
// that the kernel holds as recorded, sorted.
func standing(t *testing.T, a *Agent, dp *memoryDP, infra string) []string {
	t.Helper()
	rec, err := a.Local.Get(infra)
	if err != nil {
		t.Fatalf("local record of %s: %v", infra, err)
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	var out []string
	for _, r := range rec.Realized {
		r.Mark = ""
		got, ok := dp.objs[r.Key()]
		got.Mark = ""
		if ok && got == r {
			out = append(out, r.Key())
		}
	}
	slices.Sort(out)
	return out
}

// reportOf is hv1's report of infra.
func reportOf(t *testing.T, st *etcdstore.Store, infra string) *etcdstore.Report {
	t.Helper()
	rs, err := st.Reports(infra)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rs {
		if rs[i].Host == "hv1" {
			return &rs[i]
		}
	}
	return nil
}

// One damaged record in etcd is its own infrastructure's: every pass of
// the agent reports it as damaged, leaves what stands of it as it is, and
// converges the others; storing its spec again repairs it. Each kind of
// damage that may stand under /vnet/infra/NAME is tried.
func TestDamagedRecordLeavesTheOthersConverging(t *testing.T) {
	st, endpoint := etcdtest.Server(t)
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	value := func(r *store.Record) string {
		v, err := store.EncodeValue(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	random := make([]byte, 2048)
	for i := range random {
		random[i] = byte(rand.IntN(256))
	}
	big := value(stored(t, "bad", scaleSpec("bad", 300, 0)))
	for _, d := range []struct{ name, value string }{
		{"random bytes", string(random)},
		{"empty", ""},
		{"cut compressed record", big[:len(big)/2]},
		{"JSON of another shape", `{"name": 5}`},
		{"the record of another infrastructure", value(stored(t, "other", scaleSpec("other", 2, 0)))},
		{"YAML that does not parse", value(&store.Record{Name: "bad", Spec: []byte("name: bad\nvms: [{name: x\n")})},
		{"YAML that does not validate", value(&store.Record{Name: "bad", Spec: []byte("name: bad\nvms: [{name: x, host: nowhere}]\n")})},
		{"YAML of another infrastructure", value(stored(t, "bad", scaleSpec("other", 2, 0)))},
	} {
		t.Run(d.name, func(t *testing.T) {
			dp := newMemoryDP()
			a := etcdAgent(t, st, dp)
			for _, r := range []*store.Record{stored(t, "good", apart(scaleSpec("good", 3, 0))), stored(t, "bad", scaleSpec("bad", 3, 0))} {
				if err := st.Put(r); err != nil {
					t.Fatal(err)
				}
			}
			defer func() {
				st.Delete("good")
				st.Delete("bad")
			}()
			a.Reconcile()
			if r := reportOf(t, st, "good"); r == nil || len(r.Errors) > 0 {
				t.Fatalf("the first pass: %+v", r)
			}
			stands := standing(t, a, dp, "bad")
			if len(stands) == 0 || len(standing(t, a, dp, "good")) == 0 {
				t.Fatal("the first pass realized nothing")
			}
			if _, err := raw.Put(context.Background(), "/vnet/infra/bad", d.value); err != nil {
				t.Fatal(err)
			}
			good := stored(t, "good", apart(scaleSpec("good", 3, 1)))
			good.Generation = 2
			if err := st.Put(good); err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			a.Log = &log
			for _, full := range []bool{false, true} {
				a.reconcile(full)
				if r, err := a.Local.Get("good"); err != nil || string(r.Spec) != string(good.Spec) {
					t.Fatalf("the good infrastructure did not converge (full pass %v): %v\n%s", full, err, log.String())
				}
				if got := standing(t, a, dp, "bad"); !slices.Equal(got, stands) {
					t.Fatalf("what stood of the damaged one changed (full pass %v)", full)
				}
				r := reportOf(t, st, "bad")
				if r == nil || len(r.Errors) == 0 || r.Resources == 0 {
					t.Fatalf("the damaged one's report: %+v\n%s", r, log.String())
				}
				if rg := reportOf(t, st, "good"); rg == nil || rg.Generation != 2 || len(rg.Errors) > 0 {
					t.Fatalf("the good one's report: %+v", rg)
				}
			}
			if recs, err := st.List(); err != nil || len(recs) != 2 {
				t.Fatalf("List beside the damaged record: %d records, %v", len(recs), err)
			}
			// Stored again, it converges.
			if err := st.Put(stored(t, "bad", scaleSpec("bad", 3, 1))); err != nil {
				t.Fatal(err)
			}
			a.reconcile(false)
			if r := reportOf(t, st, "bad"); r == nil || len(r.Errors) > 0 {
				t.Fatalf("after the record was stored again: %+v\n%s", r, log.String())
			}
		})
	}
}

// A record whose YAML is valid but whose encoding holds a spec that does
// not validate (a VM named to escape vnet's namespaces) is realized as its
// YAML says, as vnet status shows it: the agent makes no namespace of the
// encoding's.
func TestEncodingOfAnInvalidSpecIsNotRealized(t *testing.T) {
	st := etcdtest.Store(t)
	src := scaleSpec("inc", 3, 0)
	doc, err := spec.Load("inc.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	doc.Spec.VMs[0].Name = "../../evil"
	rec := &store.Record{Name: "inc", SpecFile: "inc.yaml", Spec: []byte(src), SpecEncoded: speccache.EncodeValidated(doc), Generation: 1}
	if err := st.Put(rec); err != nil {
		t.Fatal(err)
	}
	dp := newMemoryDP()
	a := etcdAgent(t, st, dp)
	var log strings.Builder
	a.Log = &log
	a.Reconcile()
	for k := range dp.objs {
		if strings.Contains(k, "evil") {
			t.Fatalf("the agent realized the encoding's invalid spec: %s\n%s", k, log.String())
		}
	}
	want := plan.Model(mustLoad(t, src).Spec, plan.Options{Host: "hv1", HostNS: "hv1"})
	local, err := a.Local.Get("inc")
	if err != nil || len(local.Realized) != len(want) {
		t.Fatalf("realized %d resources, the YAML's model has %d (%v)\n%s", len(local.Realized), len(want), err, log.String())
	}
	if r := reportOf(t, st, "inc"); r == nil || len(r.Errors) > 0 {
		t.Fatalf("report %+v", r)
	}
}

func mustLoad(t *testing.T, src string) *spec.Document {
	t.Helper()
	doc, err := spec.Load("spec.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// A second agent started for a host another agent runs for is refused,
// naming the first; it writes no report, so once it stopped the first
// one's report still stands, and the host is not shown gone.
func TestSecondAgentOfAHostIsRefused(t *testing.T) {
	st := etcdtest.Store(t)
	if err := st.Put(stored(t, "inc", scaleSpec("inc", 3, 0))); err != nil {
		t.Fatal(err)
	}
	first := etcdAgent(t, st, newMemoryDP())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for reportOf(t, st, "inc") == nil {
		if time.Now().After(deadline) {
			t.Fatal("the first agent did not report")
		}
		time.Sleep(50 * time.Millisecond)
	}
	second := etcdAgent(t, st, newMemoryDP())
	err := second.Run(context.Background())
	host, _ := os.Hostname()
	if !errors.Is(err, etcdstore.ErrHostClaimed) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d on %s", os.Getpid(), host)) {
		t.Fatalf("second agent: %v; want ErrHostClaimed naming pid %d on %s", err, os.Getpid(), host)
	}
	// Longer than a report outlives its agent: the first one's stands.
	time.Sleep(3 * time.Second)
	if r := reportOf(t, st, "inc"); r == nil {
		t.Fatal("the refused agent left the host without a report")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("first agent: %v", err)
	}
	// Stopped, the first gave the host up: another may run for it.
	third := etcdAgent(t, st, newMemoryDP())
	ctx3, stop3 := context.WithCancel(context.Background())
	done3 := make(chan error, 1)
	go func() { done3 <- third.Run(ctx3) }()
	time.Sleep(500 * time.Millisecond)
	stop3()
	if err := <-done3; err != nil {
		t.Fatalf("an agent after the first stopped: %v", err)
	}
}
