package reconcile

import (
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

func TestMemoKeepsWhatWasMadeOfTheSameBytes(t *testing.T) {
	s := &spec.Spec{Name: "a"}
	model := []plan.Resource{{Kind: plan.KindNetns, Name: "vnet.a.x"}}
	opt := plan.Options{Host: "hv1", NumCPU: 2}
	var m Memo
	m.put("a", []byte("name: a\n"), s, opt, model, nil, nil)
	tests := []struct {
		name  string
		infra string
		src   string
		opt   plan.Options
		hit   bool
	}{
		{"the same bytes and options", "a", "name: a\n", opt, true},
		{"other bytes", "a", "name: a\n# changed\n", opt, false},
		{"another host", "a", "name: a\n", plan.Options{Host: "hv2", NumCPU: 2}, false},
		{"another infrastructure", "b", "name: a\n", opt, false},
		{"no device speeds read this time", "a", "name: a\n", plan.Options{Host: "hv1", NumCPU: 2, DeviceSpeeds: map[string]uint64{}}, true},
		{"other device speeds", "a", "name: a\n", plan.Options{Host: "hv1", NumCPU: 2, DeviceSpeeds: map[string]uint64{"eth1": 1e9}}, false},
		{"an uplink down", "a", "name: a\n", plan.Options{Host: "hv1", NumCPU: 2, Down: map[string]bool{"eth1": true}}, false},
	}
	for _, tt := range tests {
		gs, gm, ok := m.get(tt.infra, []byte(tt.src), tt.opt)
		if ok != tt.hit || ok && (gs != s || len(gm) != 1) {
			t.Errorf("%s: got %v, %d resources, %v; want hit %v", tt.name, gs, len(gm), ok, tt.hit)
		}
	}
	m.Forget("a")
	if _, _, ok := m.get("a", []byte("name: a\n"), opt); ok {
		t.Error("kept after Forget")
	}
	var none *Memo
	none.put("a", nil, s, opt, model, nil, nil)
	if _, _, ok := none.get("a", nil, opt); ok {
		t.Error("a nil Memo kept something")
	}
}
