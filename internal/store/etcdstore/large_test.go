package etcdstore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vnet-project/vnet/internal/spec"
)

// A spec at the spec's own size limit that does not compress is stored
// and read back whole: the embedded member and the client both take the
// value, which is larger than etcd's and the client's defaults (1.5 and 2
// MiB).
func TestLargestSpecIsStored(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	r := record("big", 1)
	r.Spec = append([]byte("name: big\n"), incompressible(1, spec.MaxSpecBytes-len("name: big\n"))...)
	rev, err := s.PutIf(r, 0)
	if err != nil {
		t.Fatalf("PutIf of a %d-byte spec: %v", len(r.Spec), err)
	}
	got, gotRev, err := s.GetRev("big")
	if err != nil || gotRev != rev || !bytes.Equal(got.Spec, r.Spec) {
		t.Fatalf("GetRev: %d bytes, revision %d (want %d), %v", len(got.Spec), gotRev, rev, err)
	}
	recs, err := s.List()
	if err != nil || len(recs) != 1 || len(recs[0].Spec) != len(r.Spec) {
		t.Fatalf("List: %d records, %v", len(recs), err)
	}
}

// A record keeps its spec's encoding while its stored value, compressed,
// stays within MaxEncodedRecord: always for specs as vnet writes them,
// which compress well, and not for the largest spec with an encoding that
// does not compress.
func TestSpecEncodingIsStoredWhenItFits(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	compressible := func(n int) []byte { return bytes.Repeat([]byte("#"), n) }
	for i, tc := range []struct {
		name             string
		yaml, encoded    int
		fill             func(seed uint64, n int) []byte
		keepsTheEncoding bool
	}{
		{"mid", 2 << 20, 1 << 20, incompressible, true},
		{"largest", spec.MaxSpecBytes, spec.MaxSpecBytes * 6 / 10, func(_ uint64, n int) []byte { return compressible(n) }, true},
		{"big", spec.MaxSpecBytes, spec.MaxSpecBytes * 8 / 10, incompressible, false},
	} {
		r := record(tc.name, 1)
		r.Spec = append([]byte("name: "+tc.name+"\n"), tc.fill(uint64(2*i), tc.yaml-len("name: \n")-len(tc.name))...)
		r.SpecEncoded = tc.fill(uint64(2*i+1), tc.encoded)
		if _, err := s.PutIf(r, 0); err != nil {
			t.Fatalf("%s: PutIf: %v", tc.name, err)
		}
		got, err := s.Get(tc.name)
		if err != nil || !bytes.Equal(got.Spec, r.Spec) {
			t.Fatalf("%s: Get: %v", tc.name, err)
		}
		if kept := bytes.Equal(got.SpecEncoded, r.SpecEncoded); kept != tc.keepsTheEncoding || (!kept && got.SpecEncoded != nil) {
			t.Errorf("%s: %d bytes of encoding stored, want the %d given: %v", tc.name, len(got.SpecEncoded), tc.encoded, tc.keepsTheEncoding)
		}
	}
}

func TestTooLarge(t *testing.T) {
	for _, err := range []error{rpctypes.ErrRequestTooLarge, rpctypes.ErrGRPCRequestTooLarge,
		fmt.Errorf("put x: etcd at y: %w", rpctypes.ErrRequestTooLarge), errors.New("etcdserver: request is too large"),
		fmt.Errorf("put x: %w", status.Error(codes.ResourceExhausted, "grpc: received message larger than max (2217531 vs. 2097152)"))} {
		if !tooLarge(err) {
			t.Errorf("tooLarge(%v) = false", err)
		}
	}
	for _, err := range []error{ErrConflict, status.Error(codes.ResourceExhausted, "etcdserver: mvcc: database space exceeded")} {
		if tooLarge(err) {
			t.Errorf("tooLarge(%v) = true", err)
		}
	}
}
