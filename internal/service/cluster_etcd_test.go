package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/store/etcdstore"
	"github.com/vnet-project/vnet/internal/store/etcdstore/etcdtest"
)

const twoHosts = `name: c1
hosts:
  - {name: hv1, underlay: 192.0.2.1, nics: [{name: eth0, speed: 1Gbit}]}
  - {name: hv2, underlay: 192.0.2.2, nics: [{name: eth0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: eth0, hv2: eth0}}]
    portgroups: [{name: pg-vm}]
vms:
  - {name: vm1, host: hv1, nics: [{portgroup: pg-vm, ip: 10.20.0.1/24}]}
  - {name: vm2, host: hv2, nics: [{portgroup: pg-vm, ip: 10.20.0.2/24}]}
`

func specFile(t *testing.T, src string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "c1.yaml")
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// Over etcd an apply stores generations: a dry run stores nothing, an
// unchanged spec stores nothing either, and each is told before any wait;
// the hosts' plan is made only when asked for.
func TestClusterApplyStoresGenerations(t *testing.T) {
	st := etcdtest.Store(t)
	c := ClusterOf(st, nil)
	ctx := context.Background()
	file := specFile(t, twoHosts)
	var told []Stored
	opts := ApplyOptions{Stored: func(s Stored) { told = append(told, s) }}

	dry := opts
	dry.DryRun = true
	res, err := c.Apply(ctx, Source{File: file}, dry)
	if err != nil || res.Stored == nil || res.Stored.Generation != 1 || len(res.Plan) != 0 || len(told) != 0 {
		t.Fatalf("dry run: %+v %v, told %v", res, err, told)
	}
	if _, err := c.Get(ctx, "c1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a dry run stored the spec: %v", err)
	}
	res, err = c.Apply(ctx, Source{File: file}, opts)
	if err != nil || res.Stored.Generation != 1 || res.Executed != 0 || strings.Join(res.Stored.Hosts, ",") != "hv1,hv2" {
		t.Fatalf("apply: %+v %v", res, err)
	}
	res, err = c.Apply(ctx, Source{File: file}, opts)
	if err != nil || !res.Stored.Unchanged || res.Stored.Generation != 1 {
		t.Fatalf("apply again: %+v %v", res, err)
	}
	if len(told) != 2 || told[0].Unchanged || !told[1].Unchanged || told[0].Infra != "c1" {
		t.Errorf("told %+v", told)
	}
	changed := specFile(t, strings.Replace(twoHosts, "10.20.0.2/24", "10.20.0.3/24", 1))
	detail := ApplyOptions{Detail: true, DryRun: true}
	if res, err = c.Apply(ctx, Source{File: changed}, detail); err != nil || res.Stored.Generation != 2 || len(res.Plan) == 0 {
		t.Fatalf("a dry run of a change, with the hosts' plan: %+v %v", res, err)
	}
	if _, err := c.Apply(ctx, Source{File: file}, ApplyOptions{Full: true}); !errors.Is(err, ErrInvalid) {
		t.Errorf("--full over etcd: %v", err)
	}
}

// A wait that runs out of time is ErrTimedOut, naming the hosts not
// there; destroy's wait without reports ends at once.
func TestClusterWaits(t *testing.T) {
	st := etcdtest.Store(t)
	c := ClusterOf(st, nil)
	ctx := context.Background()
	file := specFile(t, twoHosts)
	rp, err := st.Reporter("c1", "hv1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	var current []string
	opts := ApplyOptions{Wait: 500 * time.Millisecond, Progress: func(ev WaitEvent) {
		if ev.State == HostCurrent {
			current = append(current, ev.Host)
		}
	}}
	go func() {
		time.Sleep(100 * time.Millisecond)
		rp.Report(etcdstore.Report{Generation: 1, Resources: 3})
	}()
	_, err = c.Apply(ctx, Source{File: file}, opts)
	if !errors.Is(err, ErrTimedOut) || !strings.Contains(err.Error(), "--wait=500ms ran out") || !strings.Contains(err.Error(), "hv2") {
		t.Fatalf("apply --wait with hv2 silent: %v", err)
	}
	if strings.Join(current, ",") != "hv1" {
		t.Errorf("current: %v", current)
	}
	var removed int
	res, err := c.Destroy(ctx, "c1", DestroyOptions{Removed: func(gen int) { removed = gen }})
	if err != nil || res.Generation != 1 || removed != 1 {
		t.Fatalf("destroy: %+v %v, told %d", res, err, removed)
	}
	// hv1 still reports c1: status shows it destroyed until it withdraws.
	all, err := c.Status(ctx, nil)
	if err != nil || len(all) != 1 || all[0].Cluster == nil || !all[0].Cluster.Removed || all[0].Name != "c1" {
		t.Fatalf("status after destroy, hv1 reporting: %+v %v", all, err)
	}
	rp.Close()
	if all, err = c.Status(ctx, nil); err != nil || len(all) != 0 {
		t.Errorf("status once hv1 withdrew: %+v %v", all, err)
	}
	if _, err := c.Destroy(ctx, "c1", DestroyOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("second destroy: %v", err)
	}
}

// What the etcd back end cannot read is ErrNotHere, after the name is
// known to exist; an unknown one is ErrNotFound first.
func TestClusterReadsNoKernel(t *testing.T) {
	c := ClusterOf(etcdtest.Store(t), nil)
	ctx := context.Background()
	if _, err := c.IOCStats(ctx, "nope", time.Second); !errors.Is(err, ErrNotFound) {
		t.Errorf("ioc of an unknown infrastructure: %v", err)
	}
	if _, err := c.Apply(ctx, Source{File: specFile(t, twoHosts)}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.IOCStats(ctx, "c1", time.Second); !errors.Is(err, ErrNotHere) {
		t.Errorf("ioc over etcd: %v", err)
	}
	if _, err := c.Stats(ctx, "c1", StatsOptions{Window: time.Second}); !errors.Is(err, ErrNotHere) {
		t.Errorf("stats over etcd without a sampler: %v", err)
	}
	if c.ReadsKernel() {
		t.Error("the etcd back end says it reads the kernel")
	}
}

// A back end that cannot reach etcd says so when first used, and closing
// it does not wait for a connection still being made.
func TestClusterUnreachable(t *testing.T) {
	c := OpenCluster([]string{"127.0.0.1:1"}, TLSFiles{}, nil)
	if err := c.Connect(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("connect to nothing: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	bad := OpenCluster([]string{"https://127.0.0.1:1"}, TLSFiles{Cert: "only-a-cert.pem"}, nil)
	if err := bad.Connect(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a certificate without its key: %v", err)
	}
	bad.Close()
}
