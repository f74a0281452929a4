package hostagent

import (
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
)

const loadSpec = `name: lab
hosts:
  - {name: hv1, underlay: 192.168.0.1}
  - {name: hv2, underlay: 192.168.0.2}
networks:
  - {name: n1, subnet: 10.1.0.0/24}
vms:
  - {name: a, host: hv1, nics: [{network: n1, ip: 10.1.0.10/24}]}
  - {name: b, host: hv2, nics: [{network: n1, ip: 10.1.0.11/24}]}
`

// TestLoadUsesTheStoredEncoding: a spec stored with its encoding is made
// of the encoding, not of its YAML. The encoding here carries a VM name
// the YAML does not, which shows which one the agent read.
func TestLoadUsesTheStoredEncoding(t *testing.T) {
	doc, err := spec.Load("lab.yaml", []byte(loadSpec))
	if err != nil {
		t.Fatal(err)
	}
	doc.Spec.VMs[0].Name = "from-encoding"
	rec := &store.Record{Name: "lab", SpecFile: "lab.yaml", Spec: doc.Source, SpecEncoded: speccache.EncodeValidated(doc)}
	got, err := (&Agent{}).load(rec)
	if err != nil {
		t.Fatal(err)
	}
	if name := got.Spec.VMs[0].Name; name != "from-encoding" {
		t.Fatalf("VM %q: the agent decoded the YAML", name)
	}

	// Another build's or a damaged encoding: the YAML.
	rec.SpecEncoded[len(rec.SpecEncoded)-1] ^= 0xff
	got, err = (&Agent{}).load(rec)
	if err != nil {
		t.Fatal(err)
	}
	if name := got.Spec.VMs[0].Name; name != "a" {
		t.Fatalf("VM %q from a damaged encoding, want the YAML's", name)
	}
}
