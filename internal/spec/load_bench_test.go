package spec

import (
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec/spectest"
)

// What loading a large spec costs (docs/benchmarks.md):
//
//	go test -run '^$' -bench Load -benchmem ./internal/spec

var benchSpecs = []struct {
	name string
	src  func() []byte
}{
	{"1000VMs", func() []byte { return spectest.VMs(1000) }},
	{"10000Networks", func() []byte { return spectest.Networks(10000) }},
}

func BenchmarkLoad(b *testing.B) {
	for _, bs := range benchSpecs {
		src := bs.src()
		b.Run(bs.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := Load("big.yaml", src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, bs := range benchSpecs {
		src := bs.src()
		b.Run(bs.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Decode("big.yaml", src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	for _, bs := range benchSpecs {
		doc, err := Decode("big.yaml", bs.src())
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bs.name, func(b *testing.B) {
			for b.Loop() {
				if errs := Validate(doc); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}

// BenchmarkPinVNIs pins the VNIs of a spec whose networks leave them out,
// as an apply does: the first time, and again with the VNIs stored before.
func BenchmarkPinVNIs(b *testing.B) {
	doc, err := Load("big.yaml", spectest.Networks(10000))
	if err != nil {
		b.Fatal(err)
	}
	pinned, err := PinVNIs(doc, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name     string
		previous *Spec
	}{{"10000Networks/first", nil}, {"10000Networks/again", pinned.Spec}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := PinVNIs(doc, bc.previous); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSetVNIC moves one vNIC of 1,000 VMs to another port group, as
// vnet link does.
func BenchmarkSetVNIC(b *testing.B) {
	src := strings.Replace(string(spectest.VMs(1000)), "portgroups: [{name: pg}]", "portgroups: [{name: pg}, {name: pg2}]", 1)
	doc, err := Load("big.yaml", []byte(src))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := SetVNIC(doc, "vm500", "eth0", "pg2", true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEditVMs adds a container's VM to 1,000 VMs and takes it out, as
// the CNI plugin's ADD and DEL do.
func BenchmarkEditVMs(b *testing.B) {
	doc, err := Load("big.yaml", spectest.VMs(1000))
	if err != nil {
		b.Fatal(err)
	}
	c := VM{Name: "c-1", Host: "h1", NICs: []VNIC{{PortGroup: "pg", IP: "10.200.0.1/8", MAC: "02:00:00:00:00:01",
		Attach: &Attach{Netns: "cni-1", Ifname: "eth0", Container: "1", CNI: "web"}}}}
	for b.Loop() {
		added, err := EditVMs(doc, nil, []VM{c})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := EditVMs(added, []string{c.Name}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEditOneVMOf1000 makes each one-VM change of 1,000 VMs that
// the API's VM resource makes: one VM added, one VM's address changed,
// one VM taken out.
func BenchmarkEditOneVMOf1000(b *testing.B) {
	doc, err := Load("big.yaml", spectest.VMs(1000))
	if err != nil {
		b.Fatal(err)
	}
	moved := doc.Spec.VMs[499]
	moved.NICs = []VNIC{{PortGroup: "pg", IP: "10.200.0.1/8"}}
	for _, bc := range []struct {
		name string
		drop []string
		put  []VM
	}{
		{"add", nil, []VM{{Name: "new", Host: "h1", NICs: []VNIC{{PortGroup: "pg", IP: "10.200.0.2/8"}}}}},
		{"address", nil, []VM{moved}},
		{"remove", []string{"vm500"}, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := EditVMs(doc, bc.drop, bc.put); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
