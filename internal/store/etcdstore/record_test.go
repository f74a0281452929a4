package etcdstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
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
	yaml := spec.GeneratedNetworks(n)
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
	noEncoding := withoutEncoding(fullRecord(1000))
	emptySpec := fullRecord(1000)
	emptySpec.Spec = []byte{}
	for _, tc := range []struct {
		name       string
		r          *store.Record
		compressed bool
	}{
		{"small, as JSON", small, false},
		{"small without encoding", withoutEncoding(small), false},
		{"large, compressed", fullRecord(1000), true},
		{"large without encoding", noEncoding, true},
		{"large with an empty spec", emptySpec, true},
		{"incompressible", &store.Record{Name: "rnd", Spec: incompressible(1, 200<<10), SpecEncoded: incompressible(2, 100<<10)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := encodeRecord(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.HasPrefix(v, recordMagic); got != tc.compressed {
				t.Errorf("value starts %q: compressed %v, want %v", v[:min(len(v), 8)], got, tc.compressed)
			}
			if !tc.compressed && !json.Valid([]byte(v)) {
				t.Errorf("a small record is not stored as JSON: %q", v[:min(len(v), 40)])
			}
			got, err := decodeRecord([]byte("/vnet/infra/big"), []byte(v))
			if err != nil {
				t.Fatal(err)
			}
			if want := asEarlierBuilds(t, tc.r); !reflect.DeepEqual(got, want) {
				t.Errorf("read back %+v\nwant %+v", head(got), head(want))
			}
			if (got.Spec == nil) != (tc.r.Spec == nil) || (got.SpecEncoded == nil) != (tc.r.SpecEncoded == nil) {
				t.Errorf("nil spec or encoding read back as %v and %v, stored %v and %v",
					got.Spec == nil, got.SpecEncoded == nil, tc.r.Spec == nil, tc.r.SpecEncoded == nil)
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

// compressedValue frames payload as a compressed record that says it
// holds size bytes.
func compressedValue(size uint64, payload []byte) []byte {
	v := append([]byte(recordMagic), recordVersion)
	v = binary.AppendUvarint(v, size)
	return recordEncoder().EncodeAll(payload, v)
}

func TestDamagedRecord(t *testing.T) {
	good, err := encodeRecord(fullRecord(1000))
	if err != nil {
		t.Fatal(err)
	}
	flipped := []byte(good)
	flipped[len(flipped)/2] ^= 0x40
	hj, _ := json.Marshal(store.Record{Name: "x"})
	fields := binary.AppendUvarint(nil, uint64(len(hj)))
	fields = append(fields, hj...)
	fields = appendField(fields, []byte("name: x\n"))
	fields = appendField(fields, nil)
	for _, tc := range []struct {
		name string
		val  []byte
		want string
	}{
		{"magic alone", []byte(recordMagic), "truncated"},
		{"newer format", append([]byte(recordMagic), 2, 0), "format version 2"},
		{"no size", append([]byte(recordMagic), recordVersion), "truncated"},
		{"truncated", []byte(good[:len(good)/2]), "damaged"},
		{"corrupted", flipped, "damaged"},
		{"says it holds too much", compressedValue(MaxRecordPayload+1, fields), "MiB"},
		{"holds more than it says", compressedValue(10, fields), "more or less"},
		{"holds less than it says", compressedValue(uint64(len(fields)+1), fields), "more or less"},
		{"a bomb", compressedValue(100, make([]byte, 64<<20)), "more or less"},
		{"bytes after the record", compressedValue(uint64(len(fields)+3), append(bytes.Clone(fields), 1, 2, 3)), "after the record"},
		{"field longer than the rest", compressedValue(uint64(len(fields)-1), fields[:len(fields)-1]), "truncated"},
		{"header not JSON", compressedValue(8, []byte("\x03abc\x00\x00\x00\x00")), "damaged"},
		{"not JSON at all", []byte("name: x\n"), "not a vnet record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := decodeRecord([]byte("/vnet/infra/x"), tc.val)
			if err == nil {
				t.Fatalf("read %+v from a damaged value", r)
			}
			if !strings.Contains(err.Error(), "/vnet/infra/x") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want the key and %q", err, tc.want)
			}
		})
	}
}

// However a value is cut or changed, reading it gives an error or the
// record, never a panic.
func TestCutOrChangedRecordNeverPanics(t *testing.T) {
	r := fullRecord(400)
	v, err := encodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, recordMagic) {
		t.Fatalf("a %d-byte record is not compressed", len(r.Spec))
	}
	for i := range len(v) {
		if _, err := decodeRecord([]byte("k"), []byte(v[:i])); err == nil {
			t.Fatalf("the first %d of %d bytes read as a record", i, len(v))
		}
	}
	want := asEarlierBuilds(t, r)
	for i := range len(v) {
		changed := []byte(v)
		changed[i] ^= 0x81
		if got, err := decodeRecord([]byte("k"), changed); err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("byte %d changed: read a different record without an error", i)
		}
	}
}

// A value that decompresses to far more than it says costs its reader
// no more memory than it says.
func TestCompressionBombIsNotDecompressed(t *testing.T) {
	bomb := compressedValue(100, make([]byte, 256<<20))
	recordDecoder()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := decodeRecord([]byte("k"), bomb); err == nil {
		t.Fatal("no error")
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("reading a %d-byte value allocated %d MiB", len(bomb), grew>>20)
	}
}

// A record whose encoding would make it decompress to more than
// MaxRecordPayload is stored without it, and one too large to compress
// even so as JSON, as earlier builds stored it.
func TestRecordBeyondPayloadLimit(t *testing.T) {
	r := &store.Record{Name: "x", Spec: bytes.Repeat([]byte("#"), spec.MaxSpecBytes),
		SpecEncoded: bytes.Repeat([]byte{0xa5}, MaxRecordPayload)}
	v, err := encodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRecord([]byte("k"), []byte(v))
	if err != nil || !bytes.Equal(got.Spec, r.Spec) || got.SpecEncoded != nil || !strings.HasPrefix(v, recordMagic) {
		t.Errorf("stored %d bytes of spec and %d of encoding (compressed %v), %v",
			len(got.Spec), len(got.SpecEncoded), strings.HasPrefix(v, recordMagic), err)
	}
	r.Spec = bytes.Repeat([]byte("#"), MaxRecordPayload)
	if v, err = encodeRecord(r); err != nil || !json.Valid([]byte(v)) {
		t.Errorf("a record beyond the limit without its encoding is not stored as JSON: %v", err)
	}
}
