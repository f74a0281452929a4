package etcdstore

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strings"
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
// MiB), which the embedded member raises, and opens a store on it. Ports
// free when picked can be taken before etcd binds them (by another
// package's test, or as a connection's ephemeral port): an etcd that exits
// before it answers is started again on other ports.
func openDefaultEtcd(t *testing.T) *Store {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("no etcd binary to run at its default request limit")
	}
	const attempts = 5
	var last error
	for i := 0; i < attempts; i++ {
		var s *Store
		if s, last = tryDefaultEtcd(t, bin); last == nil {
			return s
		}
	}
	t.Fatalf("etcd did not start in %d attempts; the last: %v", attempts, last)
	return nil
}

// tryDefaultEtcd starts one etcd on free ports and opens a store on it,
// or says why etcd exited first; it fails the test if etcd neither answers
// nor exits within 20 s.
func tryDefaultEtcd(t *testing.T, bin string) (*Store, error) {
	t.Helper()
	client := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--data-dir", t.TempDir(), "--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "default="+peer,
		"--log-level", "error")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("etcd exited (%v): %s", err, lastLine(stderr.String()))
		default:
		}
		s, err := Open(Options{Endpoints: []string{client}})
		if err == nil {
			t.Cleanup(func() { s.Close(); _ = cmd.Process.Kill(); <-exited })
			return s, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("etcd did not start: %v", err)
		}
	}
}

// lastLine is the last line of a program's output.
func lastLine(out string) string {
	out = strings.TrimSpace(out)
	return out[strings.LastIndexByte(out, '\n')+1:]
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
