package etcdstore

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// A spec at the spec's own size limit is stored and read back whole: the
// embedded member and the client both take the value, which is larger than
// etcd's and the client's defaults (1.5 and 2 MiB).
func TestLargestSpecIsStored(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	r := record("big", 1)
	r.Spec = []byte("name: big\n" + strings.Repeat("#", spec.MaxSpecBytes-len("name: big\n")))
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
