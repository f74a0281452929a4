package etcdstore

import (
	"fmt"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// What a host agent's load of a stored spec costs, from the value etcd
// holds to the validated spec (docs/benchmarks.md):
//
//	go test -run '^$' -bench AgentLoad -benchmem ./internal/store/etcdstore
//
// "yaml" is a record stored without the spec's encoding, "encoded" one
// that vnet apply --etcd stores.
func BenchmarkAgentLoad(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		doc, err := spec.Load("big.yaml", spec.GeneratedNetworks(n))
		if err != nil {
			b.Fatal(err)
		}
		for _, withEncoding := range []bool{false, true} {
			r := &store.Record{Name: "big", SpecFile: "big.yaml", Spec: doc.Source, Generation: 1}
			what := "yaml"
			if withEncoding {
				r.SpecEncoded, what = spec.EncodeValidated(doc), "encoded"
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
					if _, err := spec.DecodeValidated(rec.SpecFile, rec.Spec, rec.SpecEncoded); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(v)), "value-bytes")
			})
		}
	}
}
