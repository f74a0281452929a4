package nstest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
)

// snapshotNFT describes a namespace's nftables tables: each named set or
// map with its elements, each chain with its hook, and each rule by its
// comment and the kinds of its expressions, in order. Handles, anonymous set names and counter values are left out:
// they differ between two realizations of the same rules.
func snapshotNFT(t testing.TB, ns string) []string {
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		t.Fatal(err)
	}
	chains, err := c.ListChains()
	if err != nil {
		return []string{"nft " + ns + " unreadable: " + err.Error()}
	}
	var out []string
	seen := map[string]bool{}
	for _, ch := range chains {
		if key := fmt.Sprint(ch.Table.Family, ch.Table.Name); !seen[key] {
			seen[key] = true
			out = append(out, snapshotMaps(t, c, ns, ch.Table)...)
		}
		p := fmt.Sprintf("nft %s %d/%s %s", ns, ch.Table.Family, ch.Table.Name, ch.Name)
		if ch.Hooknum != nil {
			p += fmt.Sprintf(" hook %d prio %d", *ch.Hooknum, *ch.Priority)
		}
		out = append(out, "chain "+p)
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rules {
			var kinds []string
			for _, e := range r.Exprs {
				kind := strings.ToLower(reflect.TypeOf(e).Elem().Name())
				if v, ok := e.(*expr.Verdict); ok && v.Chain != "" {
					kind += ":" + v.Chain
				}
				kinds = append(kinds, kind)
			}
			out = append(out, fmt.Sprintf("rule %s #%d %q %s", p, i, r.UserData, strings.Join(kinds, ",")))
		}
	}
	return out
}

// snapshotMaps describes a table's named sets and maps: each element by its
// key and its comment, sorted (a set's elements have
// no order).
func snapshotMaps(t testing.TB, c *nftables.Conn, ns string, table *nftables.Table) []string {
	sets, err := c.GetSets(table)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range sets {
		if s.Anonymous {
			continue
		}
		p := fmt.Sprintf("nft %s %d/%s %s", ns, table.Family, table.Name, s.Name)
		out = append(out, "set "+p)
		elems, err := c.GetSetElements(s)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, e := range elems {
			lines = append(lines, fmt.Sprintf("element %s %q %q", p, strings.TrimRight(string(e.Key), "\x00"), e.Comment))
		}
		slices.Sort(lines)
		out = append(out, lines...)
	}
	return out
}
