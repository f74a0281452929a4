package dataplane

import (
	"maps"
	"testing"

	"github.com/google/nftables"
)

// A table this command made knows its ports' chains and jumps (none, then
// those its changes made); one an observation read knows only jumps, and
// a failed change makes a port's chains unknown.
func TestSeenJumpsOfAFreshTable(t *testing.T) {
	var s seenJumps
	table := &nftables.Table{Name: "vnet", Family: nftables.TableFamilyBridge}
	if _, ok := s.chainsOf("h", "vnet", "p1"); ok {
		t.Fatal("chains known of a table never seen")
	}
	s.fresh("h", "vnet")
	chains, ok := s.chainsOf("h", "vnet", "p1")
	if !ok || len(chains) != 0 {
		t.Fatalf("fresh table: chains %v, known %v; want none, known", chains, ok)
	}
	if jumps, ok := s.of("h", table, "p1"); !ok || len(jumps) != 0 {
		t.Fatalf("fresh table: jumps %v, known %v; want none, known", jumps, ok)
	}
	s.madeChains("h", "vnet", "p1", []string{"p1-guard", "p1-in"}, true)
	s.changed("h", "vnet", "p1", false)
	if chains, ok := s.chainsOf("h", "vnet", "p1"); !ok || !maps.Equal(chains, map[string]bool{"p1-guard": true, "p1-in": true}) {
		t.Errorf("after a change: chains %v, known %v", chains, ok)
	}
	if _, ok := s.of("h", table, "p1"); ok {
		t.Error("jumps of a changed port known: their handles are the kernel's")
	}
	s.madeChains("h", "vnet", "p2", nil, false)
	if _, ok := s.chainsOf("h", "vnet", "p2"); ok {
		t.Error("chains of a port whose change failed known")
	}
	s.madeChains("h", "vnet", "p1", nil, true)
	if chains, ok := s.chainsOf("h", "vnet", "p1"); !ok || len(chains) != 0 {
		t.Errorf("after removing a port's policy: chains %v, known %v", chains, ok)
	}
	s.note("h", "vnet", map[string][]ruleNote{})
	if _, ok := s.chainsOf("h", "vnet", "p3"); ok {
		t.Error("chains known of a table an observation read")
	}
	s.fresh("h", "vnet")
	s.drop("h", "")
	if _, ok := s.chainsOf("h", "vnet", "p1"); ok {
		t.Error("chains known of a dropped table")
	}
}
