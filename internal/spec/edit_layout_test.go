package spec

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

const layoutBase = `name: lay
hosts:
  - {name: hv1, nics: [{name: vmnic0, speed: 1Gbit}], underlay: 192.0.2.1}
switches:
  - name: dvs0
    uplinks: [{name: up1, nics: {hv1: vmnic0}}]
    portgroups: [{name: pg, subnet: 10.9.0.0/24}]
networks:
  - {name: net1, subnet: 10.8.0.0/24, subnet6: "fd00:8::/64"}
vms:
  # the user's own
  - name: web1
    host: hv1
    nics: [{portgroup: pg, ip: 10.9.0.1/24}]
hostports:
  - {host: hv1, portgroup: pg, ip: 10.9.0.251/24}
`

// editInText is EditVMs without a layout: the whole text read for the
// items, each VM looked up, the written ones checked against all others.
func editInText(t *testing.T, doc *Document, drop []string, put []VM) (*Document, error) {
	t.Helper()
	dropped, replaced := map[string]bool{}, map[string]int{}
	for _, n := range drop {
		dropped[n] = true
	}
	for i, vm := range put {
		replaced[vm.Name] = i
	}
	out, tail, ok := editVMsInText(doc, dropped, replaced, put)
	if !ok {
		t.Fatal("not a block list")
	}
	if next, ok := spliceVMs(doc, out, tail, dropped, replaced, put); ok {
		return next, nil
	}
	return Load(doc.File, out)
}

// A chain of edits, each of the document the one before made (as a
// server makes them: containers added and taken out, a VM written
// anew, some with what another VM has), makes with the layout it keeps
// what it makes without: the same text, the same VMs, the same refusals.
func TestEditVMsLayoutChain(t *testing.T) {
	doc, err := Load("lay.yaml", []byte(layoutBase))
	if err != nil {
		t.Fatal(err)
	}
	doc.edited = true // as an edit's, which the next edit reads the layout of
	rnd := rand.New(rand.NewPCG(3, 4))
	names := []string{"web1"}
	for step := range 300 {
		var drop []string
		var put []VM
		switch op := rnd.IntN(10); {
		case op < 5 || len(names) < 2: // a container added: on the port group, the network or a TAP
			name := fmt.Sprintf("c%d", step)
			n := VNIC{PortGroup: "pg", IP: fmt.Sprintf("10.9.0.%d/24", 2+rnd.IntN(200)), MAC: fmt.Sprintf("02:00:00:00:%02x:%02x", step/256, step%256),
				Attach: &Attach{Netns: "ns-" + name, Ifname: "eth0", Container: name}}
			switch rnd.IntN(4) {
			case 0:
				n.PortGroup, n.Network = "", "net1"
				n.IP, n.IP6 = fmt.Sprintf("10.8.0.%d/24", 2+rnd.IntN(200)), fmt.Sprintf("fd00:8::%x/64", 2+rnd.IntN(200))
			case 1:
				n.Attach = &Attach{Tap: fmt.Sprintf("tap%d", rnd.IntN(100)), Container: name}
			case 2:
				n.MAC = fmt.Sprintf("02:00:00:00:00:%02x", rnd.IntN(200)) // may be another's
			}
			put = []VM{{Name: name, Host: "hv1", NICs: []VNIC{n}}}
		case op < 8:
			drop = []string{names[1+rnd.IntN(len(names)-1)]}
		default: // one written anew where it is, with another address
			put = []VM{{Name: names[rnd.IntN(len(names))], Host: "hv1", NICs: []VNIC{{PortGroup: "pg", IP: fmt.Sprintf("10.9.0.%d/24", 2+rnd.IntN(250))}}}}
		}
		want, wantErr := editInText(t, doc, drop, put)
		got, err := EditVMs(doc, drop, put)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("step %d: %v, without the layout %v", step, err, wantErr)
		}
		if err != nil {
			if doc.takeLayout() == nil {
				t.Fatalf("step %d: a refused edit lost the document's layout", step)
			}
			continue
		}
		if string(got.Source) != string(want.Source) {
			t.Fatalf("step %d: text\n%s\nwithout the layout\n%s", step, got.Source, want.Source)
		}
		if !reflect.DeepEqual(got.Spec.VMs, want.Spec.VMs) {
			t.Fatalf("step %d: VMs differ from those without the layout", step)
		}
		if l := got.takeLayout(); l == nil {
			t.Fatalf("step %d: no layout kept", step)
		} else {
			sameLayout(t, step, got, l)
			got.keepLayout(l)
		}
		doc = got
		names = names[:0]
		for _, vm := range doc.Spec.VMs {
			names = append(names, vm.Name)
		}
	}
	if len(names) < 10 || !strings.Contains(string(doc.Source), "# the user's own") {
		t.Fatalf("the chain ends with %d VMs", len(names))
	}
}

// sameLayout checks a kept layout against the one read of the document.
func sameLayout(t *testing.T, step int, doc *Document, l *vmLayout) {
	t.Helper()
	read, ok := layoutOf(doc)
	if !ok {
		t.Fatalf("step %d: no layout reads of the document", step)
	}
	if !reflect.DeepEqual(l.items, read.items) || !reflect.DeepEqual(l.keys, read.keys) {
		t.Fatalf("step %d: kept items %+v, keys %d; read %+v, keys %d", step, l.items, len(l.keys), read.items, len(read.keys))
	}
	for name, at := range read.at {
		if l.find(doc.Spec.VMs, name) != at {
			t.Fatalf("step %d: VM %s not found at %d", step, name, at)
		}
	}
}
