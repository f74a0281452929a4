package etcdstore

import (
	"errors"
	"testing"

	"github.com/vnet-project/vnet/internal/store"
)

// Every vnet that opens one prefix must mark namespaces with the same ID,
// or hosts would refuse each other's objects.
func TestIDIsSharedByEveryClient(t *testing.T) {
	srv := startEtcd(t)
	a, b := openStore(t, srv.Endpoint()), openStore(t, srv.Endpoint())
	idA, err := a.loadID()
	if err != nil || idA == "" {
		t.Fatalf("ID: %q, %v", idA, err)
	}
	if idB := b.ID(); idB != idA {
		t.Errorf("second client's ID %q, first's %q", idB, idA)
	}
}

func TestLockTakesTurnsPerInfrastructure(t *testing.T) {
	srv := startEtcd(t)
	a, b := openStore(t, srv.Endpoint()), openStore(t, srv.Endpoint())
	unlock, err := a.Lock("web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock("web"); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second lock of web: %v, want ErrLocked", err)
	}
	other, err := b.Lock("db")
	if err != nil {
		t.Fatalf("lock of another infrastructure: %v", err)
	}
	other()
	unlock()
	again, err := b.Lock("web")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
}
