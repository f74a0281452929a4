// Package spectest makes specs for tests and benchmarks: large generated
// ones, and the expected error a bad spec's test file carries.
package spectest

import (
	"fmt"
	"strings"
)

// WantedError returns TEXT from a first line "# want: TEXT". Bad-spec test
// files carry their expected error this way so that unit tests and command
// tests share them.
func WantedError(src []byte) string {
	first, _, _ := strings.Cut(string(src), "\n")
	want, ok := strings.CutPrefix(first, "# want: ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(want)
}

// Networks is an infrastructure of three hosts and n virtual networks
// with two VMs each, network i on hosts hv(i%3+1) and hv((i+1)%3+1), written
// one object a line as a cluster's spec is: the large spec that the
// spec's and the stores' benchmarks load.
func Networks(n int) []byte {
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

// VMs is one host with one private switch and n VMs of one vNIC each,
// written one object a line.
func VMs(n int) []byte {
	var b strings.Builder
	b.WriteString("name: big\nhosts:\n  - name: h1\nswitches:\n  - name: sw0\n    hosts: [h1]\n    portgroups: [{name: pg}]\nvms:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {name: vm%d, host: h1, nics: [{portgroup: pg, ip: 10.100.%d.%d/8}]}\n", i, i/250%256, i%250+1)
	}
	return []byte(b.String())
}
