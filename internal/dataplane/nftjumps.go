package dataplane

import (
	"strings"
	"sync"

	"github.com/google/nftables"
)

// seenJumps keeps, per firewall table, the base chains' jump rules of each
// port as the last observation read them, so that a port policy's change
// deletes its port's old jumps without reading the two base chains again:
// with a thousand ports they hold three thousand rules. Each observation
// starts it afresh; a change to a port's jumps makes that port's unknown
// until then, and a change to the table or the namespace drops the table.
type seenJumps struct {
	mu     sync.Mutex
	tables map[string]*tableJumps // by jumpsKey
}

// tableJumps are a table's jump rules by port; a port it does not list
// has none. Unknown ports have changed since.
//
// Where the table was made by this command (fresh), it also knows each
// port's chains: none but those its port policies made since, so that a
// first apply's thousand port policies ask the kernel nothing before
// their transactions (each such read opened a netfilter socket and dumped
// the base chains, whose jumps grow with every port made).
type tableJumps struct {
	byPort  map[string][]baseJump
	unknown map[string]bool

	chainsKnown   bool
	chains        map[string][]string // port -> its chains, of a fresh table
	chainsUnknown map[string]bool
}

// baseJump is one jump rule: its base chain and handle.
type baseJump struct {
	chain  string
	handle uint64
}

func jumpsKey(ns, table string) string { return ns + "\x00" + table }

// reset forgets everything: an observation begins.
func (s *seenJumps) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables = nil
}

// note keeps what an observation read of a table's base chains.
func (s *seenJumps) note(ns, table string, notes map[string][]ruleNote) {
	t := &tableJumps{byPort: map[string][]baseJump{}, unknown: map[string]bool{}}
	for _, base := range []string{preChain, fwdChain} {
		for _, n := range notes[base] {
			if port, _, _ := parseJumpComment(n.comment); port != "" {
				t.byPort[port] = append(t.byPort[port], baseJump{chain: base, handle: n.handle})
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tables == nil {
		s.tables = map[string]*tableJumps{}
	}
	s.tables[jumpsKey(ns, table)] = t
}

// fresh notes a table this command just made: no port has jumps or chains.
func (s *seenJumps) fresh(ns, table string) {
	t := &tableJumps{byPort: map[string][]baseJump{}, unknown: map[string]bool{},
		chainsKnown: true, chains: map[string][]string{}, chainsUnknown: map[string]bool{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tables == nil {
		s.tables = map[string]*tableJumps{}
	}
	s.tables[jumpsKey(ns, table)] = t
}

// chainsOf returns which of a port's chains exist, and false when that is
// not known.
func (s *seenJumps) chainsOf(ns, table, port string) (map[string]bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tables[jumpsKey(ns, table)]
	if !ok || !t.chainsKnown || t.chainsUnknown[port] {
		return nil, false
	}
	out := map[string]bool{}
	for _, name := range t.chains[port] {
		out[name] = true
	}
	return out, true
}

// madeChains notes a port's chains after a change: those named, or
// unknown when the change failed (ok false).
func (s *seenJumps) madeChains(ns, table, port string, chains []string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, found := s.tables[jumpsKey(ns, table)]
	if !found || !t.chainsKnown {
		return
	}
	if !ok {
		t.chainsUnknown[port] = true
		return
	}
	delete(t.chainsUnknown, port)
	if len(chains) == 0 {
		delete(t.chains, port)
		return
	}
	t.chains[port] = chains
}

// of returns a port's jump rules, and false when they are not known.
func (s *seenJumps) of(ns string, table *nftables.Table, port string) ([]*nftables.Rule, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tables[jumpsKey(ns, table.Name)]
	if !ok || t.unknown[port] {
		return nil, false
	}
	var out []*nftables.Rule
	for _, j := range t.byPort[port] {
		out = append(out, baseRule(table, j.chain, ruleNote{handle: j.handle}))
	}
	return out, true
}

// changed marks a port's jumps unknown (known: it has none now).
func (s *seenJumps) changed(ns, table, port string, none bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tables[jumpsKey(ns, table)]
	if !ok {
		return
	}
	delete(t.byPort, port)
	t.unknown[port] = !none
}

// drop forgets a table of ns, or every table of ns for "".
func (s *seenJumps) drop(ns, table string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if table != "" {
		delete(s.tables, jumpsKey(ns, table))
		return
	}
	for k := range s.tables {
		if strings.HasPrefix(k, ns+"\x00") {
			delete(s.tables, k)
		}
	}
}
