package etcdstore

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/store"
)

// freePort is a loopback port no one listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// An etcd left at its default request limit (1.5 MiB) refuses a record
// that fits only without its spec's encoding: it is stored without it,
// by Put and by PutIf alike.
func TestTooLargeWithEncodingIsStoredWithout(t *testing.T) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("no etcd binary to run at its default request limit")
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--data-dir", t.TempDir(), "--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "default="+peer,
		"--log-level", "error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var s *Store
	for deadline := time.Now().Add(20 * time.Second); s == nil; {
		if s, err = Open(Options{Endpoints: []string{client}}); err != nil && time.Now().After(deadline) {
			t.Fatalf("etcd did not start: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() { s.Close() })

	for i, put := range []func(r *store.Record) error{
		func(r *store.Record) error { _, err := s.PutIf(r, 0); return err },
		func(r *store.Record) error { return s.Put(r) },
	} {
		name := fmt.Sprintf("mid%d", i)
		r := record(name, 1)
		r.Spec = []byte("name: " + name + "\n" + strings.Repeat("#", 1<<20))
		r.SpecEncoded = bytes.Repeat([]byte{0xa5}, 600<<10)
		if err := put(r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := s.Get(name)
		if err != nil || !bytes.Equal(got.Spec, r.Spec) || got.SpecEncoded != nil {
			t.Fatalf("%s: stored %d bytes of spec and %d of encoding, want %d and none: %v", name, len(got.Spec), len(got.SpecEncoded), len(r.Spec), err)
		}
	}
}
