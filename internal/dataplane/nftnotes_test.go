package dataplane

import (
	"encoding/binary"
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
