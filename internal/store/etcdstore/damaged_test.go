package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/spec/spectest"
	"github.com/vnet-project/vnet/internal/store"
)

const goodSpec = `name: %s
hosts: [{name: hv1, underlay: 192.0.2.1}]
networks: [{name: n1, subnet: 10.1.0.0/24, vni: 10}]
vms: [{name: vm1, host: hv1, nics: [{network: n1, ip: 10.1.0.10/24}]}]
`

// stored is the record of name as vnet apply --etcd stores the spec src:
// with its encoding when it validates.
func stored(name, src string) *store.Record {
	r := &store.Record{Name: name, SpecFile: name + ".yaml", Spec: []byte(src), Generation: 3}
	if doc, err := spec.Load(r.SpecFile, r.Spec); err == nil {
		r.SpecEncoded = speccache.EncodeValidated(doc)
	}
	return r
}

func value(t *testing.T, r *store.Record) string {
	t.Helper()
	v, err := store.EncodeValue(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// invalidEncoding is the record of src, valid YAML, whose encoding, bound
// to that YAML, holds a spec that does not validate: a VM whose name
// would make a namespace outside vnet's.
func invalidEncoding(t *testing.T, name, src string) *store.Record {
	t.Helper()
	doc, err := spec.Load(name+".yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	doc.Spec.VMs[0].Name = "../../evil"
	return &store.Record{Name: name, SpecFile: name + ".yaml", Spec: []byte(src), Generation: 3, SpecEncoded: speccache.EncodeValidated(doc)}
}

// damages are what may stand under /vnet/infra/NAME: the value etcd
// holds, and whether its record reads (a damaged spec is the record's
// spec failing to load) or not at all.
func damages(t *testing.T, name string) []struct {
	name, value string
	specOnly    bool // the record reads; its spec does not load
	shown       bool // but it decodes, for status to show (DocVia)
} {
	big := value(t, stored(name, string(spectest.Networks(300))))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rand.IntN(256))
	}
	return []struct {
		name, value string
		specOnly    bool
		shown       bool
	}{
		{"random bytes", string(random), false, false},
		{"empty", "", false, false},
		{"cut compressed record", big[:len(big)/2], false, false},
		{"JSON of another shape", `{"name": 5, "generation": "x"}`, false, false},
		{"a JSON list", `[1, 2, 3]`, false, false},
		{"the record of another infrastructure", value(t, stored("other", fmt.Sprintf(goodSpec, "other"))), false, false},
		{"YAML that does not parse", value(t, &store.Record{Name: name, Spec: []byte("name: " + name + "\nvms: [{name: x\n")}), true, false},
		{"YAML that does not validate", value(t, &store.Record{Name: name, Spec: []byte("name: " + name + "\nvms: [{name: x, host: nowhere}]\n")}), true, true},
		{"YAML of another infrastructure", value(t, stored(name, fmt.Sprintf(goodSpec, "other"))), true, false},
	}
}

// One damaged record is its own infrastructure's: List lists it as
// damaged beside the others as they are, GetRev returns it with its
// revision, its spec does not load (an error naming the damage), and an
// apply or a destroy replaces or removes it.
func TestDamagedRecordIsItsInfrastructuresAlone(t *testing.T) {
	s := openStore(t, startEtcd(t).Endpoint())
	for _, d := range damages(t, "bad") {
		t.Run(d.name, func(t *testing.T) {
			good := stored("good", fmt.Sprintf(goodSpec, "good"))
			if err := s.Put(good); err != nil {
				t.Fatal(err)
			}
			if _, err := s.cli.Put(context.Background(), s.infraKey("bad"), d.value); err != nil {
				t.Fatal(err)
			}
			recs, err := s.List()
			if err != nil || len(recs) != 2 || recs[0].Name != "bad" || recs[1].Name != "good" {
				t.Fatalf("List: %v, %v", recs, err)
			}
			if (recs[0].Damage == nil) != d.specOnly || recs[1].Damage != nil {
				t.Fatalf("listed as damaged: %v, %v", recs[0].Damage, recs[1].Damage)
			}
			if _, err := recs[1].Valid(nil); err != nil {
				t.Fatalf("the good record: %v", err)
			}
			rec, rev, err := s.GetRev("bad")
			if err != nil || rev == 0 {
				t.Fatalf("GetRev: %v, revision %d", err, rev)
			}
			for what, load := range map[string]func() error{
				"Valid":  func() error { _, err := rec.Valid(nil); return err },
				"DocVia": func() error { _, err := rec.DocVia(nil); return err },
			} {
				err := load()
				if what == "DocVia" && d.shown {
					if err != nil {
						t.Fatalf("DocVia: %v", err)
					}
					continue
				}
				if err == nil {
					t.Fatalf("%s of the damaged record loaded", what)
				}
				if !d.specOnly && !errors.Is(err, store.ErrDamagedRecord) {
					t.Fatalf("%s: %v, want ErrDamagedRecord", what, err)
				}
			}
			// A record that reads is the agents' to judge; one that does not
			// is not stored back.
			if err := s.Put(rec); !d.specOnly && !errors.Is(err, store.ErrDamagedRecord) {
				t.Fatalf("storing a damaged record back: %v", err)
			}
			if d.specOnly {
				_, rev, _ = s.GetRev("bad")
			}
			// An apply replaces it; a destroy removes it.
			if _, err := s.PutIf(stored("bad", fmt.Sprintf(goodSpec, "bad")), rev); err != nil {
				t.Fatalf("apply over the damaged record: %v", err)
			}
			if rec, _, err := s.GetRev("bad"); err != nil || rec.Damage != nil {
				t.Fatalf("after the apply: %v, %v", rec.Damage, err)
			}
			if err := s.Delete("bad"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An encoding bound to the record's YAML but holding a spec that does not
// validate is ignored: the spec is the YAML's, for agents and status
// alike.
func TestEncodingOfAnInvalidSpecIsNotTaken(t *testing.T) {
	src := fmt.Sprintf(goodSpec, "inc")
	rec := invalidEncoding(t, "inc", src)
	if doc, err := speccache.DecodeValidated(rec.SpecFile, rec.Spec, rec.SpecEncoded); err != nil || doc.Spec.VMs[0].Name != "../../evil" {
		t.Fatalf("the encoding does not hold the invalid spec the test means: %v", err)
	}
	for what, load := range map[string]func() (*spec.Document, error){
		"Valid": func() (*spec.Document, error) { return rec.Valid(nil) }, "DocVia": func() (*spec.Document, error) { return rec.DocVia(nil) },
	} {
		doc, err := load()
		if err != nil || doc.Spec.VMs[0].Name != "vm1" {
			t.Fatalf("%s: %v, %v", what, doc, err)
		}
	}
}
