package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec/spectest"
)

// largeRecord has every field set, its spec the YAML of n generated
// networks: compressed from a few hundred.
func largeRecord(n int) *Record {
	yaml := spectest.Networks(n)
	return &Record{
		Name: "big", SpecFile: "/etc/vnet/big.yaml", Spec: yaml,
		Realized:   []plan.Resource{{Kind: plan.KindNetns, Name: "vnet-a", Mark: "m1"}},
		Generation: 42, AppliedAt: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), Engine: "vnet 1.2.3",
		SpecEncoded: bytes.Repeat([]byte("\x01\x02\x03encoded"), len(yaml)/20),
	}
}

// asJSONReadsIt is the record as its JSON reads back.
func asJSONReadsIt(t *testing.T, r *Record) *Record {
	t.Helper()
	v, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got := &Record{}
	if err := json.Unmarshal(v, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// compressedValue frames payload as a compressed record that says it
// holds size bytes.
func compressedValue(size uint64, payload []byte) []byte {
	v := append([]byte(ValueMagic), valueVersion)
	v = binary.AppendUvarint(v, size)
	return recordEncoder().EncodeAll(payload, v)
}

func TestDamagedRecord(t *testing.T) {
	good, err := EncodeValue(largeRecord(1000))
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	hj, _ := json.Marshal(Record{Name: "x"})
	fields := binary.AppendUvarint(nil, uint64(len(hj)))
	fields = append(fields, hj...)
	fields = appendField(fields, []byte("name: x\n"))
	fields = appendField(fields, nil)
	for _, tc := range []struct {
		name string
		val  []byte
		want string
	}{
		{"magic alone", []byte(ValueMagic), "truncated"},
		{"newer format", append([]byte(ValueMagic), 3, 0), "format version 3"},
		{"no size", append([]byte(ValueMagic), valueVersion), "truncated"},
		{"truncated", []byte(good[:len(good)/2]), "damaged"},
		{"corrupted", flipped, "damaged"},
		{"says it holds too much", compressedValue(MaxValuePayload+1, fields), "MiB"},
		{"holds more than it says", compressedValue(10, fields), "more or less"},
		{"holds less than it says", compressedValue(uint64(len(fields)+1), fields), "more or less"},
		{"a bomb", compressedValue(100, make([]byte, 64<<20)), "more or less"},
		{"bytes after the record", compressedValue(uint64(len(fields)+3), append(bytes.Clone(fields), 1, 2, 3)), "after the record"},
		{"field longer than the rest", compressedValue(uint64(len(fields)-1), fields[:len(fields)-1]), "truncated"},
		{"header not JSON", compressedValue(8, []byte("\x03abc\x00\x00\x00\x00")), "damaged"},
		{"not JSON at all", []byte("name: x\n"), "not a vnet record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeValue(tc.val)
			if err == nil {
				t.Fatalf("read %+v from a damaged value", r)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want %q", err, tc.want)
			}
		})
	}
}

// However a value is cut or changed, reading it gives an error or the
// record, never a panic.
func TestCutOrChangedRecordNeverPanics(t *testing.T) {
	r := largeRecord(400)
	v, err := EncodeValue(r)
	if err != nil {
		t.Fatal(err)
	}
	if !IsCompressedValue(v) {
		t.Fatalf("a %d-byte record is not compressed", len(r.Spec))
	}
	for i := range len(v) {
		if _, err := DecodeValue(v[:i]); err == nil {
			t.Fatalf("the first %d of %d bytes read as a record", i, len(v))
		}
	}
	want := asJSONReadsIt(t, r)
	for i := range len(v) {
		changed := bytes.Clone(v)
		changed[i] ^= 0x81
		if got, err := DecodeValue(changed); err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("byte %d changed: read a different record without an error", i)
		}
	}
}

// A value that decompresses to far more than it says costs its reader
// no more memory than it says.
func TestCompressionBombIsNotDecompressed(t *testing.T) {
	bomb := compressedValue(100, make([]byte, 256<<20))
	recordDecoder() // made before measuring
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := DecodeValue(bomb); err == nil {
		t.Fatal("no error")
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("reading a %d-byte value allocated %d MiB", len(bomb), grew>>20)
	}
}

// marshalRecord writes what encoding/json does, byte for byte, with
// namespaces' IDs or without, and strings JSON escapes.
func TestMarshalRecordIsJSON(t *testing.T) {
	ids := map[string]uint64{"big-vm10": 4107, "big-vm9": 1 << 63, "big-vm1": 0}
	for _, ns := range []*plan.NamespaceIDs{
		nil,
		{Boot: "b", Mark: "m"},
		{Boot: "b", Mark: "m", IDs: map[string]uint64{}},
		{Boot: "2c9e1d0b-7f54", Mark: "vnet-x", IDs: ids},
		{Boot: "b<&>", Mark: "m", IDs: ids},
		{Boot: "b", Mark: "m\"\\\n", IDs: ids},
		{Boot: "b", Mark: "m", IDs: map[string]uint64{"ns-é": 1, "ns<1>": 2, "a": 3}},
	} {
		r := largeRecord(3)
		r.Namespaces, r.Paused = ns, plan.Paused{"vm1"}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalRecord(r, nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%+v: %v\n%s\nwant\n%s", ns, err, got, want)
		}
	}
}

// A record's namespaces written through the JSON kept of the last write
// read as encoding/json writes them, whichever names came and went.
func TestNamespacesJSONKept(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	kept := &namespacesJSON{}
	ids := map[string]uint64{}
	for step := range 300 {
		if ids == nil && step%7 != 3 {
			ids = map[string]uint64{}
		}
		switch {
		case step%50 == 0: // many at once
			for range 100 {
				ids[fmt.Sprintf("big-vm%d", rnd.IntN(500))] = rnd.Uint64()
			}
		case step%7 == 3:
			ids = nil
		default:
			for range rnd.IntN(3) {
				ids[fmt.Sprintf("big-vm%d", rnd.IntN(500))] = rnd.Uint64N(10)
			}
			for name := range ids {
				if rnd.IntN(40) == 0 {
					delete(ids, name)
				}
			}
		}
		ns := &plan.NamespaceIDs{Boot: "b", Mark: "m", IDs: maps.Clone(ids)}
		want, err := json.Marshal(ns)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := kept.encode(ns)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("step %d: %v\n%s\nwant\n%s", step, ok, got, want)
		}
		if _, frames, ok := kept.frame(); ok {
			if raw, err := recordDecoder().DecodeAll(frames, nil); err != nil || !bytes.Equal(raw, want) {
				t.Fatalf("step %d: the frames read %v\n%s\nwant\n%s", step, err, raw, want)
			}
		}
	}
}

// A namespace added or removed makes anew the frame of its piece of the
// namespaces' JSON alone (two when it ends a piece): the others are those
// of the last write.
func TestNamespacesFramesRemadeWhereChanged(t *testing.T) {
	ids := map[string]uint64{}
	for i := range 1000 {
		ids[fmt.Sprintf("infra-vm%d", i)] = uint64(4096 + i)
	}
	kept := &namespacesJSON{}
	frames := func(ids map[string]uint64) map[string]bool {
		t.Helper()
		if _, ok := kept.encode(&plan.NamespaceIDs{Boot: "b", Mark: "m", IDs: maps.Clone(ids)}); !ok {
			t.Fatal("not encoded")
		}
		if _, _, ok := kept.frame(); !ok {
			t.Fatal("no frames of a thousand namespaces' IDs")
		}
		out := map[string]bool{}
		for _, f := range kept.frames {
			out[string(f)] = true
		}
		return out
	}
	last := frames(ids)
	if len(last) < 4 {
		t.Fatalf("%d frames of a thousand namespaces' IDs, want several", len(last))
	}
	for step, change := range []func(){
		func() { ids["infra-vm1000"] = 5096 },
		func() { delete(ids, "infra-vm1000") },
		func() { ids["infra-vm500"]++ },
		func() { delete(ids, "infra-vm2"); ids["infra-vm0x"] = 1 },
	} {
		change()
		now := frames(ids)
		made := 0
		for f := range now {
			if !last[f] {
				made++
			}
		}
		if made < 1 || made > 2 {
			t.Errorf("change %d made %d of %d frames anew, want 1 or 2", step, made, len(now))
		}
		last = now
	}
}

// A record whose namespaces' IDs go in a zstd frame of their own, kept
// from the last write, reads back as the record written.
func TestChunkedValueNamespacesFramed(t *testing.T) {
	r := changeRecords(t, 1000)[0]
	r.Realized = nil
	manifest := newSpecWrite(r.Spec).manifest
	ns := &namespacesJSON{}
	for gen := 1; gen <= 3; gen++ {
		r.Generation = gen
		if gen == 3 {
			r.Namespaces.IDs["big-vm1"]++ // the frame kept no longer does
		}
		v, err := encodeChunkedValue(r, manifest, ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, gotManifest, err := decodeStored(v)
		if err != nil {
			t.Fatalf("generation %d: %v", gen, err)
		}
		want := *r
		want.Spec = nil
		if !reflect.DeepEqual(got.Namespaces, want.Namespaces) || got.Generation != gen || !bytes.Equal(gotManifest, manifest) {
			t.Errorf("generation %d: read back %d namespaces, generation %d", gen, len(got.Namespaces.IDs), got.Generation)
		}
	}
	if _, frame, ok := ns.frame(); !ok || len(frame) == 0 {
		t.Error("no frame kept of a thousand namespaces' IDs")
	}
}
