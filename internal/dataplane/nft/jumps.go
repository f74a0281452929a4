package nft

import (
	"slices"
	"strings"
	"sync"
)

// seenJumps keeps, per firewall table, which port maps hold an element
// of each port as the last observation read them, so that a port policy's
// change deletes its port's old elements without reading the maps again:
// with a thousand ports they hold three thousand elements. Each
// observation starts it afresh; a change to a port's policy notes the
// elements it made, or makes the port's unknown when it failed, and a
// change to the table or the namespace drops the table.
type seenJumps struct {
	mu     sync.Mutex
	tables map[string]*tableJumps // by jumpsKey
}

// tableJumps are a table's port map elements by port: the kinds of the
// maps (guard, egress, ingress) that hold the port; a port it does not
// list is in none. Unknown ports have changed since.
//
// Where the table was made by this command (fresh), it also knows each
// port's chains: none but those its port policies made since, so that a
// first apply's thousand port policies ask the kernel nothing before
// their transactions (each such read opened a netfilter socket and dumped
// the maps, which grow with every port made).
type tableJumps struct {
	byPort  map[string][]string
	unknown map[string]bool
	// read, when set, are the only ports an observation read the maps
	// of (a scoped one, of a few ports among thousands): others are
	// unknown.
	read map[string]bool

	chainsKnown   bool
	chains        map[string][]string // port -> its chains, of a fresh table
	chainsUnknown map[string]bool
}

func jumpsKey(ns, table string) string { return ns + "\x00" + table }

// reset forgets everything: an observation begins.
func (s *seenJumps) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables = nil
}

// note keeps what an observation read of a table's port maps, by kind:
// of every port, or (read set) of those ports alone.
func (s *seenJumps) note(ns, table string, elems map[string][]elemNote, read map[string]bool) {
	t := &tableJumps{byPort: map[string][]string{}, unknown: map[string]bool{}, read: read}
	for _, kind := range portChains {
		for _, e := range elems[kind] {
			t.byPort[e.port] = append(t.byPort[e.port], kind)
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
	t := &tableJumps{byPort: map[string][]string{}, unknown: map[string]bool{},
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

// of returns the kinds of the maps that hold a port, and false when they
// are not known.
func (s *seenJumps) of(ns, table, port string) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tables[jumpsKey(ns, table)]
	if !ok || t.unknown[port] || t.read != nil && !t.read[port] {
		return nil, false
	}
	return slices.Clone(t.byPort[port]), true
}

// changed notes the maps that hold a port after a change to its policy:
// those of kinds, or unknown when the change failed (ok false).
func (s *seenJumps) changed(ns, table, port string, kinds []string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, found := s.tables[jumpsKey(ns, table)]
	if !found {
		return
	}
	delete(t.byPort, port)
	delete(t.unknown, port)
	if t.read != nil {
		t.read[port] = true
	}
	switch {
	case !ok:
		t.unknown[port] = true
	case len(kinds) > 0:
		t.byPort[port] = slices.Clone(kinds)
	}
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
