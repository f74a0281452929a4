package bpfpolicy

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Programs are the port programs of one host namespace and their maps:
// every protected port there runs FromVM in its ingress hook and ToVM in
// its egress hook, and its policy is its entry in the maps, keyed by its
// interface index (unique within the namespace only, hence a set per
// namespace). Loading them is what the verifier checks, once per set;
// a port then costs map writes.
type Programs struct {
	FromVM, ToVM *ebpf.Program
	ports        *ebpf.Map // port index -> policyPort
	fdb          *ebpf.Map // bridge and MAC -> port index and whether it has an ACL, of ports that take frames directly
	counts       *ebpf.Map // port, generation and index -> a count
	rulesOf      *ebpf.Map // port and generation -> the port's rules
	flowsOf      *ebpf.Map // port -> its flow table
	fragsOf      *ebpf.Map // port -> its fragment table
	settings     *ebpf.Map // what vnet found of the kernel (policyKernelSettings)

	staged    map[uint32]staged // by port: what Stage wrote ahead of its Set
	deferring bool              // Defer: retired rules wait for Flush
	retired   []policyGenKey
}

// The maps' names, as the programs hold them: how Open finds them.
const (
	mapPorts    = "ports"
	mapFDB      = "direct_ports"
	mapCounts   = "counts"
	mapRulesOf  = "rules_of"
	mapFlowsOf  = "flows_of"
	mapFragsOf  = "frags_of"
	mapSettings = "settings"
)

// MaxFlows is how many connections a port with an ACL remembers (the
// size of its flow table): beyond it the least recently used is
// forgotten, and its next packet is judged by the rules again.
const MaxFlows = 4096

const maxFrags = 1024

// MaxPorts is how many ports one namespace's programs serve.
const MaxPorts = 16384

var (
	specOnce sync.Once
	specErr  error
	baseSpec *ebpf.CollectionSpec
)

func collectionSpec() (*ebpf.CollectionSpec, error) {
	specOnce.Do(func() { baseSpec, specErr = loadPolicy() })
	return baseSpec, specErr
}

// Load loads the programs with maps of their own, or, from reuse (the
// programs an earlier build of vnet left in the namespace, or nil), with
// those of its maps that have the same layout: then the two sets share
// the ports' settings and tables while the namespace runs both.
func Load(reuse *Programs) (*Programs, error) {
	spec, err := collectionSpec()
	if err != nil {
		return nil, err
	}
	return loadSpec(spec, reuse)
}

func loadSpec(spec *ebpf.CollectionSpec, reuse *Programs) (*Programs, error) {
	var opts ebpf.CollectionOptions
	if reuse != nil {
		opts.MapReplacements = map[string]*ebpf.Map{}
		for name, m := range reuse.shared() {
			if m != nil && spec.Maps[name].Compatible(m) == nil {
				opts.MapReplacements[name] = m
			}
		}
	}
	var objs policyObjects
	if err := spec.LoadAndAssign(&objs, &opts); err != nil {
		return nil, fmt.Errorf("load port policy programs: %w", err)
	}
	// The inner maps' templates have served the kernel to check the
	// outer maps' programs; ports get maps of their own.
	for _, m := range []*ebpf.Map{objs.RulesMap, objs.FlowsMap, objs.FragsMap} {
		m.Close()
	}
	return &Programs{FromVM: objs.PortFromVm, ToVM: objs.PortToVm, ports: objs.Ports, fdb: objs.DirectPorts,
		counts: objs.Counts, rulesOf: objs.RulesOf, flowsOf: objs.FlowsOf, fragsOf: objs.FragsOf, settings: objs.Settings}, nil
}

func (p *Programs) shared() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{mapPorts: p.ports, mapFDB: p.fdb, mapCounts: p.counts, mapRulesOf: p.rulesOf,
		mapFlowsOf: p.flowsOf, mapFragsOf: p.fragsOf, mapSettings: p.settings}
}

// Open opens the programs a port runs, by their IDs, with their maps. A
// port's programs of an earlier build may lack some of the maps; those
// stay nil.
func Open(fromVM, toVM ebpf.ProgramID) (*Programs, error) {
	p := &Programs{}
	var err error
	if p.FromVM, err = ebpf.NewProgramFromID(fromVM); err != nil {
		return nil, fmt.Errorf("open port program %d: %w", fromVM, err)
	}
	if p.ToVM, err = ebpf.NewProgramFromID(toVM); err != nil {
		p.Close()
		return nil, fmt.Errorf("open port program %d: %w", toVM, err)
	}
	maps, err := mapsOf(p.FromVM)
	if err != nil {
		p.Close()
		return nil, err
	}
	for name, dst := range map[string]**ebpf.Map{mapPorts: &p.ports, mapFDB: &p.fdb, mapCounts: &p.counts,
		mapRulesOf: &p.rulesOf, mapFlowsOf: &p.flowsOf, mapFragsOf: &p.fragsOf, mapSettings: &p.settings} {
		*dst = maps[name]
		delete(maps, name)
	}
	for _, m := range maps {
		m.Close()
	}
	return p, nil
}

// mapsOf opens the maps a program uses, by name.
func mapsOf(prog *ebpf.Program) (map[string]*ebpf.Map, error) {
	info, err := prog.Info()
	if err != nil {
		return nil, err
	}
	ids, _ := info.MapIDs()
	out := map[string]*ebpf.Map{}
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue
		}
		mi, err := m.Info()
		if err != nil || out[mi.Name] != nil {
			m.Close()
			continue
		}
		out[mi.Name] = m
	}
	return out, nil
}

// Complete reports whether the programs have every map this build's do:
// those of an earlier build serve only to hand their maps on.
func (p *Programs) Complete() bool {
	for _, m := range p.shared() {
		if m == nil {
			return false
		}
	}
	return true
}

// Close lets go of the programs and maps; those attached stay in the
// kernel with their filters.
func (p *Programs) Close() {
	for _, c := range []interface{ Close() error }{p.FromVM, p.ToVM, p.ports, p.fdb, p.counts, p.rulesOf, p.flowsOf, p.fragsOf, p.settings} {
		if c != nil && !isNilMap(c) && !isNilProgram(c) {
			c.Close()
		}
	}
}

func isNilMap(c interface{ Close() error }) bool {
	m, ok := c.(*ebpf.Map)
	return ok && m == nil
}

func isNilProgram(c interface{ Close() error }) bool {
	p, ok := c.(*ebpf.Program)
	return ok && p == nil
}

// The fast path's states in the programs' settings.
const (
	fastPathUnknown = 0 // vnet has not found out yet: frames cross the bridge
	fastPathOn      = 1
	fastPathOff     = 2 // the kernel cannot: frames cross the bridge
)

// FastPath reads whether frames go past the bridge between the ports
// (on), and whether vnet has found out whether the kernel can (known).
func (p *Programs) FastPath() (on, known bool, err error) {
	var s policyKernelSettings
	if err := p.settings.Lookup(uint32(0), &s); err != nil {
		return false, false, err
	}
	return s.FastPath == fastPathOn, s.FastPath != fastPathUnknown, nil
}

// SetFastPath records whether the kernel hands frames past the bridge as
// the fast path needs: until it is on, ports that take frames directly
// take them through the bridge.
func (p *Programs) SetFastPath(on bool) error {
	s := policyKernelSettings{FastPath: fastPathOff}
	if on {
		s.FastPath = fastPathOn
	}
	return p.settings.Update(uint32(0), s, ebpf.UpdateAny)
}

// ErrNoPort is a port the programs hold no settings for.
var ErrNoPort = errors.New("no such port in the port programs' maps")

func (p *Programs) port(port uint32) (policyPort, error) {
	var v policyPort
	err := p.ports.Lookup(port, &v)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return v, fmt.Errorf("port %d: %w", port, ErrNoPort)
	}
	return v, err
}

// Set writes a port's policy: new counters and rules when its rules
// change (those it has are kept otherwise, and their counts go on), its
// flow and fragment tables (those it has are kept, so that a changed
// policy does not cut connections it let through; flows, when not nil, is
// the flow table of an earlier build's programs on the port, taken over
// likewise), and then its settings in one write, which switches it to all
// of them. bridge is the index of the port's bridge (0 for none); a port
// whose policy says Direct takes frames past the bridge from the bridge's
// other ports, once the fast path is on (SetFastPath).
//
// A port without an ACL costs writes to plain hash tables only; one with
// an ACL also writes the maps of maps that hold its rules and tables, each
// write of which waits until no CPU still runs the programs with the old
// entry (synchronize_rcu, milliseconds): Stage makes those writes for many
// ports with one such wait, ahead of their Set.
func (p *Programs) Set(port uint32, c Compiled, bridge uint32, flows *ebpf.Map) error {
	if err := p.Stage([]Staged{{Port: port, Policy: c, Flows: flows}}); err != nil {
		return err
	}
	old, err := p.port(port)
	had := err == nil
	if err != nil && !errors.Is(err, ErrNoPort) {
		return err
	}
	next := c.Port
	next.Bridge = bridge
	if bridge == 0 {
		next.Direct = 0
	}
	acl := next.Flags&flagACL != 0
	oldKey := policyGenKey{Port: port, Gen: old.Gen}
	same := p.sameAs(port, old, had, c)
	next.Gen = old.Gen
	if !same {
		next.Gen = old.Gen + 1
		if err := p.newCounts(port, next.Gen, c.Counters); err != nil {
			return err
		}
	}
	// Frames stop being handed to the port under its old listing before
	// its settings change: a listing must never say less than the
	// settings (a port without an ACL is handed frames on its listing
	// alone).
	if had && old.Direct != 0 && (next.Direct == 0 || listing(port, old) != listing(port, next)) {
		if err := p.unlist(port, old); err != nil {
			return err
		}
	}
	if err := p.ports.Update(port, next, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write port %d's settings: %w", port, mapFull(err))
	}
	delete(p.staged, port)
	if next.Direct != 0 {
		l := listing(port, next)
		if err := p.fdb.Update(l.key, l.to, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("list port %d as taking frames directly: %w", port, mapFull(err))
		}
	}
	if had && !same {
		p.deleteCounts(port, old.Gen)
		p.retire(oldKey)
	}
	if !acl {
		p.dropTables(port)
	}
	return nil
}

// Staged is a port whose policy is to be set, for Stage.
type Staged struct {
	Port   uint32
	Policy Compiled
	Flows  *ebpf.Map // an earlier build's flow table on the port, or nil
}

// staged is what Stage found and wrote for a port ahead of its Set.
type staged struct {
	gen   uint32 // the generation the port had
	same  bool   // its rules and counters stay
	rules []policyRule
}

// Stage writes, for ports whose policy is to be set, what their Set would
// write to maps of maps: the rules of each port's next generation, which
// no frame reads before its Set switches the port to it, and the flow and
// fragment tables of ports with an ACL, which the programs read only for
// a port whose settings have an ACL (a port given an ACL has them before
// its settings say so; one that keeps its ACL keeps its tables). Each
// write to a map of maps waits for the programs (see Set): Stage puts all
// of one map's entries in one batch, and the three maps' batches at once,
// so that their waits overlap. A Set of the same policy then writes none.
func (p *Programs) Stage(ports []Staged) error {
	spec, err := collectionSpec()
	if err != nil {
		return err
	}
	var rules, flows, frags puts
	defer func() {
		for _, b := range []*puts{&rules, &flows, &frags} {
			b.closeMade()
		}
	}()
	plans := map[uint32]staged{}
	for _, s := range ports {
		old, err := p.port(s.Port)
		had := err == nil
		if err != nil && !errors.Is(err, ErrNoPort) {
			return err
		}
		prev, done := p.staged[s.Port]
		done = done && prev.gen == old.Gen && slices.Equal(prev.rules, s.Policy.Rules)
		same := p.sameAs(s.Port, old, had, s.Policy)
		plans[s.Port] = staged{gen: old.Gen, same: same, rules: s.Policy.Rules}
		if !same && !done && len(s.Policy.Rules) > 0 {
			m, err := newRules(spec, s.Policy.Rules)
			if err != nil {
				return err
			}
			rules.add(policyGenKey{Port: s.Port, Gen: old.Gen + 1}, m, true)
		}
		if s.Policy.Port.Flags&flagACL == 0 {
			continue
		}
		if err := p.stageTables(spec, s, &flows, &frags); err != nil {
			return err
		}
	}
	if err := putAll(map[*ebpf.Map]*puts{p.rulesOf: &rules, p.flowsOf: &flows, p.fragsOf: &frags}); err != nil {
		return err
	}
	if p.staged == nil {
		p.staged = map[uint32]staged{}
	}
	maps.Copy(p.staged, plans)
	return nil
}

// sameAs reports whether a port's policy keeps the counters and rules it
// has (old, had: its settings): from what Stage found when it staged this
// policy, else read from the maps.
func (p *Programs) sameAs(port uint32, old policyPort, had bool, c Compiled) bool {
	if s, ok := p.staged[port]; ok && s.gen == old.Gen && slices.Equal(s.rules, c.Rules) {
		return s.same
	}
	return had && p.countsOf(port, old.Gen) == c.Counters && p.sameRules(policyGenKey{Port: port, Gen: old.Gen}, c.Rules)
}

// stageTables adds to flows and frags the tables a port with an ACL lacks:
// the flow table handed over (an earlier build's) when there is one, else
// a new one.
func (p *Programs) stageTables(spec *ebpf.CollectionSpec, s Staged, flows, frags *puts) error {
	if m := inner(p.flowsOf, s.Port); m != nil {
		m.Close()
	} else if s.Flows != nil && sameLayout(s.Flows, spec.Maps["flows_map"]) {
		flows.add(s.Port, s.Flows, false)
	} else {
		m, err := newTable(spec, "flows_map", MaxFlows)
		if err != nil {
			return fmt.Errorf("make port flow table: %w", err)
		}
		flows.add(s.Port, m, true)
	}
	if m := inner(p.fragsOf, s.Port); m != nil {
		m.Close()
		return nil
	}
	m, err := newTable(spec, "frags_map", maxFrags)
	if err != nil {
		return fmt.Errorf("make port fragment table: %w", err)
	}
	frags.add(s.Port, m, true)
	return nil
}

func newTable(spec *ebpf.CollectionSpec, name string, size uint32) (*ebpf.Map, error) {
	s := spec.Maps[name].Copy()
	s.MaxEntries = size
	return ebpf.NewMap(s)
}

// puts are the entries to write to one map of maps: keys of one type
// (policyGenKey or a port's index), and the maps they are to hold.
type puts struct {
	keys []any
	maps []*ebpf.Map
	made []*ebpf.Map // those made here, closed once written: the outer map holds them
}

func (b *puts) add(key any, m *ebpf.Map, made bool) {
	b.keys = append(b.keys, key)
	b.maps = append(b.maps, m)
	if made {
		b.made = append(b.made, m)
	}
}

func (b *puts) closeMade() {
	for _, m := range b.made {
		m.Close()
	}
}

// putAll writes each outer map's entries, the outer maps at once: the
// kernel waits for the programs once per write (a batch is one write), and
// concurrent waits end together.
func putAll(writes map[*ebpf.Map]*puts) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(writes))
	for outer, b := range writes {
		if len(b.keys) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- putBatch(outer, b)
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// putBatch writes one outer map's entries in one batch, else (kernels
// before 5.6, or a batch refused) one by one, which says which failed.
func putBatch(outer *ebpf.Map, b *puts) error {
	fds := make([]uint32, len(b.maps))
	for i, m := range b.maps {
		fds[i] = uint32(m.FD())
	}
	if n, err := outer.BatchUpdate(typedKeys(b.keys), fds, nil); err == nil && n == len(fds) {
		return nil
	}
	for i, k := range b.keys {
		if err := outer.Update(k, fds[i], ebpf.UpdateAny); err != nil {
			return fmt.Errorf("write port tables (%v): %w", k, mapFull(err))
		}
	}
	return nil
}

// typedKeys is keys as a slice of their one type, as a batch takes them.
func typedKeys(keys []any) any {
	switch keys[0].(type) {
	case policyGenKey:
		out := make([]policyGenKey, len(keys))
		for i, k := range keys {
			out[i] = k.(policyGenKey)
		}
		return out
	default:
		out := make([]uint32, len(keys))
		for i, k := range keys {
			out[i] = k.(uint32)
		}
		return out
	}
}

// Unstage takes back what Stage wrote for ports whose Set did not follow
// (an apply that failed before their step): the rules of their next
// generation, and the tables of ports whose settings have no ACL.
func (p *Programs) Unstage() {
	var dels []func()
	for port, s := range p.staged {
		delete(p.staged, port)
		if !s.same {
			dels = append(dels, func() { p.deleteRules(policyGenKey{Port: port, Gen: s.gen + 1}) })
		}
		if cfg, err := p.port(port); err != nil || cfg.Flags&flagACL == 0 {
			dels = append(dels, func() { p.dropTables(port) })
		}
	}
	together(dels...)
}

// Defer makes the rules ports leave (their generation before a change)
// wait for Flush to be deleted, all in one write, rather than each at its
// port's Set with a wait of its own.
func (p *Programs) Defer() { p.deferring = true }

// Flush deletes the rules ports left since Defer, and stops deferring.
// Rules it could not delete are left to the namespace's end: no port's
// settings name them, so no frame reads them.
func (p *Programs) Flush() {
	p.deferring = false
	keys := p.retired
	p.retired = nil
	if len(keys) == 0 {
		return
	}
	if n, err := p.rulesOf.BatchDelete(keys, nil); err == nil && n == len(keys) {
		return
	}
	for _, k := range keys {
		p.deleteRules(k)
	}
}

// retire deletes a generation's rules a port has left: now, or at Flush.
func (p *Programs) retire(key policyGenKey) {
	if !p.deferring {
		p.deleteRules(key)
		return
	}
	if m := inner(p.rulesOf, key); m != nil {
		m.Close()
		p.retired = append(p.retired, key)
	}
}

// countsOf returns how many counters a port has in a generation.
func (p *Programs) countsOf(port, gen uint32) int {
	var v uint64
	n := 0
	for p.counts.Lookup(policyCountKey{Port: port, Gen: gen, Idx: uint32(n)}, &v) == nil {
		n++
	}
	return n
}

// newCounts writes a generation's counters, all zero.
func (p *Programs) newCounts(port, gen uint32, n int) error {
	keys := make([]policyCountKey, n)
	for i := range keys {
		keys[i] = policyCountKey{Port: port, Gen: gen, Idx: uint32(i)}
	}
	if _, err := p.counts.BatchUpdate(keys, make([]uint64, n), nil); err != nil {
		// Kernels before 5.6 have no batch operations.
		for i := range keys {
			if err := p.counts.Update(keys[i], uint64(0), ebpf.UpdateAny); err != nil {
				p.deleteCounts(port, gen)
				return fmt.Errorf("write port %d's counters: %w", port, mapFull(err))
			}
		}
	}
	return nil
}

// deleteCounts deletes a generation's counters.
func (p *Programs) deleteCounts(port, gen uint32) {
	for i := uint32(0); p.counts.Delete(policyCountKey{Port: port, Gen: gen, Idx: i}) == nil; i++ {
	}
}

// deleteRules deletes a generation's rules, if there are any: each delete
// from a map of maps waits for the programs, so only what is there is
// deleted. dropTables likewise.
func (p *Programs) deleteRules(key policyGenKey) {
	if m := inner(p.rulesOf, key); m != nil {
		m.Close()
		deleteKeys(p.rulesOf, key)
	}
}

// dropTables deletes a port's flow and fragment tables, if it has them,
// both at once so that their waits overlap.
func (p *Programs) dropTables(port uint32) {
	var dels []func()
	for _, outer := range []*ebpf.Map{p.flowsOf, p.fragsOf} {
		if m := inner(outer, port); m != nil {
			m.Close()
			dels = append(dels, func() { deleteKeys(outer, port) })
		}
	}
	together(dels...)
}

// together runs fns at once and returns when all have: writes to maps of
// maps, whose waits for the programs then overlap.
func together(fns ...func()) {
	if len(fns) == 1 {
		fns[0]()
		return
	}
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn()
		}()
	}
	wg.Wait()
}

// sameRules reports whether a generation's rules are rules.
func (p *Programs) sameRules(key policyGenKey, rules []policyRule) bool {
	m := inner(p.rulesOf, key)
	if m == nil {
		return len(rules) == 0
	}
	defer m.Close()
	if int(m.MaxEntries()) != len(rules) {
		return false
	}
	var r policyRule
	for i := range rules {
		if m.Lookup(uint32(i), &r) != nil || r != rules[i] {
			return false
		}
	}
	return true
}

func newRules(spec *ebpf.CollectionSpec, rules []policyRule) (*ebpf.Map, error) {
	m, err := newTable(spec, "rules_map", uint32(len(rules)))
	if err != nil {
		return nil, fmt.Errorf("make port rules: %w", err)
	}
	keys := make([]uint32, len(rules))
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := m.BatchUpdate(keys, rules, nil); err != nil {
		// Kernels before 5.6 have no batch operations.
		for i := range rules {
			if err := m.Update(uint32(i), rules[i], ebpf.UpdateAny); err != nil {
				m.Close()
				return nil, fmt.Errorf("write port rules: %w", err)
			}
		}
	}
	return m, nil
}

// sameLayout reports whether a flow table of an earlier build's programs
// holds the entries this build's does: the same type and sizes.
func sameLayout(m *ebpf.Map, s *ebpf.MapSpec) bool {
	return m.Type() == s.Type && m.KeySize() == s.KeySize && m.ValueSize() == s.ValueSize && m.MaxEntries() == MaxFlows
}

// inner opens the map an outer map holds under key, or returns nil.
func inner(outer *ebpf.Map, key any) *ebpf.Map {
	var id uint32
	if outer == nil || outer.Lookup(key, &id) != nil {
		return nil
	}
	m, err := ebpf.NewMapFromID(ebpf.MapID(id))
	if err != nil {
		return nil
	}
	return m
}

func deleteKeys(m *ebpf.Map, keys ...any) {
	for _, k := range keys {
		_ = m.Delete(k) // absent is as good
	}
}

// directListing is a port's entry in the list of ports that take frames
// directly, as its settings make it.
type directListing struct {
	key policyFdbKey
	to  policyFdbPort
}

func listing(port uint32, cfg policyPort) directListing {
	l := directListing{key: policyFdbKey{Bridge: cfg.Bridge, Mac: cfg.Mac}, to: policyFdbPort{Port: port}}
	if cfg.Flags&flagACL != 0 {
		l.to.Acl = 1
	}
	return l
}

// unlist stops other ports handing the port frames directly.
func (p *Programs) unlist(port uint32, cfg policyPort) error {
	key := listing(port, cfg).key
	var at policyFdbPort
	if p.fdb.Lookup(key, &at) != nil || at.Port != port {
		return nil
	}
	if err := p.fdb.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unlist port %d: %w", port, err)
	}
	return nil
}

// Leave takes a port off the fast path before its bridge or state
// changes: no other port hands it frames past the bridge, nor it to
// others, until its policy is set again.
func (p *Programs) Leave(port uint32) error {
	cfg, err := p.port(port)
	if errors.Is(err, ErrNoPort) {
		return nil
	}
	if err != nil {
		return err
	}
	if cfg.Bridge == 0 && cfg.Direct == 0 {
		return nil
	}
	if err := p.unlist(port, cfg); err != nil {
		return err
	}
	cfg.Bridge, cfg.Direct = 0, 0
	return p.ports.Update(port, cfg, ebpf.UpdateExist)
}

// Remove forgets a port: its listing, settings, counters, rules and tables.
func (p *Programs) Remove(port uint32) error {
	cfg, err := p.port(port)
	if errors.Is(err, ErrNoPort) {
		p.dropTables(port)
		return nil
	}
	if err != nil {
		return err
	}
	if err := p.unlist(port, cfg); err != nil {
		return err
	}
	if err := p.ports.Delete(port); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("forget port %d: %w", port, err)
	}
	p.deleteCounts(port, cfg.Gen)
	delete(p.staged, port)
	together(func() { p.deleteRules(policyGenKey{Port: port, Gen: cfg.Gen}) }, func() { p.dropTables(port) })
	return nil
}

// Bridge reads the bridge a port's settings name (0 for none), and
// whether it takes frames directly.
func (p *Programs) Bridge(port uint32) (bridge uint32, direct bool, err error) {
	cfg, err := p.port(port)
	return cfg.Bridge, cfg.Direct != 0, err
}

// Ports lists the ports the programs hold settings for.
func (p *Programs) Ports() ([]uint32, error) {
	var out []uint32
	var next uint32
	// Keys alone: one call a port, not two.
	for err := p.ports.NextKey(nil, &next); ; err = p.ports.NextKey(out[len(out)-1], &next) {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(out) >= MaxPorts {
			return nil, fmt.Errorf("more than %d ports listed", MaxPorts)
		}
		out = append(out, next)
	}
	slices.Sort(out)
	return out, nil
}

// Flows opens a port's flow table, or returns nil.
func (p *Programs) Flows(port uint32) *ebpf.Map { return inner(p.flowsOf, port) }

// Counters reads a port's counters by label: those of the checks its
// policy has and of every ACL rule.
func (p *Programs) Counters(port uint32) (map[string]uint64, error) {
	cfg, err := p.port(port)
	if err != nil {
		return nil, err
	}
	n := p.countsOf(port, cfg.Gen)
	if n == 0 {
		return nil, fmt.Errorf("port %d has no counters", port)
	}
	return readCounters(n, cfg.Flags, func(i uint32) (uint64, error) {
		var v uint64
		err := p.counts.Lookup(policyCountKey{Port: port, Gen: cfg.Gen, Idx: i}, &v)
		return v, err
	})
}

// readCounters reads n counters by their index, leaving out the checks a
// policy of these flags does not have.
func readCounters(n int, flags uint8, get func(i uint32) (uint64, error)) (map[string]uint64, error) {
	has := map[int]bool{
		0: flags&flagGuardMAC != 0,
		1: flags&flagGuardIP != 0, 2: flags&flagGuardIP != 0, 3: flags&flagGuardIP != 0, 4: flags&flagGuardIP != 0,
		5: flags&flagGuardRA != 0,
		6: flags&flagUnicast != 0,
		7: flags&flagDeny != 0,
	}
	out := map[string]uint64{}
	for i := 0; i < n; i++ {
		if i < ruleBase && !has[i] {
			continue
		}
		v, err := get(uint32(i))
		if err != nil {
			return nil, err
		}
		out[Label(i)] = v
	}
	return out, nil
}

// ErrFull is a namespace whose programs hold as many ports as they can.
var ErrFull = fmt.Errorf("more than %d protected ports in one namespace", MaxPorts)

func mapFull(err error) error {
	if errors.Is(err, errNoSpace) {
		return fmt.Errorf("%w: %w", ErrFull, err)
	}
	return err
}

// errNoSpace is what the kernel answers a write to a full hash map.
var errNoSpace = unix.E2BIG

// Sweep deletes from the maps of maps what no port's settings name
// (Unnamed). Stage writes rules and tables ahead of the settings that name
// them, and Flush deletes the generations ports leave after; a process
// killed in between leaves them, each holding a map of its own, until the
// namespace goes. It returns how many it deleted. Only a caller that
// knows no one stages in the namespace meanwhile may sweep: what another
// process has staged and not yet set looks the same.
func (p *Programs) Sweep() (int, error) {
	rules, tables, err := p.unnamed()
	if err != nil {
		return 0, err
	}
	var dels []func()
	for _, k := range rules {
		dels = append(dels, func() { p.deleteRules(k) })
	}
	for _, port := range tables {
		dels = append(dels, func() { p.dropTables(port) })
	}
	together(dels...)
	return len(dels), nil
}

// Unnamed counts what no port's settings name in the maps of maps: the
// rules of a generation other than their port's, and the tables (a flow
// and a fragment table, counted once) of a port whose settings have no
// ACL, or that has none.
func (p *Programs) Unnamed() (int, error) {
	rules, tables, err := p.unnamed()
	return len(rules) + len(tables), err
}

func (p *Programs) unnamed() (rules []policyGenKey, tables []uint32, err error) {
	settings := map[uint32]*policyPort{}
	named := func(port uint32) (*policyPort, error) {
		if cfg, ok := settings[port]; ok {
			return cfg, nil
		}
		cfg, err := p.port(port)
		switch {
		case errors.Is(err, ErrNoPort):
			settings[port] = nil
			return nil, nil
		case err != nil:
			return nil, err
		}
		settings[port] = &cfg
		return &cfg, nil
	}
	keys, err := keysOf[policyGenKey](p.rulesOf)
	if err != nil {
		return nil, nil, fmt.Errorf("list the port programs' rules: %w", err)
	}
	for _, k := range keys {
		cfg, err := named(k.Port)
		if err != nil {
			return nil, nil, err
		}
		if cfg == nil || cfg.Gen != k.Gen {
			rules = append(rules, k)
		}
	}
	seen := map[uint32]bool{}
	for _, outer := range []*ebpf.Map{p.flowsOf, p.fragsOf} {
		ports, err := keysOf[uint32](outer)
		if err != nil {
			return nil, nil, fmt.Errorf("list the port programs' tables: %w", err)
		}
		for _, port := range ports {
			cfg, err := named(port)
			if err != nil {
				return nil, nil, err
			}
			if (cfg == nil || cfg.Flags&flagACL == 0) && !seen[port] {
				seen[port] = true
				tables = append(tables, port)
			}
		}
	}
	return rules, tables, nil
}

// keysOf lists a map's keys (none of a nil map): at most four for each
// port the programs may hold, a bound should the map change under it.
func keysOf[K any](m *ebpf.Map) ([]K, error) {
	if m == nil {
		return nil, nil
	}
	var out []K
	var key K
	it := m.Iterate()
	var val uint32
	for it.Next(&key, &val) {
		out = append(out, key)
		if len(out) > 4*MaxPorts {
			return nil, fmt.Errorf("more than %d entries in %v", 4*MaxPorts, m)
		}
	}
	return out, it.Err()
}

// FromVMName is the kernel's name of the program of the ports' ingress
// hooks: what a search of the machine's programs for a namespace's looks
// for (see Candidates).
const FromVMName = "port_from_vm"

// Candidates lists the machine's programs named FromVMName, newest first:
// the programs of every namespace with protected ports, of this build or
// an earlier one. Which namespace each serves, only the namespaces' tc
// filters say (see SomePorts).
func Candidates() ([]ebpf.ProgramID, error) {
	out, err := loadedPrograms(func(_ ebpf.ProgramID, info *ebpf.ProgramInfo) bool { return info.Name == FromVMName })
	slices.Reverse(out)
	return out, err
}

// loadedPrograms lists, in the order of their IDs, the programs loaded on
// the machine that keep says to, given each one's information: one walk
// of the kernel's programs, skipping those unloaded meanwhile.
func loadedPrograms(keep func(ebpf.ProgramID, *ebpf.ProgramInfo) bool) ([]ebpf.ProgramID, error) {
	var out []ebpf.ProgramID
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		id = next
		prog, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded meanwhile
		}
		info, err := prog.Info()
		prog.Close()
		if err == nil && keep(id, info) {
			out = append(out, id)
		}
	}
}

// SomePorts returns up to n of the ports (interface indexes) that the
// programs prog belongs to hold settings for, in the map's order: where
// to look, in a namespace, for a port that runs them.
func SomePorts(prog ebpf.ProgramID, n int) []uint32 {
	p, err := ebpf.NewProgramFromID(prog)
	if err != nil {
		return nil
	}
	defer p.Close()
	m, err := MapOf(p, mapPorts)
	if err != nil {
		return nil
	}
	defer m.Close()
	var out []uint32
	var key uint32
	for err := m.NextKey(nil, &key); err == nil && len(out) < n; err = m.NextKey(key, &key) {
		out = append(out, key)
	}
	return out
}

// IDs are the kernel's IDs of FromVM and ToVM (0 where unknown): what a
// process keeps to find them again, and what a port's filters name.
func (p *Programs) IDs() (fromVM, toVM ebpf.ProgramID) {
	return programID(p.FromVM), programID(p.ToVM)
}

func programID(prog *ebpf.Program) ebpf.ProgramID {
	info, err := prog.Info()
	if err != nil {
		return 0
	}
	id, _ := info.ID()
	return id
}
