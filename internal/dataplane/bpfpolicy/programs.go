package bpfpolicy

import (
	"errors"
	"fmt"
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
	fdb          *ebpf.Map // bridge and MAC -> port index, of ports that take frames directly
	counts       *ebpf.Map // port, generation and index -> a count
	rulesOf      *ebpf.Map // port and generation -> the port's rules
	flowsOf      *ebpf.Map // port -> its flow table
	fragsOf      *ebpf.Map // port -> its fragment table
	settings     *ebpf.Map // what vnet found of the kernel (policyKernelSettings)
}

// The maps' names, as the programs hold them: how Open finds them.
const (
	mapPorts    = "ports"
	mapFDB      = "fdb"
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
	return &Programs{FromVM: objs.PortFromVm, ToVM: objs.PortToVm, ports: objs.Ports, fdb: objs.Fdb,
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
// an ACL also writes the maps of maps that hold its rules and tables,
// each write of which waits for the programs running on every CPU.
func (p *Programs) Set(port uint32, c Compiled, bridge uint32, flows *ebpf.Map) error {
	old, err := p.port(port)
	had := err == nil
	if err != nil && !errors.Is(err, ErrNoPort) {
		return err
	}
	spec, err := collectionSpec()
	if err != nil {
		return err
	}
	next := c.Port
	next.Bridge = bridge
	if bridge == 0 {
		next.Direct = 0
	}
	acl := next.Flags&flagACL != 0
	oldKey := policyGenKey{Port: port, Gen: old.Gen}
	same := had && p.countsOf(port, old.Gen) == c.Counters && p.sameRules(oldKey, c.Rules)
	next.Gen = old.Gen
	if !same {
		next.Gen = old.Gen + 1
		if err := p.newCounts(port, next.Gen, c.Counters); err != nil {
			return err
		}
		if len(c.Rules) > 0 {
			if err := p.writeRules(spec, policyGenKey{Port: port, Gen: next.Gen}, c.Rules); err != nil {
				return err
			}
		}
	}
	if acl {
		if err := p.tables(spec, port, flows); err != nil {
			return err
		}
	}
	// Frames stop being handed to the port under its old bridge and MAC
	// before its settings change.
	if had && old.Direct != 0 && (next.Direct == 0 || old.Bridge != next.Bridge || old.Mac != next.Mac) {
		if err := p.unlist(port, old); err != nil {
			return err
		}
	}
	if err := p.ports.Update(port, next, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write port %d's settings: %w", port, mapFull(err))
	}
	if next.Direct != 0 {
		if err := p.fdb.Update(policyFdbKey{Bridge: next.Bridge, Mac: next.Mac}, port, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("list port %d as taking frames directly: %w", port, mapFull(err))
		}
	}
	if had && !same {
		p.deleteCounts(port, old.Gen)
		p.deleteRules(oldKey)
	}
	if !acl {
		p.dropTables(port)
	}
	return nil
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

// writeRules puts a generation's rules in a map of their own.
func (p *Programs) writeRules(spec *ebpf.CollectionSpec, key policyGenKey, rules []policyRule) error {
	m, err := newRules(spec, rules)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := p.rulesOf.Update(key, uint32(m.FD()), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write port %d's rules: %w", key.Port, mapFull(err))
	}
	return nil
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

// dropTables deletes a port's flow and fragment tables, if it has them.
func (p *Programs) dropTables(port uint32) {
	for _, outer := range []*ebpf.Map{p.flowsOf, p.fragsOf} {
		if m := inner(outer, port); m != nil {
			m.Close()
			deleteKeys(outer, port)
		}
	}
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
	s := spec.Maps["rules_map"].Copy()
	s.MaxEntries = uint32(len(rules))
	m, err := ebpf.NewMap(s)
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

// tables gives a port with an ACL its flow and fragment tables, unless it
// has them: the flow table handed over (an earlier build's) when there is
// one, else a new one.
func (p *Programs) tables(spec *ebpf.CollectionSpec, port uint32, flows *ebpf.Map) error {
	if m := inner(p.flowsOf, port); m != nil {
		m.Close()
	} else {
		if flows == nil || !sameLayout(flows, spec.Maps["flows_map"]) {
			s := spec.Maps["flows_map"].Copy()
			s.MaxEntries = MaxFlows
			m, err := ebpf.NewMap(s)
			if err != nil {
				return fmt.Errorf("make port flow table: %w", err)
			}
			defer m.Close()
			flows = m
		}
		if err := p.flowsOf.Update(port, uint32(flows.FD()), ebpf.UpdateAny); err != nil {
			return fmt.Errorf("write port %d's flow table: %w", port, mapFull(err))
		}
	}
	if m := inner(p.fragsOf, port); m != nil {
		m.Close()
		return nil
	}
	s := spec.Maps["frags_map"].Copy()
	s.MaxEntries = maxFrags
	m, err := ebpf.NewMap(s)
	if err != nil {
		return fmt.Errorf("make port fragment table: %w", err)
	}
	defer m.Close()
	if err := p.fragsOf.Update(port, uint32(m.FD()), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write port %d's fragment table: %w", port, mapFull(err))
	}
	return nil
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

// unlist stops other ports handing the port frames directly.
func (p *Programs) unlist(port uint32, cfg policyPort) error {
	key := policyFdbKey{Bridge: cfg.Bridge, Mac: cfg.Mac}
	var at uint32
	if p.fdb.Lookup(key, &at) != nil || at != port {
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
	p.deleteRules(policyGenKey{Port: port, Gen: cfg.Gen})
	p.dropTables(port)
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
