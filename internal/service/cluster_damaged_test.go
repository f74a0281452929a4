package service

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vnet-project/vnet/internal/store/etcdstore/etcdtest"
)

// Over etcd, a damaged record is its infrastructure's alone: the list
// holds it beside the others, status shows it damaged while the others'
// are as ever, and an apply or a destroy of it replaces or removes it.
func TestClusterDamagedRecordIsItsInfrastructuresAlone(t *testing.T) {
	st, endpoint := etcdtest.Server(t)
	c := ClusterOf(st, nil)
	ctx := context.Background()
	apply := func(name string) error {
		_, err := c.Apply(ctx, Source{File: specFile(t, strings.Replace(twoHosts, "name: c1", "name: "+name, 1))}, ApplyOptions{})
		return err
	}
	if err := apply("c1"); err != nil {
		t.Fatal(err)
	}
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	damage := func() {
		t.Helper()
		if _, err := raw.Put(ctx, "/vnet/infra/bad", "\x89VNR\x01 not what it says"); err != nil {
			t.Fatal(err)
		}
	}
	damage()
	if list, err := c.List(ctx); err != nil || len(list) != 2 {
		t.Fatalf("list: %v, %v", list, err)
	}
	all, err := c.Status(ctx, nil)
	if err != nil || len(all) != 2 {
		t.Fatalf("status: %v, %v", all, err)
	}
	for _, s := range all {
		switch damaged := s.Cluster.Damaged; s.Name {
		case "bad":
			if !strings.Contains(damaged, "damaged") || len(s.Hosts) != 0 {
				t.Errorf("status of the damaged record: %+v", s.Cluster)
			}
		case "c1":
			if damaged != "" || len(s.Hosts) != 2 {
				t.Errorf("status of the good one: %+v", s.Cluster)
			}
		}
	}
	if err := apply("bad"); err != nil {
		t.Fatalf("apply over the damaged record: %v", err)
	}
	if s, err := c.Status(ctx, []string{"bad"}); err != nil || s[0].Cluster.Damaged != "" {
		t.Fatalf("after the apply: %v, %v", s, err)
	}
	damage()
	if _, err := c.Destroy(ctx, "bad", DestroyOptions{Detail: true}); err != nil {
		t.Fatalf("destroy of the damaged record: %v", err)
	}
}
