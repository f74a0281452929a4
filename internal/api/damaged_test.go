package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vnet-project/vnet/internal/store/etcdstore/etcdtest"
)

// Over etcd, a damaged record is its infrastructure's alone: the list
// holds it beside the others, its status says it is damaged while the
// others' are as ever, and a PUT or a DELETE of it replaces or removes it.
func TestAPIOverEtcdWithADamagedRecord(t *testing.T) {
	st, endpoint := etcdtest.Server(t)
	s, _ := newTestServer(t, func(c *Config) { c.Backend = &Cluster{Store: st} })
	put := func(name string) int {
		t.Helper()
		w, _ := s.do(t, req{method: "PUT", path: "/api/v1/infras/" + name, body: strings.Replace(clusterSpec, "name: c1", "name: "+name, 1),
			ctype: "application/yaml", token: testToken})
		return w.Code
	}
	if code := put("c1"); code != 200 {
		t.Fatalf("PUT c1: %d", code)
	}
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Put(context.Background(), "/vnet/infra/bad", "\x89VNR\x01 not what it says"); err != nil {
		t.Fatal(err)
	}
	w, _ := s.do(t, req{method: "GET", path: "/api/v1/infras"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"bad"`) || !strings.Contains(w.Body.String(), `"c1"`) {
		t.Fatalf("list: %d %s", w.Code, w.Body)
	}
	w, _ = s.do(t, req{method: "GET", path: "/api/v1/infras/bad/status"})
	var bad InfraStatus
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &bad) != nil || bad.Cluster == nil || !strings.Contains(bad.Cluster.Damaged, "damaged") {
		t.Fatalf("status of the damaged record: %d %s", w.Code, w.Body)
	}
	if st := clusterStatusOf(t, s); st.Cluster.Damaged != "" || st.Name != "c1" {
		t.Fatalf("status of the good one: %+v", st.Cluster)
	}
	if code := put("bad"); code != 200 {
		t.Fatalf("PUT over the damaged record: %d", code)
	}
	if rec, err := st.Get("bad"); err != nil || rec.Damage != nil {
		t.Fatalf("after the PUT: %v, %v", rec, err)
	}
	if _, err := raw.Put(context.Background(), "/vnet/infra/bad", "junk"); err != nil {
		t.Fatal(err)
	}
	w, _ = s.do(t, req{method: "DELETE", path: "/api/v1/infras/bad", token: testToken})
	if w.Code != 200 {
		t.Fatalf("DELETE of the damaged record: %d %s", w.Code, w.Body)
	}
}
