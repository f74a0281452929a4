package etcdstore

import (
	"fmt"
	"strings"
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
		doc, err := spec.Load("big.yaml", benchNetworksSpec(n))
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

// benchNetworksSpec is n virtual networks of two VMs each on three hosts,
// one object a line, as internal/spec's benchmarks write them.
func benchNetworksSpec(n int) []byte {
	var b strings.Builder
	b.WriteString("name: big\nhosts:\n")
	for h := 1; h <= 3; h++ {
		fmt.Fprintf(&b, "  - {name: hv%d, underlay: 192.168.0.%d}\n", h, h)
	}
	b.WriteString("networks:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {name: n%d, subnet: 10.%d.%d.0/24}\n", i, i/256, i%256)
	}
	b.WriteString("vms:\n")
	for i := 0; i < n; i++ {
		for j := 0; j < 2; j++ {
			fmt.Fprintf(&b, "  - {name: v%d-%d, host: hv%d, nics: [{network: n%d, ip: 10.%d.%d.%d/24}]}\n",
				i, j, (i+j)%3+1, i, i/256, i%256, 10+j)
		}
	}
	return []byte(b.String())
}
