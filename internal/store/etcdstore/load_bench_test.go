package etcdstore

import (
	"fmt"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/spec/spectest"
	"github.com/vnet-project/vnet/internal/store"
)

// benchRecord is the record vnet apply --etcd stores for a spec of n
// generated networks, with its spec's encoding or without.
func benchRecord(b *testing.B, n int, withEncoding bool) *store.Record {
	b.Helper()
	doc, err := spec.Load("big.yaml", spectest.Networks(n))
	if err != nil {
		b.Fatal(err)
	}
	r := &store.Record{Name: "big", SpecFile: "big.yaml", Spec: doc.Source, Generation: 1}
	if withEncoding {
		r.SpecEncoded = speccache.EncodeValidated(doc)
	}
	return r
}

// What a host agent's load of a stored spec costs, from the value etcd
// holds to the validated spec (docs/benchmarks.md):
//
//	go test -run '^$' -bench 'AgentLoad|RecordCodec' -benchmem ./internal/store/etcdstore
//
// "yaml" is a record stored without the spec's encoding, "encoded" one
// that vnet apply --etcd stores.
func BenchmarkAgentLoad(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, withEncoding := range []bool{false, true} {
			r := benchRecord(b, n, withEncoding)
			what := "yaml"
			if withEncoding {
				what = "encoded"
			}
			v, err := encodeRecord(r)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%dNetworks/%s", n, what), func(b *testing.B) {
				for b.Loop() {
					rec, err := decodeRecord([]byte("k"), []byte(v))
					if err != nil {
						b.Fatal(err)
					}
					if _, err := speccache.DecodeValidated(rec.SpecFile, rec.Spec, rec.SpecEncoded); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(v)), "value-bytes")
			})
		}
	}
}

// What storing and reading back a record costs apart from etcd: the
// writer's encodeRecord and each reader's decodeRecord, for the record
// vnet apply --etcd stores.
func BenchmarkRecordCodec(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		r := benchRecord(b, n, true)
		v, err := encodeRecord(r)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%dNetworks/encode", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := encodeRecord(r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(v)), "value-bytes")
		})
		b.Run(fmt.Sprintf("%dNetworks/decode", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := decodeRecord([]byte("k"), []byte(v)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(v)), "value-bytes")
		})
	}
}

// What a change of a large spec costs through etcd itself: the writer's
// revision-checked put, and a reader's get of the new value (the embedded
// member, without fsync).
func BenchmarkStoreRoundTrip(b *testing.B) {
	s := openStore(b, startEtcd(b).Endpoint())
	for _, n := range []int{1000, 10000} {
		r := benchRecord(b, n, true)
		r.Name = fmt.Sprintf("big%d", n)
		var rev int64
		b.Run(fmt.Sprintf("%dNetworks/putif", n), func(b *testing.B) {
			for b.Loop() {
				var err error
				if rev, err = s.PutIf(r, rev); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("%dNetworks/getrev", n), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := s.GetRev(r.Name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
