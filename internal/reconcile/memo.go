package reconcile

import (
	"bytes"
	"reflect"
	"sync"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// Memo keeps, per infrastructure, the spec of the last apply and its model
// (made without observation), for a process that applies again and again:
// a host agent's next pass finds its record's spec here, by its bytes,
// instead of decoding and modelling it once more, which for a spec of
// thousands of virtual networks costs more than the change. A nil Memo
// keeps nothing.
type Memo struct {
	mu      sync.Mutex
	byInfra map[string]memoEntry
}

type memoEntry struct {
	src   []byte
	spec  *spec.Spec
	opt   plan.Options
	model []plan.Resource
	keys  []string   // of model's resources, when a splice worked them out
	room  *plan.Room // where model may grow in place (plan.Room), or nil
	// desired is the desired state the apply made of model when
	// observation told nothing (modelSet.plain), or nil.
	desired []plan.Resource
}

// get returns the spec and model kept for infra when they were made of
// src with opt.
func (m *Memo) get(infra string, src []byte, opt plan.Options) (*spec.Spec, []plan.Resource, bool) {
	e, ok := m.entry(infra, src, opt)
	return e.spec, e.model, ok
}

// entry is what is kept for infra when it was made of src with opt.
func (m *Memo) entry(infra string, src []byte, opt plan.Options) (memoEntry, bool) {
	if m == nil {
		return memoEntry{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byInfra[infra]
	if !ok || !bytes.Equal(e.src, src) || !sameOptions(e.opt, opt) {
		return memoEntry{}, false
	}
	return e, true
}

// put keeps what an apply recorded: its spec's source, the spec, and its
// model made with opt, with the model's keys and room when a splice made
// it (sp, nil: none) and the desired state made of it when observation
// told nothing (nil: none).
func (m *Memo) put(infra string, src []byte, s *spec.Spec, opt plan.Options, model []plan.Resource, sp *plan.Splice, desired []plan.Resource) {
	if m == nil {
		return
	}
	var keys []string
	var room *plan.Room
	if sp != nil && plan.SameModel(sp.Model, model) {
		keys, room = sp.Keys, sp.Room
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byInfra == nil {
		m.byInfra = map[string]memoEntry{}
	}
	m.byInfra[infra] = memoEntry{src: src, spec: s, opt: opt, model: model, keys: keys, room: room, desired: desired}
}

// lastSpec is the spec of the last apply kept for infra, or nil.
func (m *Memo) lastSpec(infra string) *spec.Spec {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byInfra[infra].spec
}

// Forget drops what is kept for infra.
func (m *Memo) Forget(infra string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byInfra, infra)
}

// sameOptions reports whether a model made with a is the one made with b:
// an empty map of the options (no device speeds read: none checked, as on
// a host none of whose VMs changed) is no map.
func sameOptions(a, b plan.Options) bool {
	return reflect.DeepEqual(withoutEmptyMaps(a), withoutEmptyMaps(b))
}

func withoutEmptyMaps(o plan.Options) plan.Options {
	if len(o.Teams) == 0 {
		o.Teams = nil
	}
	if len(o.Down) == 0 {
		o.Down = nil
	}
	if len(o.PoolCeils) == 0 {
		o.PoolCeils = nil
	}
	if len(o.DeviceSpeeds) == 0 {
		o.DeviceSpeeds = nil
	}
	o.Paused = o.Paused.Normal()
	if len(o.LBDown) == 0 {
		o.LBDown = nil
	}
	return o
}
