package nft

import (
	"maps"
	"slices"
	"testing"
)

// A table this command made knows its ports' chains and map elements
// (none, then those its changes made); one an observation read knows only
// elements, and a failed change makes a port's chains and elements
// unknown.
func TestSeenJumpsOfAFreshTable(t *testing.T) {
	var s seenJumps
	if _, ok := s.chainsOf("h", "vnet", "p1"); ok {
		t.Fatal("chains known of a table never seen")
	}
	s.fresh("h", "vnet")
	chains, ok := s.chainsOf("h", "vnet", "p1")
	if !ok || len(chains) != 0 {
		t.Fatalf("fresh table: chains %v, known %v; want none, known", chains, ok)
	}
	if kinds, ok := s.of("h", "vnet", "p1"); !ok || len(kinds) != 0 {
		t.Fatalf("fresh table: elements %v, known %v; want none, known", kinds, ok)
	}
	s.madeChains("h", "vnet", "p1", []string{"p1-guard", "p1-ingress"}, true)
	s.changed("h", "vnet", "p1", []string{"guard", "ingress"}, true)
	if chains, ok := s.chainsOf("h", "vnet", "p1"); !ok || !maps.Equal(chains, map[string]bool{"p1-guard": true, "p1-ingress": true}) {
		t.Errorf("after a change: chains %v, known %v", chains, ok)
	}
	if kinds, ok := s.of("h", "vnet", "p1"); !ok || !slices.Equal(kinds, []string{"guard", "ingress"}) {
		t.Errorf("after a change: elements %v, known %v", kinds, ok)
	}
	s.madeChains("h", "vnet", "p2", nil, false)
	s.changed("h", "vnet", "p2", nil, false)
	if _, ok := s.chainsOf("h", "vnet", "p2"); ok {
		t.Error("chains of a port whose change failed known")
	}
	if _, ok := s.of("h", "vnet", "p2"); ok {
		t.Error("elements of a port whose change failed known")
	}
	s.madeChains("h", "vnet", "p1", nil, true)
	s.changed("h", "vnet", "p1", nil, true)
	if chains, ok := s.chainsOf("h", "vnet", "p1"); !ok || len(chains) != 0 {
		t.Errorf("after removing a port's policy: chains %v, known %v", chains, ok)
	}
	if kinds, ok := s.of("h", "vnet", "p1"); !ok || len(kinds) != 0 {
		t.Errorf("after removing a port's policy: elements %v, known %v", kinds, ok)
	}
	s.note("h", "vnet", map[string][]elemNote{"egress": {{port: "p3"}}, "ingress": {{port: "p3"}}}, nil)
	if _, ok := s.chainsOf("h", "vnet", "p3"); ok {
		t.Error("chains known of a table an observation read")
	}
	if kinds, ok := s.of("h", "vnet", "p3"); !ok || !slices.Equal(kinds, []string{"egress", "ingress"}) {
		t.Errorf("observed elements %v, known %v", kinds, ok)
	}
	s.note("h", "vnet", map[string][]elemNote{"guard": {{port: "p4"}}}, map[string]bool{"p4": true, "p5": true})
	if kinds, ok := s.of("h", "vnet", "p4"); !ok || !slices.Equal(kinds, []string{"guard"}) {
		t.Errorf("elements read alone %v, known %v", kinds, ok)
	}
	if kinds, ok := s.of("h", "vnet", "p5"); !ok || len(kinds) != 0 {
		t.Errorf("a port read alone in no map: %v, known %v", kinds, ok)
	}
	if _, ok := s.of("h", "vnet", "p3"); ok {
		t.Error("elements known of a port a scoped observation did not read")
	}
	s.changed("h", "vnet", "p6", []string{"egress"}, true)
	if kinds, ok := s.of("h", "vnet", "p6"); !ok || !slices.Equal(kinds, []string{"egress"}) {
		t.Errorf("a port changed since a scoped observation: %v, known %v", kinds, ok)
	}
	s.fresh("h", "vnet")
	s.drop("h", "")
	if _, ok := s.chainsOf("h", "vnet", "p1"); ok {
		t.Error("chains known of a dropped table")
	}
}
