package spec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeVM(t *testing.T) {
	tests := []struct {
		name, src string
		want      VM
		errPath   string // the first problem's field path, when it fails
		errPos    Pos
	}{
		{name: "block YAML", src: "name: web1\nhost: hv1\nnics:\n  - portgroup: pg\n    ip: 10.9.0.1/24\n",
			want: VM{Name: "web1", Host: "hv1", NICs: []VNIC{{PortGroup: "pg", IP: "10.9.0.1/24"}}}},
		{name: "flow YAML", src: `{name: web1, host: hv1, nics: [{portgroup: pg}]}`,
			want: VM{Name: "web1", Host: "hv1", NICs: []VNIC{{PortGroup: "pg"}}}},
		{name: "JSON over lines", src: "{\n  \"host\": \"hv1\",\n  \"cpus\": 0.5,\n  \"nics\": [{\"portgroup\": \"pg\"}]\n}\n",
			want: VM{Host: "hv1", CPUs: 0.5, NICs: []VNIC{{PortGroup: "pg"}}}},
		{name: "an unknown field, at the body's line", src: "name: web1\nhost: hv1\nnics:\n  - portgroup: pg\n    ipp: 10.9.0.1/24\n",
			errPath: "nics[0].ipp", errPos: Pos{5, 5}},
		{name: "a wrong type, at the body's line", src: "name: web1\ncpus: many\n", errPath: "cpus", errPos: Pos{2, 7}},
		{name: "not a mapping", src: "- name: web1\n", errPath: ""},
		{name: "bad YAML", src: "name: [web1\n", errPath: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := DecodeVM("body", []byte(tt.src))
			if tt.errPath != "" || tt.errPos != (Pos{}) || err != nil {
				var errs Errors
				if !errors.As(err, &errs) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("error %v, want Errors", err)
				}
				if errs[0].Path != tt.errPath || tt.errPos != (Pos{}) && errs[0].Pos != tt.errPos {
					t.Errorf("problem %s at %v, want %s at %v", errs[0].Path, errs[0].Pos, tt.errPath, tt.errPos)
				}
				return
			}
			if !reflect.DeepEqual(e.VM, tt.want) {
				t.Errorf("VM %+v, want %+v", e.VM, tt.want)
			}
		})
	}
}

// TestVMEntryRelocate: the problems of the edited item name the entry's
// own paths at its body's lines; those of the rest keep the spec's paths
// without a line.
func TestVMEntryRelocate(t *testing.T) {
	e, err := DecodeVM("body", []byte("host: hv1\nnics:\n  - portgroup: nope\n"))
	if err != nil {
		t.Fatal(err)
	}
	in := Errors{
		{Path: "vms[3].nics[0].portgroup", Msg: "no such port group", Pos: Pos{40, 30}},
		{Path: "vms[3]", Msg: "whole", Pos: Pos{40, 5}},
		{Path: "vms[30].name", Msg: "other", Pos: Pos{90, 3}},
		{Path: "vms[1].nics[0].ip", Msg: "taken", Pos: Pos{12, 3}},
	}
	got := e.Relocate(in, 3)
	want := Errors{
		{Path: "nics[0].portgroup", Msg: "no such port group", Pos: Pos{3, 16}},
		{Path: "", Msg: "whole", Pos: Pos{1, 1}},
		{Path: "vms[30].name", Msg: "other"},
		{Path: "vms[1].nics[0].ip", Msg: "taken"},
	}
	if !reflect.DeepEqual(got, want) {
		for i := range got {
			t.Errorf("got %+v, want %+v", *got[i], *want[i])
		}
	}
}

// TestDecodeVMMessageLines: a parser's message names the body's line, not
// the line of the spec the entry is decoded in.
func TestDecodeVMMessageLines(t *testing.T) {
	_, err := DecodeVM("body", []byte("host: hv1\nnics: []\n---\nhost: hv2\n"))
	var errs Errors
	if !errors.As(err, &errs) || errs[0].Pos.Line != 3 || !strings.Contains(errs[0].Msg, "line 3") {
		t.Errorf("error %v, want one at line 3 that says so", err)
	}
}
