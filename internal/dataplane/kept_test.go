package dataplane

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// A dataplane kept between readings reads a namespace made again, not the
// old one, and lets go of a namespace deleted in this process, so that
// the peers of its links in other namespaces go with it.
func TestKeptDataplaneLetsGoOfDeletedNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root to make namespaces; CI runs these as root (sudo go test ./...)")
	}
	vm, sw := fmt.Sprintf("vnet-kept%d.vm", os.Getpid()), fmt.Sprintf("vnet-kept%d.sw", os.Getpid())
	for _, ns := range []string{vm, sw} {
		if err := createNetns(ns, "", ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = deleteNetns(ns) })
	}
	swH, err := openNSHandle(sw)
	if err != nil {
		t.Fatal(err)
	}
	defer swH.close()
	vmNS, err := openNS(vm)
	if err != nil {
		t.Fatal(err)
	}
	peer := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "p-vm"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(vmNS)}
	err = swH.LinkAdd(peer)
	vmNS.Close()
	if err != nil {
		t.Fatal(err)
	}

	dp, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	dp.Refresh()
	if links, err := dp.LinkStates(vm); err != nil || !hasLink(links, "eth0") {
		t.Fatalf("vm's links: %v, %v", links, err)
	}

	if err := deleteNetns(vm); err != nil {
		t.Fatal(err)
	}
	// The kernel tears a namespace down in the background: wait a while.
	deadline := time.Now().Add(5 * time.Second)
	for {
		links, err := dp.LinkStates(sw)
		if err != nil {
			t.Fatal(err)
		}
		if !hasLink(links, "p-vm") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deleted namespace's link outlives it in its peer's namespace: a kept handle holds it")
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := createNetns(vm, "", ""); err != nil {
		t.Fatal(err)
	}
	dp.Refresh()
	if links, err := dp.LinkStates(vm); err != nil || hasLink(links, "eth0") {
		t.Errorf("the namespace made again reads as %v, %v", links, err)
	}
}

func hasLink[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}
