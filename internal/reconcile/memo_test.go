package reconcile

import (
	"testing"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
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

// An apply sweeps when the pending note says the last command did not
// finish, on a full pass, and, on one machine, before a first record or
// after another build's; otherwise not, whichever process applies (a new
// one, a server, a host agent).
func TestApplySweepsWhenTheNoteCannotProveTheLastCommandFinished(t *testing.T) {
	st, err := store.OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	applied := []byte("name: a\n")
	memo := &Memo{}
	memo.put("a", applied, &spec.Spec{Name: "a"}, plan.Options{}, nil, nil, nil)
	rec := &store.Record{Name: "a", Spec: applied, Engine: engineBuild()}
	tests := []struct {
		name    string
		e       *Engine
		rec     *store.Record
		pending bool
		sweep   bool
	}{
		{"a new process", &Engine{Store: st}, rec, false, false},
		{"the memo holds the record", &Engine{Store: st, Memo: memo}, rec, false, false},
		{"the record was written by another process", &Engine{Store: st, Memo: memo}, &store.Record{Name: "a", Spec: []byte("name: a\n# other\n"), Engine: engineBuild()}, false, false},
		{"the record was written by another build", &Engine{Store: st}, &store.Record{Name: "a", Spec: applied, Engine: "other"}, false, true},
		{"no record (a first apply, or destroyed since)", &Engine{Store: st, Memo: memo}, nil, false, true},
		{"an apply did not finish", &Engine{Store: st}, rec, true, true},
		{"an apply did not finish, the memo holds the record", &Engine{Store: st, Memo: memo}, rec, true, true},
		{"a full apply", &Engine{Store: st, Memo: memo, Full: true}, rec, false, true},
		{"a host agent's pass", &Engine{Store: st, Host: "hv1"}, rec, false, false},
		{"a host agent's pass after an unfinished apply", &Engine{Store: st, Host: "hv1"}, rec, true, true},
	}
	for _, tt := range tests {
		if tt.pending {
			if err := st.SetPending("a"); err != nil {
				t.Fatal(err)
			}
		}
		if got := tt.e.mustSweep("a", tt.rec); got != tt.sweep {
			t.Errorf("%s: sweeps %v, want %v", tt.name, got, tt.sweep)
		}
		if err := st.ClearPending("a"); err != nil {
			t.Fatal(err)
		}
	}
}
