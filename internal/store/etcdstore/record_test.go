package etcdstore

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/spectest"
	"github.com/vnet-project/vnet/internal/store"
)

// incompressible is n bytes that no compressor shrinks, the same for the
// same seed.
func incompressible(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	_, _ = r.Read(b)
	return b
}

// fullRecord has every field set, its spec the YAML of n generated
// networks.
func fullRecord(n int) *store.Record {
	yaml := spectest.Networks(n)
	return &store.Record{
		Name: "big", SpecFile: "/etc/vnet/big.yaml", Spec: yaml,
		Realized: []plan.Resource{
			{Kind: plan.KindNetns, Name: "vnet-a", Mark: "m1"},
			{Kind: plan.KindBridge, NS: "vnet-a", Name: "br0", MTU: 1500, CIDR: "10.0.0.1/24", VNI: 7},
		},
		Generation: 42, AppliedAt: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), Engine: "vnet 1.2.3",
		SpecEncoded: bytes.Repeat([]byte("\x01\x02\x03encoded"), len(yaml)/20),
	}
}

// asEarlierBuilds is the record as a build that stored every record as
// JSON read it back: what decodeRecord must return, field for field.
func asEarlierBuilds(t *testing.T, r *store.Record) *store.Record {
	t.Helper()
	v, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got := &store.Record{}
	if err := json.Unmarshal(v, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRecordRoundTrip(t *testing.T) {
	small := fullRecord(1)
	noEncoding := fullRecord(1000).WithoutEncoding()
	emptySpec := fullRecord(1000)
	emptySpec.Spec = []byte{}
	for _, tc := range []struct {
		name       string
		r          *store.Record
		compressed bool
	}{
		{"small, as JSON", small, false},
		{"small without encoding", small.WithoutEncoding(), false},
		{"large, compressed", fullRecord(1000), true},
		{"large without encoding", noEncoding, true},
		{"large with an empty spec", emptySpec, true},
		{"large with an empty encoding", &store.Record{Name: "e", Spec: spectest.Networks(1000), SpecEncoded: []byte{}}, true},
		{"incompressible", &store.Record{Name: "rnd", Spec: incompressible(1, 200<<10), SpecEncoded: incompressible(2, 100<<10)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := encodeRecord(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.HasPrefix(v, store.ValueMagic); got != tc.compressed {
				t.Errorf("value starts %q: compressed %v, want %v", v[:min(len(v), 8)], got, tc.compressed)
			}
			if !tc.compressed && !json.Valid([]byte(v)) {
				t.Errorf("a small record is not stored as JSON: %q", v[:min(len(v), 40)])
			}
			got, err := decodeRecord([]byte("/vnet/infra/big"), []byte(v))
			if err != nil {
				t.Fatal(err)
			}
			want := asEarlierBuilds(t, tc.r)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("read back %+v\nwant %+v", head(got), head(want))
			}
			// DeepEqual tells nil from empty only inside: as JSON reads
			// them, an empty spec is empty and an empty encoding nil.
			if (got.Spec == nil) != (want.Spec == nil) || (got.SpecEncoded == nil) != (want.SpecEncoded == nil) {
				t.Errorf("nil spec or encoding read back as %v and %v, JSON reads %v and %v",
					got.Spec == nil, got.SpecEncoded == nil, want.Spec == nil, want.SpecEncoded == nil)
			}
		})
	}
}

// head is a record without its large fields, for messages.
func head(r *store.Record) store.Record {
	c := *r
	c.Spec, c.SpecEncoded = []byte(strings.Repeat("…", min(len(c.Spec), 1))), nil
	return c
}

// Compression keeps the value of a spec of 10,000 networks far below
// etcd's default request limit of 1.5 MiB.
func TestLargeRecordIsCompact(t *testing.T) {
	r := fullRecord(10000)
	v, err := encodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	if plain, _ := json.Marshal(r); len(v) > len(plain)/4 || len(v) > 1<<20 {
		t.Errorf("value of %d bytes for a record whose JSON is %d", len(v), len(plain))
	}
}

// Records written by earlier builds, all as JSON whatever their size,
// still read.
func TestRecordOfEarlierBuildsReads(t *testing.T) {
	for _, r := range []*store.Record{fullRecord(1), fullRecord(1000)} {
		v, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRecord([]byte("/vnet/infra/big"), v)
		if err != nil {
			t.Fatal(err)
		}
		if want := asEarlierBuilds(t, r); !reflect.DeepEqual(got, want) {
			t.Errorf("read back %+v, want %+v", head(got), head(want))
		}
	}
	literal := `{"name":"web","spec_file":"web.yaml","spec":"bmFtZTogd2ViCg==","realized":null,"generation":3,` +
		`"applied_at":"2025-01-02T03:04:05Z"}`
	got, err := decodeRecord([]byte("/vnet/infra/web"), []byte(literal))
	if err != nil || got.Name != "web" || string(got.Spec) != "name: web\n" || got.Generation != 3 {
		t.Errorf("read %+v, %v", got, err)
	}
}

// A record whose encoding would make it decompress to more than
// store.MaxValuePayload is stored without it, and one too large to compress
// even so as JSON, as earlier builds stored it.
func TestRecordBeyondPayloadLimit(t *testing.T) {
	r := &store.Record{Name: "x", Spec: bytes.Repeat([]byte("#"), spec.MaxSpecBytes),
		SpecEncoded: bytes.Repeat([]byte{0xa5}, store.MaxValuePayload)}
	v, err := encodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRecord([]byte("k"), []byte(v))
	if err != nil || !bytes.Equal(got.Spec, r.Spec) || got.SpecEncoded != nil || !strings.HasPrefix(v, store.ValueMagic) {
		t.Errorf("stored %d bytes of spec and %d of encoding (compressed %v), %v",
			len(got.Spec), len(got.SpecEncoded), strings.HasPrefix(v, store.ValueMagic), err)
	}
	r.Spec = bytes.Repeat([]byte("#"), store.MaxValuePayload)
	if v, err = encodeRecord(r); err != nil || !json.Valid([]byte(v)) {
		t.Errorf("a record beyond the limit without its encoding is not stored as JSON: %v", err)
	}
}

// A value that does not decode names its etcd key.
func TestDamagedRecordNamesItsKey(t *testing.T) {
	for _, val := range [][]byte{[]byte("name: x\n"), []byte(store.ValueMagic)} {
		if _, err := decodeRecord([]byte("/vnet/infra/x"), val); err == nil || !strings.Contains(err.Error(), "/vnet/infra/x") {
			t.Errorf("%q: error %v, want one naming the key", val, err)
		}
	}
}
