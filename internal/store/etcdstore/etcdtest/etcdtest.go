// Package etcdtest gives tests an etcd store over an etcd of their own: an
// embedded single member on loopback, without fsync, gone with the test.
package etcdtest

import (
	"testing"

	"github.com/vnet-project/vnet/internal/etcdserver"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// Store starts an etcd for t and returns a store over it; both close at
// t's cleanup.
func Store(t testing.TB) *etcdstore.Store {
	t.Helper()
	st, _ := Server(t)
	return st
}

// Server is Store, and the etcd's client endpoint, for a test that writes
// keys as another client would.
func Server(t testing.TB) (*etcdstore.Store, string) {
	t.Helper()
	srv, err := etcdserver.Start(etcdserver.Config{DataDir: t.TempDir(), ClientURL: "http://127.0.0.1:0",
		PeerURL: "http://127.0.0.1:0", LogLevel: "error", NoFsync: true})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(srv.Close)
	st, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{srv.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, srv.Endpoint()
}
