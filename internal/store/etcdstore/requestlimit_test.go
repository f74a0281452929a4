package etcdstore

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/spec/spectest"
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

// openDefaultEtcd runs the etcd binary at its default request limit (1.5
// MiB), which the embedded member raises, and opens a store on it.
func openDefaultEtcd(t *testing.T) *Store {
	t.Helper()
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
	return s
}

// An etcd left at its default request limit refuses a record that fits
// only without its spec's encoding: it is stored without it, by Put and
// by PutIf alike.
func TestTooLargeWithEncodingIsStoredWithout(t *testing.T) {
	s := openDefaultEtcd(t)
	for i, put := range []func(r *store.Record) error{
		func(r *store.Record) error { _, err := s.PutIf(r, 0); return err },
		func(r *store.Record) error { return s.Put(r) },
	} {
		name := fmt.Sprintf("mid%d", i)
		r := record(name, 1)
		r.Spec = append([]byte("name: "+name+"\n"), incompressible(uint64(i), 1<<20)...)
		r.SpecEncoded = incompressible(uint64(i)+10, 600<<10)
		if err := put(r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := s.Get(name)
		if err != nil || !bytes.Equal(got.Spec, r.Spec) || got.SpecEncoded != nil {
			t.Fatalf("%s: stored %d bytes of spec and %d of encoding, want %d and none: %v", name, len(got.Spec), len(got.SpecEncoded), len(r.Spec), err)
		}
	}
}

// A spec as large specs are written, 3 MiB of YAML, is stored whole with
// its encoding in an etcd left at its default request limit: compressed,
// its record is a small part of that limit.
func TestLargeSpecFitsTheDefaultRequestLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a spec of 16,000 networks")
	}
	s := openDefaultEtcd(t)
	doc, err := spec.Load("big.yaml", spectest.Networks(16000))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Source) < 3<<20 {
		t.Fatalf("the spec is %d bytes, want 3 MiB", len(doc.Source))
	}
	r := &store.Record{Name: "big", SpecFile: doc.File, Spec: doc.Source, SpecEncoded: speccache.EncodeValidated(doc), Generation: 1}
	rev, err := s.PutIf(r, 0)
	if err != nil {
		t.Fatalf("PutIf of a %d-byte spec: %v", len(r.Spec), err)
	}
	got, gotRev, err := s.GetRev("big")
	if err != nil || gotRev != rev || !bytes.Equal(got.Spec, r.Spec) || !bytes.Equal(got.SpecEncoded, r.SpecEncoded) {
		t.Fatalf("GetRev: revision %d (want %d), %d bytes of spec and %d of encoding (want %d and %d): %v",
			gotRev, rev, len(got.Spec), len(got.SpecEncoded), len(r.Spec), len(r.SpecEncoded), err)
	}
}
