package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// The model's costs for a host of a spec of many virtual networks
// (docs/benchmarks.md, "Virtual networks at scale"):
// go test -run XXX -bench Networks ./internal/plan

// networksScaleSpec is n networks of two VMs each over three hosts, and
// extra networks more with their VMs on hv1 and hv2.
func networksScaleSpec(tb testing.TB, n, extra int) *spec.Spec {
	tb.Helper()
	var b strings.Builder
	b.WriteString("name: big\nhosts:\n")
	for h := 1; h <= 3; h++ {
		fmt.Fprintf(&b, "  - {name: hv%d, underlay: 192.0.2.%d}\n", h, h)
	}
	b.WriteString("networks:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: n%d, subnet: 10.%d.%d.0/24, vni: %d}\n", i, i/256, i%256, i+1)
	}
	for k := range extra {
		fmt.Fprintf(&b, "  - {name: x%d, subnet: 10.250.%d.0/24, vni: %d}\n", k, k, 100000+k)
	}
	b.WriteString("vms:\n")
	for i := range n {
		for j := range 2 {
			fmt.Fprintf(&b, "  - {name: v%d-%d, host: hv%d, nics: [{network: n%d, ip: 10.%d.%d.%d/24}]}\n",
				i, j, (i+j)%3+1, i, i/256, i%256, 10+j)
		}
	}
	for k := range extra {
		fmt.Fprintf(&b, "  - {name: x%d-0, host: hv1, nics: [{network: x%d, ip: 10.250.%d.10/24}]}\n", k, k, k)
		fmt.Fprintf(&b, "  - {name: x%d-1, host: hv2, nics: [{network: x%d, ip: 10.250.%d.11/24}]}\n", k, k, k)
	}
	doc, err := spec.Load("big.yaml", []byte(b.String()))
	if err != nil {
		tb.Fatal(err)
	}
	return doc.Spec
}

var hostOpt = Options{NumCPU: 2, Host: "hv1", HostNS: "hv1"}

func BenchmarkNetworksModel10000(b *testing.B) {
	s := networksScaleSpec(b, 10000, 1)
	for b.Loop() {
		Model(s, hostOpt)
	}
}

func BenchmarkNetworksChangeScope10000(b *testing.B) {
	last, next := networksScaleSpec(b, 10000, 0), networksScaleSpec(b, 10000, 1)
	lm, nm := Model(last, hostOpt), Model(next, hostOpt)
	for b.Loop() {
		ChangeScope(last, next, lm, nm)
	}
}

// A host's model leaves the other hosts' VMs out of the lab's model it
// starts from; it is the same as when it models them all and drops them,
// cpusets, port policies, pools and teams included.
func TestHostModelOfItsVMsOnly(t *testing.T) {
	files, err := filepath.Glob("../../examples/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../../examples/*.yaml")
	files = append(files, more...)
	type named struct {
		name string
		s    *spec.Spec
	}
	var specs []named
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := spec.Load(f, src)
		if err != nil {
			t.Logf("%s: %v", f, err)
			continue
		}
		specs = append(specs, named{f, doc.Spec})
	}
	specs = append(specs, named{"networks", networksScaleSpec(t, 30, 2)})
	cpus := networksScaleSpec(t, 12, 0)
	for i := range cpus.VMs {
		cpus.VMs[i].CPUs = float64(i%3) * 0.5
	}
	specs = append(specs, named{"networks with cpus", cpus})
	if len(specs) < 5 {
		t.Fatalf("only %d specs to compare", len(specs))
	}
	defer func(f func(string) string) { onlyHostVMs = f }(onlyHostVMs)
	compared := 0
	for _, sp := range specs {
		for _, h := range sp.s.Hosts {
			opt := Options{NumCPU: 3, Host: h.Name, HostNS: "root-" + h.Name}
			onlyHostVMs = func(string) string { return "" }
			all := Model(sp.s, opt)
			onlyHostVMs = func(host string) string { return host }
			mine := Model(sp.s, opt)
			compared++
			if !slices.Equal(all, mine) {
				t.Errorf("%s, host %s: the model of its own VMs differs from the whole lab's:\n%s", sp.name, h.Name, Diff(mine, all))
			}
		}
	}
	t.Logf("%d specs, %d hosts' models compared", len(specs), compared)
}

// portGroupScaleSpec is bench/scale.py's one-host spec: n VMs of one vNIC
// on one port group of a private switch, with vm0 as well when extra.
func portGroupScaleSpec(tb testing.TB, n int, extra bool) *spec.Spec {
	var b strings.Builder
	b.WriteString("name: s\nhosts:\n  - name: h1\nswitches:\n  - name: sw0\n    hosts: [h1]\n    portgroups: [{name: pg}]\nvms:\n")
	if extra {
		b.WriteString("  - {name: vm0, host: h1, nics: [{portgroup: pg, ip: 10.100.0.1/16}]}\n")
	}
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {name: vm%d, host: h1, nics: [{portgroup: pg, ip: 10.%d.%d.%d/16}]}\n", i, 1+i/60000, i/250%240, 1+i%250)
	}
	doc, err := spec.Load("s.yaml", []byte(b.String()))
	if err != nil {
		tb.Fatal(err)
	}
	return doc.Spec
}

// A VM added at 1,000 VMs on a port group: the models of both specs made
// whole, against the next one's made whole (alone, and with the last one's
// spliced from it, as a process that keeps no model makes them).
func BenchmarkPortGroupOneVM1000(b *testing.B) {
	last, next := portGroupScaleSpec(b, 1000, false), portGroupScaleSpec(b, 1000, true)
	opt := Options{PortPrograms: true}
	b.Run("both whole", func(b *testing.B) {
		for b.Loop() {
			Model(last, opt)
			Model(next, opt)
		}
	})
	b.Run("next whole", func(b *testing.B) {
		for b.Loop() {
			Model(next, opt)
		}
	})
	b.Run("next whole, last spliced", func(b *testing.B) {
		for b.Loop() {
			if _, ok := SpliceModel(next, last, Model(next, opt), nil, nil, opt); !ok {
				b.Fatal("not spliced")
			}
		}
	})
}
