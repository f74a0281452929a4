package fastyaml_test

import (
	"testing"

	goccy "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
	"gopkg.in/yaml.v3"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/fastyaml"
	"github.com/vnet-project/vnet/internal/spec/spectest"
)

// BenchmarkParse parses the specs of the product's large loads with this
// package, with yaml.v3 (the parser it stands in for, which spec.Decode
// falls back to) and with goccy/go-yaml, a maintained parser of its own:
// to its syntax tree, and decoded into a spec.Spec, without the field
// positions spec.Decode records (docs/benchmarks.md, "Loading a spec"):
//
//	go test -run '^$' -bench Parse -benchmem ./internal/spec/fastyaml
func BenchmarkParse(b *testing.B) {
	for _, bs := range []struct {
		name string
		src  []byte
	}{
		{"1000VMs", spectest.VMs(1000)},
		{"10000Networks", spectest.Networks(10000)},
	} {
		src := bs.src
		b.Run(bs.name+"/fastyaml", func(b *testing.B) {
			for b.Loop() {
				if _, ok := fastyaml.Parse(src); !ok {
					b.Fatal("not in the simple shape")
				}
			}
		})
		b.Run(bs.name+"/yaml.v3", func(b *testing.B) {
			for b.Loop() {
				var n yaml.Node
				if err := yaml.Unmarshal(src, &n); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bs.name+"/goccy-ast", func(b *testing.B) {
			for b.Loop() {
				if _, err := parser.ParseBytes(src, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bs.name+"/goccy-unmarshal", func(b *testing.B) {
			for b.Loop() {
				var s spec.Spec
				if err := goccy.Unmarshal(src, &s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
