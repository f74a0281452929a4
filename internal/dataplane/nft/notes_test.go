package nft

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ruleMessage is a rule as the kernel dumps it: a chain, a handle, a
// comment (none when ""), and expressions: a counter of packets when
// packets >= 0, and a verdict.
func ruleMessage(t *testing.T, chain string, handle uint64, comment string, packets int) netlink.Message {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.String(unix.NFTA_RULE_TABLE, "vnet")
	ae.String(unix.NFTA_RULE_CHAIN, chain)
	ae.Uint64(unix.NFTA_RULE_HANDLE, handle)
	ae.Nested(unix.NFTA_RULE_EXPRESSIONS, func(list *netlink.AttributeEncoder) error {
		if packets >= 0 {
			list.Nested(unix.NFTA_LIST_ELEM, func(e *netlink.AttributeEncoder) error {
				e.String(unix.NFTA_EXPR_NAME, "counter")
				e.Nested(unix.NFTA_EXPR_DATA, func(d *netlink.AttributeEncoder) error {
					d.Uint64(unix.NFTA_COUNTER_BYTES, 1500*uint64(packets))
					d.Uint64(unix.NFTA_COUNTER_PACKETS, uint64(packets))
					return nil
				})
				return nil
			})
		}
		list.Nested(unix.NFTA_LIST_ELEM, func(e *netlink.AttributeEncoder) error {
			e.String(unix.NFTA_EXPR_NAME, "immediate")
			e.Bytes(unix.NFTA_EXPR_DATA, []byte{0, 0, 0, 0})
			return nil
		})
		return nil
	})
	if comment != "" {
		ae.Bytes(unix.NFTA_RULE_USERDATA, append([]byte{0, byte(len(comment) + 1)}, comment+"\x00"...))
	}
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{Data: append([]byte{unix.NFPROTO_BRIDGE, 0, 0, 0}, b...)}
}

func TestParseRuleNotesReadsChainsHandlesCommentsAndCounters(t *testing.T) {
	notes, err := parseRuleNotes([]netlink.Message{
		ruleMessage(t, "forward", 7, "port p1 abc rules=3 jumps=2", -1),
		ruleMessage(t, "p1-in", 9, "forged-mac", 42),
		ruleMessage(t, "p1-in", 10, "", 0),
		{Data: []byte{1}}, // too short for a rule: skipped
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []ruleNote{
		{chain: "forward", handle: 7, comment: "port p1 abc rules=3 jumps=2"},
		{chain: "p1-in", handle: 9, comment: "forged-mac", packets: 42, counted: true},
		{chain: "p1-in", handle: 10, counted: true},
	}
	if len(notes) != len(want) {
		t.Fatalf("notes = %+v, want %+v", notes, want)
	}
	for i := range want {
		if notes[i] != want[i] {
			t.Errorf("note %d = %+v, want %+v", i, notes[i], want[i])
		}
	}
	if p, digest, n := parseJumpComment(notes[0].comment); p != "p1" || digest != "abc" || n != [2]int{3, 2} {
		t.Errorf("parseJumpComment = %q %q %v", p, digest, n)
	}
}

// elementsMessage is a dump message of set elements as the kernel sends
// it: each a port name, its key padded as an interface name, a verdict and
// a comment (none when "").
func elementsMessage(t *testing.T, set string, elems ...elemNote) netlink.Message {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.String(unix.NFTA_SET_ELEM_LIST_TABLE, "vnet")
	ae.String(unix.NFTA_SET_ELEM_LIST_SET, set)
	ae.Nested(unix.NFTA_SET_ELEM_LIST_ELEMENTS, func(list *netlink.AttributeEncoder) error {
		for _, e := range elems {
			list.Nested(unix.NFTA_LIST_ELEM, func(el *netlink.AttributeEncoder) error {
				el.Nested(unix.NFTA_SET_ELEM_KEY, func(k *netlink.AttributeEncoder) error {
					k.Bytes(unix.NFTA_DATA_VALUE, ifname(e.port))
					return nil
				})
				el.Nested(unix.NFTA_SET_ELEM_DATA, func(d *netlink.AttributeEncoder) error {
					d.Nested(unix.NFTA_DATA_VERDICT, func(v *netlink.AttributeEncoder) error {
						v.Int32(unix.NFTA_VERDICT_CODE, unix.NFT_JUMP)
						v.String(unix.NFTA_VERDICT_CHAIN, e.port+"-"+set)
						return nil
					})
					return nil
				})
				if e.comment != "" {
					el.Bytes(unix.NFTA_SET_ELEM_USERDATA, comment(e.comment))
				}
				return nil
			})
		}
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{Data: append([]byte{unix.NFPROTO_BRIDGE, 0, 0, 0}, b...)}
}

func TestParseElementNotesReadsPortsAndComments(t *testing.T) {
	want := []elemNote{{port: "vn12345678abcde", comment: "port vn12345678abcde sha256:ab rules=3 jumps=2"}, {port: "p2"}, {port: "p3", comment: "x"}}
	notes, err := parseElementNotes([]netlink.Message{
		elementsMessage(t, "guard", want[:2]...),
		{Data: []byte{1}}, // too short: skipped
		elementsMessage(t, "guard", want[2]),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(notes, want) {
		t.Errorf("notes = %+v, want %+v", notes, want)
	}
}

// A port's elements tell its policy's digest; missing or extra elements,
// elements that disagree and missing or extra rules make it stale.
func TestPortPoliciesFromElements(t *testing.T) {
	c := func(port string, rules, jumps int) string {
		return fmt.Sprintf("port %s sha256:ab rules=%d jumps=%d", port, rules, jumps)
	}
	elems := map[string][]elemNote{
		guardChain:   {{"ok", c("ok", 3, 2)}, {"lost", c("lost", 1, 2)}, {"mixed", c("mixed", 2, 2)}, {"plain", "port plain"}},
		egressChain:  {{"ok", c("ok", 3, 2)}, {"extra", c("extra", 1, 1)}, {"mixed", c("mixed", 3, 2)}},
		ingressChain: {{"extra", c("extra", 1, 1)}},
	}
	counts := map[string]int{"ok-guard": 2, "ok-egress": 1, "lost-guard": 1, "mixed-guard": 2, "extra-egress": 1}
	got := map[string]string{}
	for _, r := range portPolicies("h", "", nil, counts, elems) {
		got[r.Link] = r.Match
	}
	want := map[string]string{"ok": "sha256:ab", "lost": "stale sha256:ab", "mixed": "stale sha256:ab", "plain": "stale ", "extra": "stale sha256:ab"}
	if !maps.Equal(got, want) {
		t.Errorf("policies %v, want %v", got, want)
	}
	if rs := portPolicies("h", "", map[string]bool{"ok": true}, counts, elems); len(rs) != 1 || rs[0].Link != "ok" {
		t.Errorf("only ok: %+v", rs)
	}
}

func TestLookupsInPlace(t *testing.T) {
	maps3 := map[string][]elemNote{guardChain: nil, egressChain: nil, ingressChain: nil}
	lookups := map[string][]ruleNote{
		preChain: {{comment: lookupComment(guardChain)}},
		fwdChain: {{comment: lookupComment(egressChain)}, {comment: lookupComment(ingressChain)}},
	}
	if !lookupsInPlace(lookups, maps3) {
		t.Error("the lookups read as not in place")
	}
	swapped := map[string][]ruleNote{preChain: lookups[preChain], fwdChain: {lookups[fwdChain][1], lookups[fwdChain][0]}}
	jumps := map[string][]ruleNote{preChain: {{comment: "port p1 sha256:ab rules=1 jumps=1"}}, fwdChain: nil}
	extra := map[string][]ruleNote{preChain: append(slices.Clone(lookups[preChain]), ruleNote{}), fwdChain: lookups[fwdChain]}
	for name, bases := range map[string]map[string][]ruleNote{"swapped": swapped, "jumps": jumps, "extra": extra} {
		if lookupsInPlace(bases, maps3) {
			t.Errorf("%s: read as in place", name)
		}
	}
	if lookupsInPlace(lookups, map[string][]elemNote{guardChain: nil, egressChain: nil}) {
		t.Error("a missing map: read as in place")
	}
}
